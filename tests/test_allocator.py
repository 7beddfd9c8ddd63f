"""common/allocator.py: with the thresholds set, a megabyte buffer allocated and freed over
and over is recycled from the heap instead of being faulted in (and zeroed) afresh each time;
REPLOG_MALLOC_TUNING=0 leaves glibc's defaults."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Allocates and frees 1.2 MB buffers 300 times on the main thread (where the event loop
# builds Fetch responses) and prints whether tune() took, then the minor page faults taken.
_CHILD = """
import resource
from common import allocator
print(allocator.tune())
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(300):
    a = b"x" * (1200 * 1024)
    b = a + b"y"
    del a, b
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def _faults(tuning: str) -> tuple[bool, int]:
    r = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, check=False,
                       timeout=60, env=dict(os.environ, REPLOG_MALLOC_TUNING=tuning),
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 0, r.stderr
    took, faults = r.stdout.split()
    return took == "True", int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_tuned_buffers_are_recycled_not_faulted_in_again():
    took, tuned = _faults("1")
    off, untuned = _faults("0")
    assert took and not off
    # 300 x 2 buffers of ~300 pages each: untuned, every one is faulted in afresh.
    assert untuned > 300 * 290
    assert tuned * 10 < untuned

"""Scenario scripts (tests/group/testdata/*.txt) against the group coordinator core
(broker/group/core.py): eager and cooperative rebalances, session expiry, static membership
and fencing (KIP-345), MEMBER_ID_REQUIRED (KIP-394), group.max.size, commits answered once
their append completes, loading and unloading __consumer_offsets partitions, offset expiry and
group deletion. Each compares every effect with the expected output in the file; REWRITE=1
regenerates the files (review the diff)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.group.script import rewrite_requested, run_script

TESTDATA = Path(__file__).parent / "testdata"
SCRIPTS = sorted(TESTDATA.glob("*.txt"))


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_scenario(path: Path) -> None:
    expected, actual = run_script(path)
    if rewrite_requested():
        path.write_text(actual.rstrip("\n") + "\n")
        return
    assert actual.rstrip("\n") == expected.rstrip("\n")
    assert "INVARIANT" not in actual and "MISMATCH" not in actual


def test_there_are_scenarios() -> None:
    assert len(SCRIPTS) >= 10

"""``make soak``: loop the replication integration tests on random seeds for a while.

Each round draws a seed, exports it as ``REPLOG_SEED`` (tests/cluster/test_replication_soak.py
draws its fault schedule from it; tests/conftest.py seeds every test's ``random`` with it) and
runs the replication tests that start real processes plus the in-process interleaving tests.
The first failing round stops the soak and prints the command that replays its seed.

    python tools/soak.py [--minutes 30] [--seed S] [pytest paths...]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time

DEFAULT_TESTS = [
    "tests/cluster/test_replication_soak.py",
    "tests/cluster/test_replication_faults.py",
    "tests/cluster/test_fetcher_isolation.py",
    "tests/broker/test_replication_findings.py",
    "tests/broker/test_replication_inprocess.py",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "30")))
    ap.add_argument("--seed", type=int, default=None, help="the first round's seed")
    ap.add_argument("tests", nargs="*", default=DEFAULT_TESTS)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.minutes * 60
    rounds = 0
    seeds = []
    while True:
        seed = args.seed if args.seed is not None and rounds == 0 else rng.randrange(1, 1 << 31)
        seeds.append(seed)
        started = time.monotonic()
        env = {**os.environ, "REPLOG_SEED": str(seed)}
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-x", "-p",
                              "no:cacheprovider", *args.tests], env=env)
        rounds += 1
        print(f"soak round {rounds}: seed {seed}, {'ok' if rc == 0 else 'FAILED'} in "
              f"{time.monotonic() - started:.0f} s", flush=True)
        if rc != 0:
            print(f"soak FAILED on round {rounds}; replay: REPLOG_SEED={seed} "
                  f"python -m pytest {' '.join(args.tests)}", flush=True)
            return rc
        if time.monotonic() >= deadline:
            break
    print(f"soak passed: {rounds} rounds, seeds {', '.join(map(str, seeds))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

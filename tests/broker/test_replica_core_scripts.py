"""Scenario scripts (tests/broker/testdata/*.txt) against the broker's replication core
(broker/replica_core.py) and the pure rules its shell applies around it.

Each script drives one partition's replicas on a few brokers - leader election and the epoch
start, truncation on a diverging epoch, ISR shrink and refused expansion, the HW under min ISR,
stray replicas, JBOD, KIP-501 and KIP-461 - and compares every effect and state line with the
expected output in the file. REWRITE=1 regenerates the files; review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.replica_script import rewrite_requested, run_script

TESTDATA = Path(__file__).parent / "testdata"
SCRIPTS = sorted(TESTDATA.glob("*.txt"))


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_scenario(path: Path) -> None:
    expected, actual = run_script(path)
    if rewrite_requested():
        path.write_text(actual.rstrip("\n") + "\n")
        return
    assert actual.rstrip("\n") == expected.rstrip("\n")


def test_there_are_scenarios() -> None:
    assert len(SCRIPTS) >= 8

"""Scenario scripts (tests/controller/testdata/*.txt) against the controller's pure core.

Each script drives one ControllerContext through broker failures, startups, controlled
shutdowns, AlterPartition, elections and deletions, and compares what every decision wrote and
sent with the expected output in the file. REWRITE=1 regenerates the files; review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.controller.script import rewrite_requested, run_script

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

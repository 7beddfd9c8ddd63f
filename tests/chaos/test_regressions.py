"""Replays every run of ``regression_seeds.txt`` through ``replog chaos`` (its own cluster)
and asserts a VALID verdict: a seed that once failed must keep passing, and the schedule it
replays is the one that failed (the schedule is a pure function of the line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos import disk, netfilter
from chaos.schedule import NEEDS_ROOT, make_schedule, parse_nemeses
from tests.chaos.test_chaos_cli import _chaos

SEEDS_FILE = Path(__file__).with_name("regression_seeds.txt")


def regression_lines(path: Path = SEEDS_FILE) -> list[tuple[int, float, str, str, bool]]:
    """(seed, duration, nemeses, why, soak) for each line that is not a comment. A line may end
    its run with the word ``soak``: make soak replays it, make test does not (a run whose faults
    keep it waiting for a minute and more, with a fast sibling in make test that says which)."""
    runs = []
    for line in path.read_text().splitlines():
        text, _, why = line.partition("#")
        if not text.strip():
            continue
        seed, duration, nemeses, *rest = text.split()
        if rest not in ([], ["soak"]):
            raise ValueError(f"{path.name}: {line!r} is not `seed duration nemeses [soak]  # why`")
        runs.append((int(seed), float(duration), nemeses, why.strip(), rest == ["soak"]))
    return runs


def regression_runs(path: Path = SEEDS_FILE) -> list[tuple[int, float, str, str]]:
    """(seed, duration, nemeses, why) for each line that is not a comment."""
    return [run[:4] for run in regression_lines(path)]


def _params() -> list:
    return [pytest.param(seed, duration, nemeses, why,
                         id=f"seed{seed}-{duration:g}s-{nemeses}",
                         marks=[pytest.mark.soak] if soak else [])
            for seed, duration, nemeses, why, soak in regression_lines()]


def test_the_list_is_well_formed():
    runs = regression_runs()
    assert runs
    for seed, duration, nemeses, why in runs:
        assert "all" not in nemeses.split(","), "name the nemeses: `all` changes over time"
        assert why, f"seed {seed}: say why it is on the list"
        assert make_schedule(seed, duration, parse_nemeses(nemeses)).faults, \
            f"seed {seed} x {duration:g}s draws no fault"


def _unavailable(nemeses: str) -> str | None:
    if NEEDS_ROOT & set(parse_nemeses(nemeses)):
        return netfilter.unavailable() or disk.unavailable()
    return None


@pytest.mark.integration
@pytest.mark.parametrize(("seed", "duration", "nemeses", "why"), _params())
def test_regression_seed_is_valid(tmp_path, seed, duration, nemeses, why):
    # A nemesis that cannot run here keeps its slot and is reported skipped (the run still
    # replays the others); the verdict must hold either way.
    reason = _unavailable(nemeses)
    if reason is not None:
        print(f"some nemeses of seed {seed} are skipped: {reason}")
    proc, _data = _chaos(tmp_path, "--seed", str(seed), "--duration", f"{duration:g}",
                         "--nemesis", nemeses)
    assert proc.returncode == 0, f"{why}\n{proc.stdout}\n{proc.stderr}"
    assert "Verdict: VALID" in proc.stdout

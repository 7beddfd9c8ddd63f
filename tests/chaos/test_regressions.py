"""Replays every run of ``regression_seeds.txt`` through ``replog chaos`` (its own cluster)
and asserts a VALID verdict: a seed that once failed must keep passing, and the schedule it
replays is the one that failed (the schedule is a pure function of the line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chaos import disk, netfilter, sweep
from chaos.schedule import NEEDS_ROOT, make_schedule, parse_nemeses
from tests.chaos.test_chaos_cli import _chaos

SEEDS_FILE = Path(__file__).with_name("regression_seeds.txt")


# The cluster options a line may carry (python -m chaos.sweep prints them): its run's own
# ZooKeeper ensemble, hosts and racks.
OPTIONS = ("--zookeeper-nodes", "--hosts", "--racks", "--inter-rack-latency-ms")
FORM = "`seed duration nemeses [--option[=value] ...] [soak]  # why`"


def regression_lines(path: Path = SEEDS_FILE
                     ) -> list[tuple[int, float, str, tuple[str, ...], str, bool]]:
    """(seed, duration, nemeses, options, why, soak) for each line that is not a comment.
    Options (``--zookeeper-nodes=3``, ``--hosts``, ...) go to ``replog chaos`` as written. A
    line may end with the word ``soak``: make soak replays it, make test does not (a run whose
    faults keep it waiting for a minute and more, with a fast sibling in make test)."""
    runs = []
    for line in path.read_text().splitlines():
        text, _, why = line.partition("#")
        if not text.strip():
            continue
        seed, duration, nemeses, *rest = text.split()
        soak = rest[-1:] == ["soak"]
        options = tuple(rest[:-1] if soak else rest)
        if any(o.split("=")[0] not in OPTIONS for o in options):
            raise ValueError(f"{path.name}: {line!r} is not {FORM}, options among {OPTIONS}")
        runs.append((int(seed), float(duration), nemeses, options, why.strip(), soak))
    return runs


def regression_runs(path: Path = SEEDS_FILE) -> list[tuple[int, float, str, str]]:
    """(seed, duration, nemeses, why) for each line that is not a comment."""
    return [(seed, duration, nemeses, why)
            for seed, duration, nemeses, _options, why, _soak in regression_lines(path)]


def _params() -> list:
    return [pytest.param(seed, duration, nemeses, options, why,
                         id=f"seed{seed}-{duration:g}s-{nemeses}{''.join(options)}",
                         marks=[pytest.mark.soak] if soak else [])
            for seed, duration, nemeses, options, why, soak in regression_lines()]


def test_a_sweeps_regression_line_reads_back_with_its_options(tmp_path):
    args = sweep.parser().parse_args(["--zookeeper-nodes", "3", "--hosts", "--racks", "2",
                                      "--inter-rack-latency-ms", "2.5", "--nemesis",
                                      "kill,zk-minority"])
    line = sweep.regression_line(42, "30s", args.nemesis, sweep.cluster_options(args))
    assert line == ("42 30 kill,zk-minority --zookeeper-nodes=3 --hosts --racks=2 "
                    "--inter-rack-latency-ms=2.5")
    f = tmp_path / "seeds.txt"
    f.write_text(f"{line} soak  # why\n{sweep.regression_line(7, '8', 'kill', [])}  # plain\n")
    assert regression_lines(f) == [
        (42, 30.0, "kill,zk-minority", ("--zookeeper-nodes=3", "--hosts", "--racks=2",
                                        "--inter-rack-latency-ms=2.5"), "why", True),
        (7, 8.0, "kill", (), "plain", False)]
    f.write_text("7 8 kill --brokers=5  # not a cluster option a line may carry\n")
    with pytest.raises(ValueError, match="options among"):
        regression_lines(f)


def test_the_list_is_well_formed():
    runs = regression_runs()
    assert runs
    for seed, duration, nemeses, why in runs:
        assert "all" not in nemeses.split(","), "name the nemeses: `all` changes over time"
        assert why, f"seed {seed}: say why it is on the list"
        assert make_schedule(seed, duration, parse_nemeses(nemeses)).faults, \
            f"seed {seed} x {duration:g}s draws no fault"
    for seed, duration, nemeses, options, _why, _soak in regression_lines():
        if options and _hosts_unavailable(options) is None:
            # replog chaos takes the line's options (an ensemble for zk-* nemeses, root for
            # --hosts): checked without starting anything.
            check = subprocess.run([sys.executable, "-m", "admin.cli", "chaos", "--seed",
                                    str(seed), "--duration", f"{duration:g}", "--nemesis",
                                    nemeses, *options, "--schedule-only"],
                                   capture_output=True, text=True, check=False)
            assert check.returncode == 0, f"seed {seed}: {check.stderr}"


def _unavailable(nemeses: str) -> str | None:
    if NEEDS_ROOT & set(parse_nemeses(nemeses)):
        return netfilter.unavailable() or disk.unavailable()
    return None


def _hosts_unavailable(options: tuple[str, ...]) -> str | None:
    if "--hosts" in options:
        return netfilter.unavailable()  # network namespaces and nftables: root
    return None


@pytest.mark.integration
@pytest.mark.parametrize(("seed", "duration", "nemeses", "options", "why"), _params())
def test_regression_seed_is_valid(tmp_path, seed, duration, nemeses, options, why):
    # A nemesis that cannot run here keeps its slot and is reported skipped (the run still
    # replays the others); the verdict must hold either way.
    reason = _unavailable(nemeses)
    if reason is not None:
        print(f"some nemeses of seed {seed} are skipped: {reason}")
    hosts = _hosts_unavailable(options)
    if hosts is not None:
        pytest.skip(f"--hosts needs {hosts}")
    proc, _data = _chaos(tmp_path, "--seed", str(seed), "--duration", f"{duration:g}",
                         "--nemesis", nemeses, *options)
    assert proc.returncode == 0, f"{why}\n{proc.stdout}\n{proc.stderr}"
    assert "Verdict: VALID" in proc.stdout

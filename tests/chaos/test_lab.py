"""``replog lab`` (chaos/lab/, chaos/lab_cli.py): the experiments' schedules, the command's
refusals, the progress line, and one real A/B run of kip-966 that is interrupted with SIGINT
and resumed (its analysis: tests/analytics/test_lab.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from chaos import lab
from chaos.schedule import Timeouts
from harness.local_cluster import REPO_ROOT
from tests.admin.test_cli import replog


def test_same_seed_same_schedule_for_every_arm():
    a = lab.last_replica_standing(7)
    assert a.to_json() == lab.last_replica_standing(7).to_json()
    assert a.to_json() != lab.last_replica_standing(8).to_json()
    stale, follower, leader = (f.target[0] for f in a.faults)
    assert {stale, follower, leader} == {"broker-1", "broker-2", "broker-3"}
    assert [f.nemesis for f in a.faults] == ["lab-stop", "lab-stop", "lab-kill"]


@pytest.mark.parametrize("seed", range(1, 21))
def test_last_replica_standing_order(seed):
    t = Timeouts()
    s, b, a = lab.last_replica_standing(seed, t).faults
    # stopped S, then B, then A killed; back: S first (after A's session expired), B, A last
    assert s.at_s < b.at_s < a.at_s
    assert a.at_s + t.session_timeout_s < s.end_s < b.end_s < a.end_s
    # acks=all writes S misses: B stops at least 3 s after S
    assert b.at_s - s.at_s >= 3.0
    # B soon after S (a fenced ELR member worth waiting for), A long after B
    assert b.end_s - s.end_s < 5.0 and a.end_s - b.end_s >= 6.0


@pytest.mark.parametrize("name", ["kip-461", "jbod", "kip-501"])
def test_one_fault_experiments(name):
    exp = lab.EXPERIMENTS[name]
    t = Timeouts()
    for seed in range(1, 11):
        s = exp.schedule(seed, t)
        assert s.to_json() == exp.schedule(seed, t).to_json()
        (f,) = s.faults
        # the fault outlasts several lag periods: long enough for an ISR to show it
        assert f.at_s >= 3.0 and f.duration_s > 3 * t.lag_time_max_s
    assert len({exp.schedule(seed, t).to_json() for seed in range(1, 11)}) == 10
    # every arm names its switch explicitly, so a changed default changes no arm
    keys = [set(a.overrides) for a in exp.arms]
    assert all(k and k == keys[0] for k in keys), keys


def test_reassignment_schedule_is_the_seeds():
    exp = lab.EXPERIMENTS["reassignment"]
    t = Timeouts()
    schedules = [exp.schedule(seed, t) for seed in range(1, 31)]
    assert all(s.to_json() == exp.schedule(s.seed, t).to_json() for s in schedules)
    assert len({s.to_json() for s in schedules}) == 30
    for s in schedules:
        move, kill = s.faults
        assert (move.nemesis, move.duration_s) == ("lab-reassign", 0.0)
        assert 3.0 <= move.at_s <= 4.0
        p, leaving = move.target
        assert p in {f"partition-{q}" for q in lab.WORKLOAD_ASSIGNMENT}
        assert leaving in {"broker-1", "broker-2", "broker-3"}
        # the kill's slot: with the move, 0.1-0.3 s after its request is accepted; the
        # killed controller back only once the other one has taken over
        assert (kill.nemesis, kill.target[0], kill.at_s) == ("lab-failover", "controller",
                                                             move.at_s)
        assert 0.1 <= float(kill.target[1]) <= 0.3
        assert kill.duration_s > t.session_timeout_s + 3.0
    # over the seeds, every partition and every leaving broker comes up
    assert {s.faults[0].target[0] for s in schedules} == {"partition-0", "partition-1",
                                                          "partition-2"}
    assert {s.faults[0].target[1] for s in schedules} == {"broker-1", "broker-2", "broker-3"}


def test_reassignment_arms():
    exp = lab.EXPERIMENTS["reassignment"]
    assert (exp.brokers, exp.controllers) == (4, 2)
    by_name = {a.name: a for a in exp.arms}
    assert list(by_name) == ["unthrottled", "throttle-low", "throttle-high",
                             "unthrottled-failover", "throttle-low-failover",
                             "throttle-high-failover"]
    for name, a in by_name.items():
        assert a.overrides == {}  # the cluster's config is the same: the move differs
        assert a.options["lab_failover"] == name.endswith("-failover")
        assert a.baseline == name.startswith("unthrottled")
    assert by_name["unthrottled"].options["lab_throttle"] is None
    assert by_name["throttle-low"].options["lab_throttle"] == lab.THROTTLE_LOW
    assert by_name["throttle-high-failover"].options["lab_throttle"] == lab.THROTTLE_HIGH
    assert lab.THROTTLE_LOW < lab.THROTTLE_HIGH


def test_reassignment_targets():
    current = {("b", 0): [1, 2, 3], ("b", 1): [2, 3, 1], ("lab", 2): [3, 1, 2],
               ("lab", 0): [1, 2, 4]}
    # broker 3's place goes to 4, in its position; a partition without 3 stays as it is
    assert lab.reassignment_targets(current, 3) == {
        ("b", 0): [1, 2, 4], ("b", 1): [2, 4, 1], ("lab", 2): [4, 1, 2]}
    assert lab.reassignment_targets(current, 5) == {}


def test_copy_figures():
    # 100 bytes in all; 95 had arrived by 0.4 s
    got = lab.copy_figures([(0.1, 0.0), (0.2, 50.0), (0.4, 95.0), (0.5, 99.0), (2.0, 100.0)])
    assert got == {"bytes_in": 100, "copy_s": 0.4, "copy_bytes": 95}
    assert lab.copy_figures([]) == {"bytes_in": None, "copy_s": None, "copy_bytes": None}
    assert lab.copy_figures([(0.1, 0.0)])["copy_s"] is None  # nothing arrived


def test_progress_line():
    r = lab.LabRun(lab.EXPERIMENTS["kip-966"], lab.EXPERIMENTS["kip-966"].arms[2], 2,
                   Path("x"))
    assert lab.progress_line(4, 10, r, 190.0, [30.0, 40.0]) == \
        "[########------------] 4/10 elr-balanced seed 2, 0:03:10 elapsed, ~0:03:30 left"
    assert lab.progress_line(0, 10, r, 0.0, []).endswith("time left unknown")
    assert lab.progress_line(10, 10, None, 3700.0, [1.0]) == \
        "[####################] 10/10 1:01:40 elapsed, ~0:00:00 left"


def test_plan_goes_seed_by_seed(tmp_path):
    exp = lab.EXPERIMENTS["kip-966"]
    runs = lab.plan(exp, exp.arms[:2], 2, tmp_path)
    assert [r.run_id for r in runs] == [
        "unclean-election/seed-1", "no-unclean-election/seed-1",
        "unclean-election/seed-2", "no-unclean-election/seed-2"]
    assert runs[0].dir == tmp_path / "runs" / "unclean-election" / "seed-1"


async def test_list_names_every_experiment():
    rc, out, err = await replog("lab", "list")
    assert rc == 0, err
    names = [line.split()[0] for line in out.splitlines()]
    assert names == ["kip-966", "kip-461", "kip-501", "jbod", "reassignment"]
    assert "not runnable" not in out  # every experiment runs
    assert "unclean-election, no-unclean-election, elr-balanced, elr-proactive, elr-manual" \
        in out
    assert "unthrottled, throttle-low, throttle-high, unthrottled-failover, " \
        "throttle-low-failover, throttle-high-failover" in out.splitlines()[-1]


@pytest.mark.parametrize("args, message", [
    (["nope"], "no experiment 'nope'"),
    (["kip-966", "--arms", "elr-balanced,foo"], "experiment kip-966 has no arm 'foo'"),
    (["kip-966", "--seeds", "0"], "--seeds must be at least 1, got 0"),
    (["reassignment", "--arms", "throttled"], "experiment reassignment has no arm 'throttled'"),
])
async def test_run_refuses_in_one_line_and_creates_nothing(tmp_path, args, message):
    out = tmp_path / "out"
    rc, stdout, err = await replog("lab", "run", *args, "--out", str(out))
    assert rc == 1 and err.startswith("Error: ") and message in err, (rc, stdout, err)
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


async def test_run_refuses_a_used_out_dir(tmp_path):
    (tmp_path / "other").write_text("x")
    rc, _, err = await replog("lab", "run", "kip-966", "--out", str(tmp_path))
    assert rc == 1 and "is not empty and holds no lab" in err, err
    (tmp_path / "other").unlink()
    (tmp_path / "lab.json").write_text(json.dumps({"experiment": "kip-966"}))
    rc, _, err = await replog("lab", "run", "kip-966", "--out", str(tmp_path))
    assert rc == 1 and "--resume" in err, err
    (tmp_path / "lab.json").write_text(json.dumps({"experiment": "jbod"}))
    rc, _, err = await replog("lab", "run", "kip-966", "--out", str(tmp_path), "--resume")
    assert rc == 1 and "holds the lab of experiment jbod" in err, err


def _cluster_pids(run_dir: Path) -> list[int]:
    try:
        info = json.loads((run_dir / "cluster" / "cluster.json").read_text())
    except (OSError, ValueError):
        return []
    return [p["pid"] for role in ("brokers", "controllers") for p in info.get(role, [])
            if p.get("pid")]


@pytest.mark.integration
@pytest.mark.skipif(os.environ.get("REPLOG_LAB_TESTS") != "1",
                    reason="about 70 s of real runs: 'make lab' runs it (REPLOG_LAB_TESTS=1)")
def test_kip_966_ab_interrupted_and_resumed(tmp_path):
    """unclean-election and elr-balanced on seed 1: SIGINT during the second run stops the
    command (status 130) with that run's cluster down and no result; --resume runs it again
    and keeps the first. The blind unclean election loses acknowledged records; ELR, on the
    same fault timeline, loses none."""
    out = tmp_path / "lab"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "admin.cli", "lab", "run", "kip-966", "--seeds", "1",
         "--arms", "unclean-election,elr-balanced", "--out", str(out)],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = lab.run_dir(out, "unclean-election", 1)
    second = lab.run_dir(out, "elr-balanced", 1)
    try:
        deadline = time.monotonic() + 240
        while not _cluster_pids(second) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        pids = _cluster_pids(second)
        assert pids, "the second run never started its cluster"
        time.sleep(3)  # its schedule under way
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (stdout, stderr)
    assert "--resume" in stderr and "1/2 elr-balanced seed 1" in stdout, (stdout, stderr)
    assert (first / lab.RESULT).is_file() and not (second / lab.RESULT).is_file()
    assert not [p for p in pids if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]

    before = (first / lab.RESULT).read_text()
    exp = lab.EXPERIMENTS["kip-966"]
    lines: list[str] = []
    results = lab.run_lab(exp, lab.parse_arms(exp, "unclean-election,elr-balanced"), 1, out,
                          True, lines.append)
    assert lines[0] == "Resuming: 1 of 2 run(s) already finished", lines
    assert (first / lab.RESULT).read_text() == before  # not run again
    by_arm = {r["arm"]: r for r in results}
    assert (first / "schedule.json").read_text() == (second / "schedule.json").read_text()
    unclean, elr = by_arm["unclean-election"], by_arm["elr-balanced"]
    assert unclean["acked_lost"] > 0 and unclean["unclean_elections"] > 0, unclean
    assert elr["acked_lost"] == 0 and elr["unclean_elections"] == 0 and elr["valid"], elr
    for d in (first, second):
        assert (d / "history.jsonl").is_file() and (d / "verdict.json").is_file()
        assert (d / "states.jsonl").stat().st_size > 0
        assert any((d / "export" / "events").glob("*.events.jsonl"))


def test_a_run_that_breaks_costs_only_itself(tmp_path, monkeypatch):
    # A cluster that fails to start cannot be had at will: run_one is replaced by one that
    # raises for one run and finishes the others.
    async def fake_run_one(r, log=print):
        if r.run_id == "no-unclean-election/seed-1":
            raise RuntimeError("cluster did not start")
        r.dir.mkdir(parents=True, exist_ok=True)
        (r.dir / lab.RESULT).write_text(json.dumps({"run": r.run_id, "valid": True,
                                                    "acked_lost": 0, "unclean_elections": 0,
                                                    "max_unavailable_s": 1.0, "wall_s": 1.0}))
        return json.loads((r.dir / lab.RESULT).read_text())
    monkeypatch.setattr(lab, "run_one", fake_run_one)
    exp = lab.EXPERIMENTS["kip-966"]
    lines: list[str] = []
    results = lab.run_lab(exp, exp.arms[:2], 2, tmp_path / "out", log=lines.append)
    assert [r["run"] for r in results] == ["unclean-election/seed-1",
                                           "unclean-election/seed-2",
                                           "no-unclean-election/seed-2"]
    assert any("no-unclean-election/seed-1: FAILED, no result (RuntimeError: cluster did "
               "not start)" in x for x in lines), lines
    assert lines[-1] == "1 run(s) failed without a result: --resume runs them again"


def test_bench_lab_reads_wall_times(tmp_path, monkeypatch, capsys):
    """``python -m bench lab``: the wall time per arm and per run from a lab's results, and a
    hint, exit status 0, where there is none."""
    from bench import bench_lab
    monkeypatch.setattr(bench_lab, "save_results", lambda *a: None)
    monkeypatch.setenv("LAB_OUT", str(tmp_path))
    bench_lab.main(None)
    assert "no replog lab output in" in capsys.readouterr().out

    out = tmp_path / "reassignment"
    out.mkdir()
    (out / "lab.json").write_text(json.dumps({"experiment": "reassignment",
                                              "arms": {"a": {}, "b": {}, "c": {}}}))
    for arm, seed, wall in (("a", 1, 20.0), ("a", 2, 30.0), ("a", 10, 40.0), ("b", 1, 50.0)):
        d = lab.run_dir(out, arm, seed)
        d.mkdir(parents=True)
        (d / lab.RESULT).write_text(json.dumps({"arm": arm, "seed": seed, "wall_s": wall}))
    assert bench_lab.lab_dirs(tmp_path) == [out] == bench_lab.lab_dirs(out)
    experiment, walls = bench_lab.read_walls(out)
    assert (experiment, walls) == ("reassignment", {"a": [20.0, 30.0, 40.0], "b": [50.0]})
    lines, figures = bench_lab.table(experiment, walls)
    assert figures == {"arms": {"a": {"runs": 3, "median_s": 30.0, "min_s": 20.0,
                                      "max_s": 40.0, "total_s": 90.0},
                                "b": {"runs": 1, "median_s": 50.0, "min_s": 50.0,
                                      "max_s": 50.0, "total_s": 50.0}},
                       "runs": 4, "mean_s": 35.0, "total_s": 140.0}
    assert lines[0] == "reassignment: 4 runs, 35.0 s a run on average, 2.3 min in all"
    bench_lab.main(None)
    printed = capsys.readouterr().out
    assert lines[2] in printed and '"figure":"reassignment/b"' in printed


@pytest.mark.integration
@pytest.mark.skipif(os.environ.get("REPLOG_LAB_TESTS") != "1",
                    reason="about 90 s of real runs: 'make lab' runs it (REPLOG_LAB_TESTS=1)")
def test_reassignment_end_to_end(tmp_path):
    """``replog lab run reassignment`` on seed 1, unthrottled and throttled with a failover:
    the same move on the same timeline, completed in both (by the second controller after
    the kill), with the throttle only where the arm has one, nothing lost, and the move's
    figures in the summary."""
    out = tmp_path / "lab"
    rc = subprocess.run(
        [sys.executable, "-m", "admin.cli", "lab", "run", "reassignment", "--seeds", "1",
         "--arms", "unthrottled,throttle-high-failover", "--out", str(out)],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True,
        text=True, timeout=600, check=False)
    assert rc.returncode == 0, (rc.stdout[-3000:], rc.stderr[-3000:])
    plain, failover = (lab.run_dir(out, a, 1) for a in ("unthrottled",
                                                         "throttle-high-failover"))
    assert (plain / "schedule.json").read_text() == (failover / "schedule.json").read_text()

    def nemesis_ok(d: Path, name: str) -> dict:
        ops = [json.loads(x) for x in (d / "history.jsonl").read_text().splitlines()]
        return next(o["value"]["result"] for o in ops if o["process"] == "nemesis"
                    and o["type"] == "ok" and o["f"] == "start"
                    and o["value"]["fault"]["nemesis"] == name)

    moves = {d: nemesis_ok(d, "lab-reassign") for d in (plain, failover)}
    assert moves[plain]["moved"] == moves[failover]["moved"]
    assert all(4 in r for r in moves[plain]["moved"].values())
    assert moves[plain]["throttle"] is None
    assert moves[failover]["throttle"] == lab.THROTTLE_HIGH
    assert moves[failover]["bytes_in"] >= 2 * lab.PRELOAD_BYTES * 0.9
    killed = nemesis_ok(failover, "lab-failover")["killed"]
    assert killed.startswith("controller-")
    for d in (plain, failover):
        result = json.loads((d / lab.RESULT).read_text())
        assert result["valid"] and result["acked_lost"] == 0, result
    summary = json.loads((out / "summary.json").read_text())
    for arm in ("unthrottled", "throttle-high-failover"):
        assert summary["arms"][arm]["move_s_median"] > 0
    assert summary["arms"]["unthrottled"]["throttle_ratio_median"] is None
    assert summary["arms"]["throttle-high-failover"]["throttle_ratio_median"] > 0

"""The ZooKeeper ensemble nemeses (zk-leader-kill, zk-minority, zk-majority): how the schedule
draws them, how the CLI takes them, and the checker's bound for a leader change or a minority
loss (no controller election, no acks=all write gap past the session timeout) on hand-made
histories. One real run on a 3-member ensemble (integration)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from chaos import checker
from chaos.nemesis import ClusterProcesses
from chaos.schedule import (
    NEMESES,
    ZOOKEEPER_NEMESES,
    Timeouts,
    Topology,
    make_schedule,
    parse_nemeses,
)
from common import zk_layout
from tests.chaos.test_chaos_cli import REPO, _chaos
from tests.chaos.test_checker import Builder, clean

ALL = tuple(NEMESES)
T = Timeouts(session_timeout_s=4.0, lag_time_max_s=2.0)


# ---------------------------------------------------------------------------- the schedule

def test_ensemble_nemeses_are_chosen_by_name_or_as_zookeeper_and_all_is_unchanged():
    assert parse_nemeses("zookeeper") == tuple(ZOOKEEPER_NEMESES)
    assert parse_nemeses("zookeeper,kill") == (*ZOOKEEPER_NEMESES, "kill")
    assert parse_nemeses("zk-majority,kill") == ("zk-majority", "kill")
    assert parse_nemeses("all") == ALL
    assert not set(ZOOKEEPER_NEMESES) & set(ALL)
    with pytest.raises(ValueError, match="all, hosts or zookeeper"):
        parse_nemeses("zk-everything")
    # The ensemble's size is drawn from by the zk-* nemeses only: every other schedule stays.
    for seed in range(30):
        assert make_schedule(seed, 90, ALL, Topology(), T) == \
            make_schedule(seed, 90, ALL, Topology(zookeeper_nodes=5), T)


@pytest.mark.parametrize("nodes", [3, 5])
def test_ensemble_faults_kill_the_leader_a_minority_or_a_majority(nodes):
    quorum = nodes // 2 + 1
    seen: dict[str, set[int]] = {n: set() for n in ZOOKEEPER_NEMESES}
    for seed in range(40):
        s = make_schedule(seed, 90, parse_nemeses("zookeeper,kill"),
                          Topology(zookeeper_nodes=nodes), T)
        assert s == make_schedule(seed, 90, parse_nemeses("zookeeper,kill"),
                                  Topology(zookeeper_nodes=nodes), T)
        for f in s.faults:
            if f.nemesis == "zk-leader-kill":
                assert f.target == ("zookeeper",)  # the leader when the fault starts
                assert 1.0 <= f.duration_s <= 4.0
            elif f.nemesis in ZOOKEEPER_NEMESES:
                myids = [int(t.removeprefix("zookeeper-")) for t in f.target]
                assert myids == sorted(set(myids)) and set(myids) <= set(range(1, nodes + 1))
                if f.nemesis == "zk-minority":
                    assert 1 <= len(myids) <= nodes - quorum
                else:  # the quorum is lost for longer than a session lives
                    assert len(myids) >= quorum
                    assert f.duration_s > T.session_timeout_s
            else:
                continue
            seen[f.nemesis].add(len(f.target))
    assert all(seen.values()), seen
    if nodes == 5:
        assert seen["zk-minority"] == {1, 2} and 3 in seen["zk-majority"]


def test_the_cli_refuses_ensemble_options_where_they_cannot_apply(tmp_path):
    def chaos(*args):
        return subprocess.run([sys.executable, "-m", "admin.cli", "chaos", "--seed", "3",
                               *args], cwd=REPO, capture_output=True, text=True, check=False)

    no_ensemble = chaos("--nemesis", "zk-leader-kill,kill", "--schedule-only")
    assert no_ensemble.returncode == 1
    assert no_ensemble.stderr.strip().splitlines() == [
        "Error: zk-leader-kill need a ZooKeeper ensemble: add --zookeeper-nodes 3 (or 5)"]
    attached = chaos("--zookeeper-nodes", "3", "--cluster", str(tmp_path), "--schedule-only")
    assert attached.returncode == 1 and len(attached.stderr.strip().splitlines()) == 1
    assert "--zookeeper-nodes starts the run's own ensemble" in attached.stderr
    assert list(tmp_path.iterdir()) == []
    ok = chaos("--nemesis", "zookeeper", "--zookeeper-nodes", "5", "--duration", "40",
               "--schedule-only")
    assert ok.returncode == 0, ok.stderr
    assert "zk-" in ok.stdout


def test_the_sweep_passes_the_cluster_options_to_every_run_and_refuses_once(tmp_path):
    from chaos import sweep

    def options(*argv):
        return sweep.cluster_options(sweep.parser().parse_args(argv))

    assert options() == []
    assert options("--zookeeper-nodes", "3") == ["--zookeeper-nodes", "3"]
    assert options("--hosts", "--racks", "2", "--inter-rack-latency-ms", "2.5") == [
        "--hosts", "--racks", "2", "--inter-rack-latency-ms", "2.5"]
    # Rack options without --hosts go through, for replog chaos to refuse them in its words.
    assert options("--racks", "2") == ["--racks", "2", "--inter-rack-latency-ms", "0"]
    proc = subprocess.run([sys.executable, "-m", "chaos.sweep", "--seeds", "3", "--nemesis",
                           "zookeeper", "--base-dir", str(tmp_path / "sweep")],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        ("chaos sweep: Error: zk-leader-kill,zk-minority,zk-majority need a ZooKeeper "
         "ensemble: add --zookeeper-nodes 3 (or 5)")]
    assert not (tmp_path / "sweep").exists()  # no run started


# ---------------------------------------------------------------------------- the checker

def _fault(index, nemesis, target, duration):
    return {"index": index, "at_s": 0.0, "nemesis": nemesis, "target": list(target),
            "duration_s": duration}


def _nemesis(h: Builder, what: str, fault: dict, result: dict) -> None:
    h.op("nemesis", "invoke", what, {"fault": fault})
    h.op("nemesis", "ok", what, {"fault": fault, "result": result})


def _run_with(fault: dict, gap_s: float, epochs=(1, 1), mid_fault: dict | None = None,
              live: bool | None = True) -> checker.Verdict:
    """A clean run, then ``fault`` during which partition 0 gets no acks=all acknowledgement
    for ``gap_s`` seconds after its start; the controller epoch read at its start and stop,
    and whether a running controller held /controller at its start."""
    h = clean()
    seq = iter(range(100, 200))
    h.send(0, next(seq), 0, "all", "ok", 4)
    _nemesis(h, "start", fault, {"killed": ["zookeeper-2"], "controller_epoch": epochs[0],
                                 "controller_live": live})
    if mid_fault is not None:
        _nemesis(h, "start", mid_fault, {"partitions": 6})
    h.wait(gap_s)
    h.send(0, next(seq), 0, "all", "ok", 5)
    _nemesis(h, "stop", fault, {"started": ["zookeeper-2"], "controller_epoch": epochs[1]})
    h.send(0, next(seq), 0, "all", "ok", 6)
    # The records are read back, so only the bound can make the run invalid.
    final = next(op for op in h.ops if op["f"] == "final-read" and op["type"] == "ok")
    final["value"]["records"] += [[0, o, f"w0:{100 + i}:all"] for i, o in enumerate((4, 5, 6))]
    return checker.check(h.ops, T.session_timeout_s, T.lag_time_max_s)


@pytest.mark.parametrize("nemesis", ["zk-leader-kill", "zk-minority"])
def test_a_write_gap_past_the_session_timeout_under_a_quorum_kept_is_a_violation(nemesis):
    fault = _fault(0, nemesis, ["zookeeper"], 3.0)
    assert _run_with(fault, gap_s=1.0).valid
    v = _run_with(fault, gap_s=5.0)
    assert not v.valid and {x.property for x in v.violations} == {"zookeeper-fault-bound"}
    (ev,) = v.violations[0].evidence
    assert ev["what"] == "write gap" and ev["partition"] == 0 and ev["bound_s"] == 4.0
    assert ev["longest_gap_s"] > 4.0
    assert "INVALID (zookeeper-fault-bound)" in v.summary()
    assert "1 of 1 ZooKeeper leader/minority fault(s) held to the 4.0s session bound" \
        in v.summary()
    json.dumps(v.to_json())  # verdict.json takes it


def test_a_controller_election_under_a_zookeeper_leader_change_is_a_violation():
    fault = _fault(0, "zk-leader-kill", ["zookeeper"], 3.0)
    v = _run_with(fault, gap_s=1.0, epochs=(1, 2))
    assert [e["what"] for e in v.violations[0].evidence] == ["controller election"]
    assert v.violations[0].evidence[0]["controller_epoch"] == [1, 2]
    # An epoch ZooKeeper did not answer for is unknown, not a violation.
    assert _run_with(fault, gap_s=1.0, epochs=(1, None)).valid
    # So is a controller's liveness: the election still counts.
    assert not _run_with(fault, gap_s=1.0, epochs=(1, 2), live=None).valid


def test_an_election_already_owed_when_the_fault_began_is_not_the_faults():
    # The active controller was killed before the fault and its session had not expired yet
    # (a quorum loss in between postponed that): /controller still named it, no running
    # controller held it, and its successor's election landed inside the window.
    fault = _fault(0, "zk-leader-kill", ["zookeeper"], 3.0)
    v = _run_with(fault, gap_s=1.0, epochs=(1, 2), live=False)
    assert v.valid, v.summary()
    (zk,) = v.stats["zookeeper_faults"]
    assert zk["judged"] and zk["controller_live"] is False and zk["controller_epoch"] == [1, 2]
    # The write gap is still held to the bound.
    assert not _run_with(fault, gap_s=5.0, epochs=(1, 2), live=False).valid


class _Controller:
    """A controller process as ClusterProcesses sees one (ProcessHandle's ``started_at`` and
    ``is_running``), here a real process that only sleeps."""

    def __init__(self):
        self.started_at = time.time()
        self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])

    def is_running(self):
        return self.proc.poll() is None

    def kill(self):
        self.proc.kill()
        self.proc.wait()


@pytest.mark.integration
def test_controller_state_reads_who_holds_the_controller_znode(zk, zk_hosts):
    controllers: dict[int, _Controller] = {}
    procs = ClusterProcesses(
        SimpleNamespace(zookeeper_connect=zk_hosts, controllers=controllers), "chaos")

    def claim(controller_id):
        info = zk_layout.ControllerInfo(controller_id, "127.0.0.1", 9000)
        zk.create(zk_layout.CONTROLLER, zk_layout.encode_controller(info), ephemeral=True)

    def live():
        return procs.controller_state()[1]

    try:
        assert procs.controller_state() == (None, False)  # no /controller_epoch, no /controller
        zk.create(zk_layout.CONTROLLER_EPOCH, zk_layout.encode_controller_epoch(1))
        assert procs.controller_state() == (1, False)
        controllers[100] = _Controller()
        claim(100)  # after the process started, as an election is
        assert live() is True
        # Spawned and elected within one millisecond: ctime is whole milliseconds, so the
        # start time reads later than ctime / 1000, yet this process claimed the znode.
        _, stat = zk.get(zk_layout.CONTROLLER)
        controllers[100].started_at = (stat.ctime + 0.9) / 1000.0
        assert live() is True
        # Killed and started again: the znode is the dead process's until its session
        # expires, and the new process began after it was claimed.
        controllers[100].kill()
        assert live() is False
        controllers[100] = _Controller()
        assert live() is False
        # Its successor claims it once the old session is gone.
        zk.delete(zk_layout.CONTROLLER)
        claim(100)
        assert live() is True
        # A controller id the run does not know: not a running controller of the run.
        zk.delete(zk_layout.CONTROLLER)
        claim(101)
        assert live() is False
    finally:
        for c in controllers.values():
            c.kill()


def test_a_lost_quorum_and_an_overlapped_window_are_not_held_to_the_bound():
    # zk-majority stops elections and ISR changes: its gaps are reported, not bounded.
    majority = _fault(0, "zk-majority", ["zookeeper-1", "zookeeper-2"], 6.0)
    v = _run_with(majority, gap_s=6.0, epochs=(1, 2))
    assert v.valid and "zookeeper_faults" not in v.stats
    # A preferred election mid-fault has gaps of its own: the window is reported unjudged.
    leader = _fault(0, "zk-leader-kill", ["zookeeper"], 3.0)
    v = _run_with(leader, gap_s=6.0, mid_fault=_fault(1, "elect", ["all"], 0.0))
    assert v.valid
    (zk,) = v.stats["zookeeper_faults"]
    assert zk["judged"] is False and zk["overlapped_by"] == [1]


def test_a_gap_that_began_before_the_fault_belongs_to_the_fault_before():
    h = clean()
    h.send(0, 100, 0, "all", "ok", 4)
    h.wait(3.0)  # partition 0 already without acknowledgements for 3 s (an earlier fault)
    fault = _fault(0, "zk-minority", ["zookeeper-3"], 3.0)
    _nemesis(h, "start", fault, {"killed": ["zookeeper-3"], "controller_epoch": 1})
    h.wait(4.5)
    h.send(0, 101, 0, "all", "ok", 5)
    _nemesis(h, "stop", fault, {"started": ["zookeeper-3"], "controller_epoch": 1})
    (zk,) = checker.zookeeper_fault_bounds(h.ops, checker.writes(h.ops), 4.0)
    assert zk["judged"] and zk["longest_gap_s"] == 0.0
    assert checker.check_zookeeper_faults([zk]) == []


# ---------------------------------------------------------------------------- a real run

@pytest.mark.integration
@pytest.mark.soak  # ~31 s; make soak runs it and the ensemble sweep (the schedule and checker
# tests above run in make test)
def test_ensemble_nemeses_on_a_three_member_ensemble_are_valid(tmp_path):
    # Seed 150 x 18 s: member 2 killed at 2 s for 2.75 s, the ensemble's leader at 8.4 s for
    # 1.5 s (both held to the bound), then all three members at 12 s for 5.7 s (the quorum
    # lost past the session timeout), under acks=all load.
    args = ("--seed", "150", "--duration", "18", "--nemesis", "zookeeper",
            "--zookeeper-nodes", "3")
    proc, data = _chaos(tmp_path, *args)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "Verdict: VALID" in proc.stdout
    assert "--zookeeper-nodes 3" in proc.stdout.split("Replay:")[1]
    ops = [json.loads(line) for line in (data / "history.jsonl").read_text().splitlines()]
    done = {(op["f"], op["value"]["fault"]["nemesis"]): op["value"]["result"] for op in ops
            if op["process"] == "nemesis" and op["type"] == "ok" and op["f"] in ("start", "stop")
            and "fault" in op["value"]}
    assert done[("start", "zk-majority")]["quorum_lost"] is True
    assert len(done[("start", "zk-majority")]["killed"]) == 3
    assert not done[("start", "zk-leader-kill")]["quorum_lost"]
    # The controller kept its epoch through all three, and it was read after each: once the
    # whole ensemble was back too (the harness's own client may still be backing off then).
    epochs = {k: r["controller_epoch"] for k, r in done.items()}
    assert len(epochs) == 6 and set(epochs.values()) == {1}, epochs
    verdict = json.loads((data / "verdict.json").read_text())
    assert [f["judged"] for f in verdict["stats"]["zookeeper_faults"]] == [True, True]

"""Chaos histories in the PySpark analysis (analytics/chaos_history.py): a hand-made run written
through chaos/history.py's own writer, read with HISTORY_SCHEMA and analysed; its availability
figures cross-checked against chaos.checker's on the same history; then the CLI end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analytics import chaos_history as C
from analytics.job import AnalyzeError, analyze
from chaos import checker
from chaos.history import History, read_history, write_value
from harness.local_cluster import REPO_ROOT
from tests.analytics.conftest import rows

PARTITIONS = 3
WRITERS = ("all", "all", "1")
# A detection bound of 1 + 1 + 1 s (checker.ELECTION_SLACK_S): the kill exceeds it.
SESSION_TIMEOUT_S, LAG_TIME_MAX_S = 1.0, 1.0


class _ScriptedHistory(History):
    """History's writer with a scripted clock, so the run is the same on every machine."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.t = 0.0

    def now(self) -> float:
        return self.t


def _fault(index, at_s, nemesis, target, duration_s):
    return {"fault": {"index": index, "at_s": at_s, "nemesis": nemesis, "target": target,
                      "duration_s": duration_s}}


def write_run(run_dir: Path) -> Path:
    """A 10 s run, 3 partitions, writers acks=all, all, 1 (as the workload's default):

    - fault 0: kill broker-1 from 2.0 to 5.0; meanwhile acks=all writes to partition 0 fail
      (NOT_ENOUGH_REPLICAS) until 3.5, then time out (unknown) until the stop;
    - fault 1: a preferred election at 6.0 (an instant);
    - fault 2: a pause of broker-2 at 7.0 whose stop fails (info), so it lasts until the
      heal at 9.0; partition 2's acks=all writes time out from 7.0 to 8.0;
    - a partition nemesis skipped (not root): no window;
    - the last acks=all write of writer-1 is never completed (unknown), and the history ends
      with the final read and the replica states, as a real run's does.
    """
    h = _ScriptedHistory(run_dir / "history.jsonl")
    nemesis = [(2.0, "start", _fault(0, 2.0, "kill", ["broker-1"], 3.0), "ok"),
               (4.0, "start", _fault(3, 4.0, "partition", ["broker-1", "broker-3"], 1.0),
                "skip"),
               (5.0, "stop", _fault(0, 2.0, "kill", ["broker-1"], 3.0), "ok"),
               (6.0, "start", _fault(1, 6.0, "elect", ["all"], 0.0), "ok"),
               (7.0, "start", _fault(2, 7.0, "pause", ["broker-2"], 1.5), "ok"),
               (8.5, "stop", _fault(2, 7.0, "pause", ["broker-2"], 1.5), "error")]
    seq = [0] * len(WRITERS)
    log: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    step = 0
    while step * 0.1 < 10.0:
        h.t = round(step * 0.1, 4)
        while nemesis and nemesis[0][0] <= h.t:
            _, f, value, how = nemesis.pop(0)
            if how == "skip":
                h.record("nemesis", "info", f, {**value, "skipped": "needs root"})
                continue
            h.record("nemesis", "invoke", f, value)
            if how == "error":
                h.record("nemesis", "info", f, {**value, "error": "StalledError: still running"})
            else:
                h.record("nemesis", "ok", f, {**value, "result": {"done": value["fault"]["index"]}})
        w = step % len(WRITERS)
        acks = WRITERS[w]
        p = (seq[w] + w) % PARTITIONS
        value = write_value(w, seq[w], acks)
        sent = {"partition": p, "value": value, "acks": acks}
        h.record(f"writer-{w}", "invoke", "send", sent)
        h.t = round(h.t + 0.03, 4)
        last = w == 1 and step >= 97  # writer-1's last send
        if last:
            pass  # never completed: the run ended first
        elif acks == "all" and p == 0 and 2.0 <= h.t < 3.5:
            h.record(f"writer-{w}", "fail", "send",
                     {**sent, "error": "NotEnoughReplicasError: 19"})
        elif acks == "all" and ((p == 0 and 3.5 <= h.t < 5.0) or (p == 2 and 7.0 <= h.t < 8.0)):
            h.record(f"writer-{w}", "info", "send", {**sent, "error": "TimeoutError: "})
        else:
            h.record(f"writer-{w}", "ok", "send", {**sent, "offset": len(log[p])})
            log[p].append(value)
        seq[w] += 1
        if step % 7 == 0:
            h.record("reader-0", "invoke", "read", {})
            h.record("reader-0", "ok", "read", {"records": []})
        step += 1
    h.t = 9.0
    h.record("nemesis", "ok", "healed", {"isr_full": True})
    h.t = 10.2
    h.record("final-reader", "invoke", "final-read", {})
    h.record("final-reader", "ok", "final-read", {
        "records": [[p, o, v] for p in log for o, v in enumerate(log[p])],
        "end_offsets": {str(p): len(log[p]) for p in log}, "complete": True})
    h.record("checker", "invoke", "replicas", {})
    h.record("checker", "ok", "replicas", {"partitions": [
        {"partition": p, "hw": len(log[p]), "replicas": [1, 2, 3], "isr": [1, 2, 3],
         "leader": 1, "logs": {}} for p in log], "level": "batches"})
    h.close()
    verdict = checker.check(h.ops, SESSION_TIMEOUT_S, LAG_TIME_MAX_S)
    (run_dir / "verdict.json").write_text(json.dumps(verdict.to_json()))
    return run_dir


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("chaos")
    one = write_run(root / "seed-1")
    # A second run (same operations) whose last line is torn, as a run killed mid-write
    # leaves it: the reader drops that line and keeps the run apart by its dir's name.
    two = root / "seed-2"
    shutil.copytree(one, two)
    with (two / "history.jsonl").open("a") as f:
        f.write('{"index": 99999, "time": 10.3, "wall": 1.0, "proc')
    return one, two


@pytest.fixture(scope="module")
def chaos_tables(spark, run_dirs, tmp_path_factory):
    out = tmp_path_factory.mktemp("chaos-out")
    return analyze(spark, None, str(out), chaos_runs=[str(d) for d in run_dirs]), out


def test_history_reads_with_the_explicit_schema(spark, run_dirs):
    runs = C.check_runs([run_dirs[0]])
    ops, malformed = C.read_histories(spark, runs)
    history = read_history(run_dirs[0] / "history.jsonl")
    assert malformed == 0
    assert ops.count() == len(history)
    # Nested values come through typed: a fault, a mixed-type read record, a result object.
    start = rows(ops.where("f = 'start' AND type = 'ok'").orderBy("index").limit(1))[0]
    assert start["value"]["fault"].asDict() == {"index": 0, "at_s": 2.0, "nemesis": "kill",
                                                "target": ["broker-1"], "duration_s": 3.0}
    assert json.loads(start["value"]["result"]) == {"done": 0}
    final = rows(ops.where("f = 'final-read' AND type = 'ok'"))[0]["value"]
    assert final["records"][0] == ["0", "0", "w0:0:all"]
    assert final["end_offsets"] == {str(p): o for p, o in
                                    history[-3]["value"]["end_offsets"].items()}


def test_spark_availability_equals_the_checkers(run_dirs, chaos_tables):
    result, _out = chaos_tables
    data = result["chaos"]
    stats = json.loads((run_dirs[0] / "verdict.json").read_text())["stats"]
    assert result["malformed_history_lines"] == 1  # seed-2's torn line
    for run in ("seed-1", "seed-2"):
        parts = {r["partition"]: r for r in data["chaos_partitions"]["rows"] if r["run"] == run}
        # The checker rounds to the millisecond; Spark keeps the difference of the same doubles.
        assert {str(p): round(r["longest_gap_s"], 3) for p, r in parts.items()} == \
            stats["unavailable_s_per_partition"]
        faults = [r for r in data["chaos_faults"]["rows"] if r["run"] == run]
        assert [(r["fault"], r["nemesis"], r["from_s"], r["to_s"], round(r["longest_gap_s"], 3),
                 r["gap_partition"], r["bound_s"], r["exceeds"]) for r in faults] == \
            [(f["index"], f["nemesis"], f["from_s"], f["to_s"], f["longest_gap_s"],
              f["partition"], f["bound_s"], f["exceeds"]) for f in stats["availability"]]
        totals = {o: sum(r[f"acks_{a}_{o}"] for r in parts.values() for a in C.ACKS)
                  for o in C.OUTCOMES}
        assert totals == {"ok": stats["acked_all"] + stats["acked_one"],
                          "fail": stats["failed"], "unknown": stats["unknown"]}


def test_fault_windows_and_outcomes_by_hand(chaos_tables):
    data = chaos_tables[0]["chaos"]
    faults = {r["fault"]: r for r in data["chaos_faults"]["rows"] if r["run"] == "seed-1"}
    # The skipped partition nemesis (3) has no window; the election is an instant; the pause
    # whose stop failed lasts until the heal.
    assert {f: (r["nemesis"], r["target"], r["from_s"], r["to_s"])
            for f, r in faults.items()} == {0: ("kill", "broker-1", 2.0, 5.0),
                                             1: ("elect", "all", 6.0, 6.0),
                                             2: ("pause", "broker-2", 7.0, 9.0)}
    # The kill: partition 0's acks=all writes (every 0.9 s from each writer, from 0.0 and
    # 0.7, completed 0.03 s later) failed, then timed out, until the stop: 3 each. Its gap
    # runs from the last ack before the kill (1.83) to the first after (5.23).
    p0 = next(r for r in data["chaos_fault_partitions"]["rows"]
              if (r["run"], r["fault"], r["partition"]) == ("seed-1", 0, 0))
    assert (p0["acks_all_fail"], p0["acks_all_unknown"], p0["acks_1_fail"]) == (3, 3, 0)
    assert p0["longest_gap_s"] == pytest.approx(3.4)
    assert (faults[0]["gap_partition"], faults[0]["bound_s"], faults[0]["exceeds"]) == \
        (0, 3.0, True)
    assert [faults[f]["exceeds"] for f in (1, 2)] == [False, False]
    last = [r for r in data["chaos_partitions"]["rows"] if r["run"] == "seed-1"]
    assert sum(r["acks_all_unknown"] for r in last) == 3 + 2 + 1  # kill, pause, the last send


def test_chaos_history_bad_input_one_line(tmp_path, run_dirs):
    with pytest.raises(AnalyzeError, match="is not a chaos run dir: no history.jsonl"):
        C.check_runs([tmp_path])
    with pytest.raises(AnalyzeError, match="are both named seed-1"):
        C.check_runs([run_dirs[0], shutil.copytree(run_dirs[0], tmp_path / "b" / "seed-1")])
    (tmp_path / "history.jsonl").write_text("not json\n")
    with pytest.raises(AnalyzeError, match="is not a chaos history"):
        C.check_runs([tmp_path])


def _cli(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-m", "admin.cli", "analyze", *args],
                          capture_output=True, text=True, timeout=300, env=env, check=False)


def test_cli_without_input_says_so(tmp_path):
    r = _cli("--output", str(tmp_path / "out"))
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.splitlines() == [("Error: nothing to analyse: give --input DIR (an export), "
                                      "--chaos-history RUN_DIR (a 'replog chaos' run), or both")]


def test_cli_chaos_history_prints_the_table_and_reports(run_dirs, tmp_path):
    out = tmp_path / "out"
    r = _cli("--chaos-history", str(run_dirs[0]), "--output", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0] == ("Chaos run seed-1: write outcomes ok/fail/unknown, longest acks=all "
                        "write gap (s)")
    kill = next(line for line in lines if line.split()[:2] == ["0", "kill"])
    assert kill.split()[-4:] == ["3.400", "0", "3.000", "yes"]
    page = (out / "report.html").read_text()
    assert "Chaos runs: writes and acks=all availability" in page
    for name in C.TABLES:
        assert (out / "tables" / f"{name}.csv").is_file()

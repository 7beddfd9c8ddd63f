"""analytics/lab.py's figures of the reassignment experiment (chaos/lab ``lab-reassign``):
the move's own figures from the nemesis's record, the send latency during the move, the
replication factor of a partition a reassignment is adding a replica to, and the summary table
that shows the move's columns only where there was a move."""

from __future__ import annotations

import json

import pytest

from analytics import chaos_history as C
from analytics import lab as L
from tests.analytics.conftest import rows
from tests.analytics.test_lab import T0, _jsonl, history_ops


def _move_ops(throttle: int | None) -> list[dict]:
    """The request at 1.0 s (invoke), its record at 3.0 s (the move took 1.5 s); acks=all
    sends invoked at 1.2 (100 ms) and 2.0 (300 ms) fall in the move, one at 2.8 (900 ms) after
    it, one at 0.5 (700 ms) before it; an acks=1 send in the move is left out."""
    ops: list[dict] = []

    def op(t, process, type_, f, value=None):
        ops.append({"index": len(ops), "time": t, "wall": T0 + t, "process": process,
                    "type": type_, "f": f, "value": value or {}})

    def send(t0, ms, seq, acks="all"):
        v = {"partition": 0, "value": f"w0:{seq}:{acks}", "acks": acks}
        op(t0, "writer-0", "invoke", "send", v)
        op(t0 + ms / 1000, "writer-0", "ok", "send", {**v, "offset": seq})

    fault = {"fault": {"index": 0, "at_s": 1.0, "nemesis": "lab-reassign",
                       "target": ["partition-0", "broker-3"], "duration_s": 0.0}}
    send(0.5, 700, 0)
    op(1.0, "nemesis", "invoke", "start", fault)
    send(1.2, 100, 1)
    send(1.3, 2000, 2, acks="1")
    send(2.0, 300, 3)
    send(2.8, 900, 4)
    result = {"moved": {"lab-0": [1, 2, 4]}, "throttle": throttle, "move_s": 1.5,
              "caught_up_s": 1.2, "bytes_in": 8_500_000, "copy_s": 1.0, "copy_bytes": 8_000_000}
    op(3.0, "nemesis", "ok", "start", {**fault, "result": result})
    op(4.0, "nemesis", "ok", "healed", {"isr_full": True})
    return ops


def _history(spark, tmp_path, runs: dict[str, list[dict]]):
    return C.read_histories(spark, [(run, _jsonl(tmp_path / run / "history.jsonl", ops), None)
                                    for run, ops in runs.items()])[0]


def test_move_figures(spark, tmp_path):
    history = _history(spark, tmp_path, {"throttled": _move_ops(4_000_000),
                                         "unthrottled": _move_ops(None),
                                         "no-move": history_ops()})
    got = {r["run"]: r for r in rows(L.move_figures(history))}
    assert set(got) == {"throttled", "unthrottled"}  # a run without a move has no figures
    t = got["throttled"]
    assert (t["move_s"], t["caught_up_s"], t["copy_s"]) == (1.5, 1.2, 1.0)
    assert t["copy_mb_s"] == pytest.approx(8.0)       # 8 MB in its first second
    assert t["throttle_ratio"] == pytest.approx(2.0)  # twice the 4 MB/s throttle
    # acks=all sends invoked in [1.0, 2.5]: 100 and 300 ms (p99 interpolates between them)
    assert t["p99_move_ms"] == pytest.approx(298.0)
    assert t["p99_before_move_ms"] == pytest.approx(700.0)  # the one send before it
    u = got["unthrottled"]
    assert u["copy_mb_s"] == pytest.approx(8.0) and u["throttle_ratio"] is None


def test_a_partition_gaining_a_replica_is_not_under_replicated(spark, tmp_path):
    """Kafka's replication factor during a reassignment: the replicas less the adding ones.
    Partition 0 moves from [1, 2, 3] to [1, 2, 4]: 4 is adding from 101 (ISR [1, 2, 3]: not
    under-replicated), joins the ISR at 102, 3 leaves at 103, and 4 drops out at 103.5 until
    104 (the heal): 0.5 under-replicated partition-seconds, where the run's largest ISR (4)
    would count 101 -> 102 and 103 -> 104 as well."""
    p0 = [(100.0, [1, 2, 3], [1, 2, 3], []), (101.0, [1, 2, 3], [1, 2, 3, 4], [4]),
          (102.0, [1, 2, 3, 4], [1, 2, 3, 4], [4]), (103.0, [1, 2, 4], [1, 2, 4], []),
          (103.5, [1, 2], [1, 2, 4], []), (104.0, [1, 2, 4], [1, 2, 4], [])]
    states = [{"run": "r", "wall": w, "partition": 0, "leader": 1, "isr": isr, "elr": [],
               "replicas": replicas, "adding": adding} for w, isr, replicas, adding in p0]
    history = _history(spark, tmp_path, {"r": history_ops()})
    frame = spark.read.schema(L.STATES_SCHEMA).json(str(_jsonl(tmp_path / "s.jsonl", states)))
    r = rows(L.state_figures(frame, history))[0]
    assert r["urp_s"] == pytest.approx(0.5)
    assert r["isr_shrinks"] == 2  # 3 removed at 103, 4 at 103.5
    line = {row["t_s"]: row["urp"] for row in rows(L.timelines(frame, history))}
    assert line == {0.0: 0, 1.0: 0, 2.0: 0, 3.0: 0, 3.5: 1, 4.0: 0}


def _summary_rows(with_move: bool) -> list[dict]:
    base = {"arm": "a", "runs": 2, "acked_lost": 0, "clean_lost": 0, "runs_with_loss": 0,
            "longest_unavailable_s_median": 0.4, "leaderless_s_median": 0.0,
            "urp_s_median": 1.0, "isr_shrinks_median": 1.0, "unclean_elections": 0,
            "move_s_median": None, "caught_up_s_median": None, "throttle_ratio_median": None,
            "p99_move_ms_median": None, "p99_before_move_ms_median": None}
    if with_move:
        base.update(move_s_median=5.7, caught_up_s_median=5.6, throttle_ratio_median=0.88,
                    p99_move_ms_median=24.0, p99_before_move_ms_median=19.4)
    return [base]


def test_table_shows_the_move_only_where_there_was_one():
    plain = L.format_table(_summary_rows(False))
    assert "move_s" not in plain[0] and plain[0].split()[-1] == "unclean_el"
    moved = L.format_table(_summary_rows(True))
    assert moved[0].split()[-5:] == ["move_s", "caught_up_s", "vs_throttle", "p99_move_ms",
                                     "p99_before"]
    assert moved[1].split()[-5:] == ["5.7", "5.6", "0.88", "24", "19"]
    # an arm name longer than the column's 20 characters widens it: the columns stay aligned
    long = L.format_table([{**_summary_rows(True)[0], "arm": "throttle-high-failover"}])
    assert len({len(line) for line in long}) == 1, long


def test_analyze_reads_the_move(spark, tmp_path):
    out = tmp_path / "lab"
    out.mkdir()
    (out / "lab.json").write_text(json.dumps({"experiment": "reassignment", "arms": {
        "throttle-low": {}}}))
    d = out / "runs" / "throttle-low" / "seed-1"
    _jsonl(d / "history.jsonl", _move_ops(4_000_000))
    _jsonl(d / "states.jsonl", [{"run": "throttle-low/seed-1", "wall": T0 + t, "partition": 0,
                                 "leader": 1, "isr": [1, 2, 3], "elr": [],
                                 "replicas": [1, 2, 3], "adding": []} for t in (0, 1, 2, 3)])
    (d / "result.json").write_text(json.dumps({
        "experiment": "reassignment", "arm": "throttle-low", "seed": 1,
        "run": "throttle-low/seed-1", "valid": True, "acked_lost": 0, "acked_all": 4,
        "unclean_elections": 0, "recovery_offsets_discarded": 0, "offsets_truncated": 0,
        "wall_s": 20.0}))
    summary = L.analyze(out)
    arm = summary["arms"]["throttle-low"]
    assert arm["move_s_median"] == 1.5 and arm["throttle_ratio_median"] == pytest.approx(2.0)
    assert "p99_move_ms" in summary["table"][0]

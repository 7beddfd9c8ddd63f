"""``replog demo`` in its short form (``demo.QUICK``: the same steps, closer together): a real
cluster through the seeded scenario, then the analysis of its export. Every fault the scenario
injects must show in the tables: the SIGKILL and the SIGSTOP of a broker, the log-dir failure
through the fault-injection file and the reassignment with the bytes it copied."""

from __future__ import annotations

import asyncio
import csv
import time

import pytest

from analytics import demo, job

pytestmark = pytest.mark.integration


def _table(out, name: str) -> list[dict]:
    with (out / "tables" / f"{name}.csv").open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_quick_demo_report_shows_every_fault(spark, tmp_path):
    data = tmp_path / "demo"
    data.mkdir()
    t0 = time.monotonic()
    done = asyncio.run(demo.scenario(data, data / "export", seed=1, interval_ms=250,
                                     pace=demo.QUICK))
    scenario_s = time.monotonic() - t0
    out = tmp_path / "report"
    result = job.analyze(spark, str(data / "export"), str(out))
    print(f"quick demo: scenario {scenario_s:.1f} s, analysis {result['seconds']:.1f} s")
    assert result["report"].is_file()

    killed = str(done["killed"])
    failed_broker, failed_dir = (str(x) for x in done["log_dir"])
    moved_from, moved_to = done["moved"]

    failovers = _table(out, "failovers")
    causes = {(r["cause"], r["old_leader"]) for r in failovers}
    assert ("broker_down", killed) in causes
    assert ("log_dir_offline", failed_broker) in causes
    assert all(r["failover_s"] for r in failovers), "a partition never served again"

    recoveries = {(r["cause"], r["broker"]) for r in _table(out, "recoveries")}
    assert {("restart", killed), ("resumed", killed), ("recreated", failed_broker)} <= recoveries

    dirs = _table(out, "log_dir_failures")
    assert dirs and {(r["broker"], r["log_dir"]) for r in dirs} == {(failed_broker, failed_dir)}
    assert all(r["time_to_rereplicate_s"] for r in dirs), "a lost replica not back in its ISR"

    [move] = _table(out, "reassignments")
    added = [b for b in moved_to if b not in moved_from]
    assert (move["partition"], move["outcome"], move["original"], move["target"],
            move["adding"], move["bytes_shared_with"]) == (
        f"{demo.MOVES}-0", "completed", " ".join(map(str, moved_from)),
        " ".join(map(str, moved_to)), " ".join(map(str, added)), "0")
    assert int(move["bytes_moved"]) >= demo.MOVES_BYTES  # the whole log, batch headers too

    totals = {(r["process"], r["series"]): float(r["total"])
              for r in _table(out, "throughput_by_broker")}
    for series in ("bytes_in", "bytes_out", "replication_bytes_in", "replication_bytes_out"):
        assert sum(v for (_, s), v in totals.items() if s == series) > 0, series

"""One local SparkSession for the whole test session (a JVM start costs seconds), and helpers
to build the frames the transforms take from a few dicts: events as event-log lines through the
real reader, scrapes and samples as the exporter's records."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from analytics import job
from analytics import transforms as T
from analytics.schema import EVENT_SCHEMA, SAMPLE_SCHEMA, SCRAPE_SCHEMA

# Tiny frames: whole-stage code generation and adaptive re-planning cost more than they save.
TEST_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.adaptive.enabled": "false"}


@pytest.fixture(scope="session")
def spark():
    from analytics.spark import session
    s = session("local[2]", app="replog-tests", shuffle_partitions=1, extra=TEST_CONF)
    yield s
    s.stop()


def _frame(spark, schema, rows):
    names = [f.name for f in schema.fields]
    for r in rows:
        unknown = set(r) - set(names)
        assert not unknown, f"not in the schema: {unknown}"
    return spark.createDataFrame([tuple(r.get(n) for n in names) for r in rows], schema)


# Events the controller writes to its log (controller/core.py ``_emit``); every other is a
# broker's.
CONTROLLER_EVENTS = {"leader_election", "isr_change", "broker_failed", "broker_registered",
                     "unclean_recovery_started", "unclean_recovery_finished",
                     "replica_log_info_failed", "reassignment_started", "reassignment_cancelled",
                     "reassignment_step", "reassignment_completed", "partitions_restarted"}


def iso(ts: float) -> str:
    """structlog's TimeStamper(fmt="iso", utc=True), for a given Unix time."""
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def read_event_lines(spark, path: Path):
    """An event-log file read as ``replog analyze`` reads an export's (analytics.job's JSON
    reader with EVENT_SCHEMA, then normalize_events); fails on any line that did not parse
    cleanly (a field of the wrong type is null and the line counted as malformed)."""
    raw = job._read(spark, EVENT_SCHEMA, ([path], []), corrupt_column=True).cache()
    bad = [r["_corrupt_record"] for r in raw.where("_corrupt_record IS NOT NULL").collect()]
    assert not bad, f"event lines the reader does not take: {bad}"
    return T.normalize_events(raw)


@pytest.fixture
def events(spark, tmp_path):
    """``events(dict(ts=10.0, event="become_leader", node=2, partition="t-0", ...), ...)``:
    each dict becomes an event-log line as the process writes it - ``ts`` the ISO
    ``timestamp``, ``role`` (default: the event's emitter) the ``process``, ``node`` its
    ``broker`` (broker lines) or ``controller_id`` (controller lines; default 100), every
    other key a field of the event - and the lines are read through the real reader
    (``read_event_lines``). So a row can be a copy of a real line, fields the analysis does
    not read included."""
    n = [0]

    def make(*rows):
        lines = []
        for r in rows:
            r = dict(r)
            role = r.pop("role", "controller" if r["event"] in CONTROLLER_EVENTS else "broker")
            node = r.pop("node", 100 if role == "controller" else None)
            line = {"timestamp": iso(r.pop("ts")), "process": role, "pid": 4242,
                    **({"controller_id": node} if role == "controller" else {"broker": node}),
                    **r, "cluster_id": "analytics-tests"}
            lines.append(json.dumps(line))
        n[0] += 1
        path = tmp_path / f"events-{n[0]}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return read_event_lines(spark, path)
    return make


@pytest.fixture
def scrapes(spark):
    def make(*rows):
        return _frame(spark, SCRAPE_SCHEMA, [
            {"role": r["process"].split("-")[0], "node_id": int(r["process"].split("-")[1]),
             **r} for r in rows])
    return make


@pytest.fixture
def samples(spark):
    def make(*rows):
        return _frame(spark, SAMPLE_SCHEMA, [
            {"role": r["process"].split("-")[0], "node_id": int(r["process"].split("-")[1]),
             "labels": {}, **r} for r in rows])
    return make


def rows(df):
    return [r.asDict() for r in df.collect()]

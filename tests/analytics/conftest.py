"""One local SparkSession for the whole test session (a JVM start costs seconds), and helpers
to build the frames the transforms take from a few dicts."""

from __future__ import annotations

import pytest

from analytics.schema import NORMALIZED_EVENT_SCHEMA, SAMPLE_SCHEMA, SCRAPE_SCHEMA

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


@pytest.fixture
def events(spark):
    """``events(dict(ts=10.0, event="become_leader", node=2, ...), ...)``; ``role`` defaults
    to the usual emitter of the event."""
    controller_events = {"leader_election", "isr_change", "broker_failed", "broker_registered",
                         "unclean_recovery", "reassignment_started", "reassignment_completed"}

    def make(*rows):
        full = []
        for r in rows:
            r = dict(r)
            r.setdefault("role", "controller" if r["event"] in controller_events else "broker")
            r.setdefault("node", 100 if r["role"] == "controller" else None)
            r.setdefault("source", f"{r['role']}-{r['node']}")
            full.append(r)
        return _frame(spark, NORMALIZED_EVENT_SCHEMA, full)
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

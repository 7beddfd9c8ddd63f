"""A real cluster scraped for real: the metric names every process serves match the catalog
(docker/prometheus/metrics.txt), and Debian's Prometheus, started the way
`replog cluster up --prometheus` starts it, sees every target, answers every dashboard query and
recording rule with data (after a real partition reassignment: some series exist only once one
ran), and fires (then resolves) the alerts for a SIGKILLed broker.

Nothing is timed: every wait is for a positive signal, with a generous bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.polling import WaitTimedOut
from harness.ports import free_port
from harness.prometheus import PrometheusServer
from tests.observability.catalog import REPO, catalog
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def replog(*args: str, stdin: bytes | None = None) -> str:
    p = subprocess.run([sys.executable, "-m", "admin.cli", *args], input=stdin, check=False,
                       capture_output=True, timeout=120, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


def families(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return {f.name: f for f in text_string_to_metric_families(resp.read().decode())}


def load_topic(cluster, topic: str = "orders") -> None:
    bootstrap = cluster.bootstrap_servers
    replog("topics", "create", "--bootstrap-server", bootstrap, "--topic", topic,
           "--partitions", "3", "--replication-factor", "3",
           "--config", "min.insync.replicas=2")
    replog("produce", "--bootstrap-server", bootstrap, "--topic", topic, "--acks", "all",
           stdin=b"".join(b"record-%d\n" % i for i in range(100)))


def reassign_one_partition(cluster, tmp_path) -> None:
    """Move one replica for real (KIP-455: broker 3 added, broker 1 removed), so the series that
    appear only with a reassignment (replog_controller_reassignment_steps_total{step}) exist
    for the reassignment dashboard's queries."""
    bootstrap = cluster.bootstrap_servers
    replog("topics", "create", "--bootstrap-server", bootstrap, "--topic", "moves",
           "--replica-assignment", "1:2")
    replog("produce", "--bootstrap-server", bootstrap, "--topic", "moves", "--acks", "all",
           stdin=b"".join(b"moved-%d\n" % i for i in range(50)))
    plan = tmp_path / "reassignment.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moves", "partition": 0, "replicas": [2, 3]}]}))
    move = ["--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan)]
    replog("reassign", "--execute", *move)
    wait_until(lambda: "is completed" in replog("reassign", "--verify", *move), 60,
               "the reassignment of moves-0 completed", interval=0.5)


def commit_group_offsets(cluster, topic: str = "orders") -> None:
    """Give group ``dash`` committed offsets on every partition of ``topic`` (an inactive
    group's reset, as kafka-consumer-groups --reset-offsets --execute creates one), so the
    series that appear only with a group (kafka_consumergroup_lag{consumergroup,topic,
    partition}, from the coordinator) exist for the groups dashboard's queries."""
    replog("consumer-groups", "--bootstrap-server", cluster.kafka_bootstrap_servers,
           "--reset-offsets", "--group", "dash", "--topic", topic, "--to-earliest", "--execute")


def test_served_metric_names_match_the_catalog(cluster_factory):
    c = cluster_factory(brokers=3, controllers=2)
    load_topic(c)
    served = set()
    for h in [*c.controllers.values(), *c.brokers.values()]:
        fams = families(h.metrics_url)
        served |= {(h.role, f.name, f.type) for f in fams.values()}
        if h.role == "broker":
            # Strimzi's dashboards select these labels; their values are Kafka's.
            fetcher = fams["kafka_server_replicafetchermanager_failedpartitionscount"]
            assert {s.labels["clientId"] for s in fetcher.samples} == {
                "Replica", "ReplicaAlterLogDirs"}
            offline = fams["kafka_log_logmanager_logdirectoryoffline"]
            assert {s.labels["logDirectory"]: s.value for s in offline.samples} == {
                str(d): 0.0 for d in h.log_dirs}
    listed = catalog()
    assert served - listed == set(), ("served but not in docker/prometheus/metrics.txt "
                                      f"(add them there): {sorted(served - listed)}")
    assert listed - served == set(), ("listed in docker/prometheus/metrics.txt but not served: "
                                      f"{sorted(listed - served)}")


def _queries() -> list[str]:
    from tests.observability.test_prometheus_rules import _exprs
    return [e for where, e in _exprs() if where.endswith("recording.yml") or ":" in where]


def test_prometheus_scrapes_the_cluster_and_fires_broker_down_alerts(cluster_factory, tmp_path):
    # Short session and lag limits so the dead broker leaves the ISRs within seconds.
    c = cluster_factory(brokers=3, controllers=2, overrides={
        "zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "3000"})
    load_topic(c)
    reassign_one_partition(c, tmp_path)
    commit_group_offsets(c)
    prom = PrometheusServer(c.cluster_json_path, tmp_path / "prometheus", port=0).start()
    try:
        def targets_up():
            active = prom.api("targets")["activeTargets"]
            return len(active) == 5 and all(t["health"] == "up" for t in active)
        wait_until(targets_up, 60, "5 targets up", interval=0.5)

        # Every recording rule and dashboard query evaluates without error (an error raises at
        # once) and returns data: rates need two scrapes, so the empty ones are retried.
        pending = _queries()
        assert len(pending) > 30

        def all_answered():
            pending[:] = [q for q in pending if not prom.api("query", query=q)["result"]]
            return not pending
        try:
            wait_until(all_answered, 60, "data for every query", interval=0.5)
        except WaitTimedOut:
            raise AssertionError(f"no data for these queries: {pending}") from None

        def firing(*names):
            alerts = prom.api("alerts")["alerts"]
            return {a["labels"]["alertname"] for a in alerts
                    if a["state"] == "firing"} >= set(names)
        assert not firing("BrokerDown") and not firing("UnderReplicatedPartitions")

        c.broker(3).kill()
        wait_until(lambda: firing("BrokerDown", "UnderReplicatedPartitions"), 120,
                   "BrokerDown and UnderReplicatedPartitions firing", interval=0.5)
        down = [a for a in prom.api("alerts")["alerts"]
                if a["labels"]["alertname"] == "BrokerDown"]
        assert [a["labels"]["node_id"] for a in down] == ["3"]

        c.broker(3).start()
        wait_until(lambda: not any(firing(n) for n in ("BrokerDown",
                                                       "UnderReplicatedPartitions")),
                   120, "BrokerDown and UnderReplicatedPartitions resolved", interval=0.5)
    finally:
        prom.stop()


def test_cluster_up_with_prometheus_prints_its_url_and_it_scrapes_every_process(tmp_path):
    # `replog cluster up --prometheus` as a user runs it: the printed URL answers, its targets
    # are the cluster's processes (cluster.json) and all up; Ctrl-C stops both.
    import re
    import signal

    port = free_port()  # 9090 may be taken on this machine
    proc = subprocess.Popen(
        [sys.executable, "-m", "admin.cli", "cluster", "up", "--data-dir", str(tmp_path / "c"),
         "--brokers", "1", "--prometheus", "--prometheus-port", str(port)],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("Press Ctrl-C"):
                break
        [url] = [m.group(1) for m in map(re.compile(r"^Prometheus: (\S+) ").match, lines) if m]
        assert url == f"http://127.0.0.1:{port}"
        cluster = json.loads((tmp_path / "c" / "cluster.json").read_text())

        def targets_up():
            with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=5) as resp:
                active = json.loads(resp.read())["data"]["activeTargets"]
            return len(active) >= 2 and all(t["health"] == "up" for t in active) and active
        active = wait_until(targets_up, timeout=90, what="Prometheus's targets up",
                            ignore=(OSError,))
        assert {t["scrapeUrl"] for t in active} == {
            p["metrics_url"] for p in cluster["brokers"] + cluster["controllers"]}
    finally:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(120)
    assert rc == 0, proc.stderr.read()


def test_cluster_up_with_prometheus_missing_says_how_to_install_it(tmp_path):
    bare = tmp_path / "bin"  # a PATH with python but no prometheus
    bare.mkdir()
    (bare / "python3").symlink_to(sys.executable)
    p = subprocess.run([sys.executable, "-m", "admin.cli", "cluster", "up", "--data-dir",
                        str(tmp_path / "c"), "--prometheus"], cwd=REPO, capture_output=True,
                       text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(REPO), PATH=str(bare)))
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        "Error: prometheus is not installed: run 'apt-get install prometheus' as root"]
    assert not (tmp_path / "c" / "cluster.json").exists()  # nothing was started

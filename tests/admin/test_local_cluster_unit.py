"""LocalCluster pieces that need no running cluster: generated configs, the data-dir lock,
and `cluster down`'s refusal to signal processes that are not the cluster's."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from common.config import load_config
from harness.local_cluster import LocalCluster, LocalClusterError, stop_cluster_in


def test_generated_properties_are_valid_configs(tmp_path):
    c = LocalCluster(tmp_path, brokers=3, controllers=2, log_dirs_per_broker=2,
                     overrides={"min.insync.replicas": 2},
                     broker_overrides={"replica.lag.time.max.ms": 3000},
                     controller_overrides={"unclean.leader.election.enable": "true"},
                     per_broker_overrides={2: {"broker.rack": "r2"}})
    c.zookeeper_connect = "127.0.0.1:2181/replog"
    ports = set()
    for h in [*c.brokers.values(), *c.controllers.values()]:
        h.write_config()
        cfg = load_config(str(h.config_file), required=(f"{h.role}.id",))
        assert cfg[f"{h.role}.id"] == h.id
        # a broker also has its Kafka-protocol listener (docs/kafka-protocol.md)
        assert [e.address for e in cfg["listeners"]] == \
            [h.address] + ([h.kafka_address] if h.role == "broker" else [])
        assert cfg["zookeeper.connect"] == "127.0.0.1:2181/replog"
        assert cfg["metrics.port"] == h.metrics_port
        assert cfg["event.log.file"] == str(tmp_path / "logs" / f"{h.name}.events.jsonl")
        assert cfg["min.insync.replicas"] == 2
        ports |= {h.port, h.metrics_port} | ({h.kafka_port} if h.kafka_port else set())
        if h.role == "broker":
            assert cfg["log.dirs"] == [str(tmp_path / f"broker-{h.id}" / f"logdir-{n}")
                                       for n in range(2)]
            assert cfg["replica.lag.time.max.ms"] == 3000
            assert cfg["unclean.leader.election.enable"] is False
            assert all(d.is_dir() for d in h.log_dirs)
        else:
            assert cfg["unclean.leader.election.enable"] is True
    assert c.broker(2).properties()["broker.rack"] == "r2"
    assert len(ports) == 2 * 5 + 3  # every listener and metrics port distinct
    assert sorted(c.controllers) == [100, 101] and sorted(c.brokers) == [1, 2, 3]
    assert c.bootstrap_servers == ",".join(c.broker(b).address for b in (1, 2, 3))
    with pytest.raises(LocalClusterError, match="no broker 9"):
        c.broker(9)


def test_one_cluster_per_data_dir(tmp_path):
    a = LocalCluster(tmp_path, brokers=1)
    a._acquire_lock()
    try:
        b = LocalCluster(tmp_path, brokers=1)
        with pytest.raises(LocalClusterError, match="already running in .* stop it first"):
            b._acquire_lock()
    finally:
        a._release_lock()
    b._acquire_lock()  # free again once the owner let go
    b._release_lock()


def test_cluster_down_never_signals_foreign_pids(tmp_path):
    # A process whose command line does not name the cluster's config file (e.g. a recycled
    # pid) is left alone; one that does is stopped.
    config = tmp_path / "config" / "broker-1.properties"
    config.parent.mkdir()
    config.write_text("broker.id=1\n")
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                             str(config)])
    foreign = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "cluster.json").write_text(json.dumps({
            "brokers": [{"id": 1, "pid": ours.pid, "config_file": str(config)},
                        {"id": 2, "pid": foreign.pid, "config_file": str(tmp_path / "other")}],
            "controllers": [], "zookeeper_pid": None}))
        assert stop_cluster_in(tmp_path, timeout=10, log=lambda *_: None)
        assert ours.wait(10) is not None
        time.sleep(0.2)
        assert foreign.poll() is None
    finally:
        for p in (ours, foreign):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_cluster_down_without_a_cluster(tmp_path):
    with pytest.raises(LocalClusterError, match="no cluster.json"):
        stop_cluster_in(tmp_path, log=lambda *_: None)

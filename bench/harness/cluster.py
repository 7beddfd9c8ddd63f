"""The benchmarks' cluster: a LocalCluster of one controller and three brokers with two log
dirs each, with a short ZooKeeper session and no periodic preferred election (a benchmark moves
leadership itself, so none fires in the middle of a measurement)."""

from __future__ import annotations

import os
import time

from bench import log
from harness.local_cluster import LocalCluster

SESSION_TIMEOUT_MS = 3000
CLUSTER_OVERRIDES = {
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    "auto.leader.rebalance.enable": "false",
}


def start_cluster(root: str, name: str) -> LocalCluster:
    c = LocalCluster(os.path.join(root, name), brokers=3, controllers=1, log_dirs_per_broker=2,
                     overrides=CLUSTER_OVERRIDES, startup_timeout_s=180.0)
    t = time.perf_counter()
    c.start()
    log(f"[cluster] {name}: cluster up in {time.perf_counter() - t:.1f} s ({c.data_dir})")
    return c


def cluster_pids(c: LocalCluster) -> list[int | None]:
    return [h.pid for h in c.brokers.values() if h.is_running()] + \
        [h.pid for h in c.controllers.values() if h.is_running()]


def zk_pid(c: LocalCluster) -> int | None:
    zk = c.zookeeper_server
    return zk.pid if zk is not None and zk.is_running() else None


def rotating_assignment(n: int, rf: int, brokers: int = 3) -> dict[int, list[int]]:
    """Partition p led by broker p % brokers + 1, followers the next ones: balanced leaders."""
    return {p: [(p + i) % brokers + 1 for i in range(rf)] for p in range(n)}

"""The ducktape replication matrix as tests (Kafka's replication_test): {clean bounce, hard bounce,
clean kill, hard kill} x {leader, controller}, acks=all writers, min.insync.replicas=2, each
run checked by the chaos checker (every acknowledged write read back at its offset, no
offset with two values, writer order, in-sync replicas byte-identical below the HW).

One cluster (3 brokers, 2 controllers so that the controller target has a standby, on the
session's ZooKeeper) serves the 8 cells, each on a topic of its own: starting a cluster per
cell would cost more than the cell. Every cell heals what it broke (a killed process is
started again, the ISRs are full again) before the next one runs. A failing cell replays
alone with ``replog chaos --matrix FAILURE:TARGET`` (its own cluster).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from chaos.runner import RunConfig, cluster_overrides, run
from chaos.schedule import FAILURES, MATRIX_TARGETS, Timeouts, matrix_schedule
from harness.local_cluster import LocalCluster
from harness.zk_sessions import ensure_chroot

pytestmark = pytest.mark.integration
TIMEOUTS = Timeouts()
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(zk_server, tmp_path_factory) -> Iterator[LocalCluster]:
    hosts = ensure_chroot(zk_server.hosts, f"/replog-chaos-matrix-{uuid.uuid4().hex[:12]}")
    c = LocalCluster(tmp_path_factory.mktemp("matrix-cluster"), brokers=3, controllers=2,
                     log_dirs_per_broker=1, zookeeper=hosts,
                     overrides=cluster_overrides(TIMEOUTS))
    c.start()
    try:
        yield c
    finally:
        c.stop(graceful=False)


@pytest.mark.parametrize("target", MATRIX_TARGETS)
@pytest.mark.parametrize("failure", FAILURES)
def test_matrix_cell(cluster, tmp_path, failure, target):
    schedule = matrix_schedule(failure, target, timeouts=TIMEOUTS)
    cfg = RunConfig(seed=0, duration_s=schedule.duration_s, nemeses=schedule.nemeses,
                    data_dir=tmp_path / "run", partitions=PARTITIONS, timeouts=TIMEOUTS,
                    fixed_schedule=schedule, writers=("all", "all"),
                    topic=f"matrix-{failure}-{target}", settle_s=1.0, heal_timeout_s=60.0,
                    cluster=cluster)
    result = run(cfg, log=print)
    verdict = result.verdict
    print(f"history: {result.history_path}\n{verdict.describe()}")
    assert verdict.valid, verdict.describe()
    assert not result.skipped

    ops = [op for op in _ops(result) if op["process"] == "nemesis"]
    starts = [op for op in ops if op["f"] == "start" and op["type"] != "invoke"]
    assert len(starts) == len(schedule.faults)
    assert all(op["type"] == "ok" for op in starts), starts  # every fault really happened
    hit = [next(iter(op["value"]["result"].values())) for op in starts]
    assert all(h.startswith("controller-" if target == "controller" else "broker-")
               for h in hit), hit
    stops = [op for op in ops if op["f"] == "stop" and op["type"] == "ok"]
    if failure.endswith("bounce"):
        assert [op["value"]["result"]["started"] for op in stops] == [[h] for h in hit]
        if failure == "hard-bounce":  # restarted only once ZooKeeper saw the loss
            assert all(op["value"]["result"]["loss_registered"] == {h: True}
                       for op, h in zip(stops, hit, strict=True))
    else:  # a kill stays down until the heal
        assert [op["value"]["result"] for op in stops] == [{"still_down": hit}]
    healed = next(op for op in ops if op["f"] == "healed")
    assert healed["type"] == "ok" and healed["value"]["isr_full"]
    assert verdict.stats["acked_all"] > 0
    assert all(h.is_running() for h in [*cluster.brokers.values(),
                                         *cluster.controllers.values()])


def _ops(result) -> list[dict]:
    from chaos.history import read_history
    return read_history(result.history_path)

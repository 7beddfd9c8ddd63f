"""Two listeners per process (KIP-103) on a real local cluster: each listener answers Metadata
with its own endpoints, a broker without the listener is left out, and clients produce and
consume through the second listener while replication stays on the first.

The cluster keeps its default single PLAINTEXT listener on every process; brokers 1 and 2 and
the controller also get an EXTERNAL listener, bound on every interface and advertised as
127.0.0.2 (a different loopback address than PLAINTEXT's 127.0.0.1). Broker 3 has none.
"""

from __future__ import annotations

import grpc
import pytest

from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from harness.local_cluster import ProcessHandle
from harness.ports import free_port
from tests.admin.test_integration import replog
from tests.polling import wait_until

pytestmark = pytest.mark.integration

EXTERNAL_HOST = "127.0.0.2"


def add_external_listener(h: ProcessHandle) -> str:
    port = free_port()
    h.overrides.update({
        "listeners": f"PLAINTEXT://{h.address},EXTERNAL://0.0.0.0:{port}",
        "advertised.listeners": f"PLAINTEXT://{h.address},EXTERNAL://{EXTERNAL_HOST}:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT"})
    return f"{EXTERNAL_HOST}:{port}"


def metadata(address: str, *topics: str) -> pb.MetadataResponse:
    with grpc.insecure_channel(address) as ch:
        return replog_pb2_grpc.BrokerStub(ch).Metadata(pb.MetadataRequest(topics=topics),
                                                        timeout=10)


def brokers(resp) -> dict[int, tuple[str, str]]:
    return {b.broker_id: (f"{b.host}:{b.port}", b.listener) for b in resp.brokers}


def test_each_listener_answers_with_its_endpoints_and_carries_produce_consume(cluster_factory):
    c = cluster_factory(brokers=3, controllers=1, log_dirs_per_broker=1, start=False)
    ctl = next(iter(c.controllers.values()))
    external = {b: add_external_listener(c.brokers[b]) for b in (1, 2)}
    ctl_external = add_external_listener(ctl)
    c.start()

    internal = {b: (h.address, "PLAINTEXT") for b, h in c.brokers.items()}
    wait_until(lambda: brokers(metadata(c.brokers[1].address)) == internal, 60,
               "every broker in broker 1's metadata")
    plain = metadata(c.brokers[1].address)
    assert (plain.controller.host, plain.controller.port) == (ctl.host, ctl.port)
    assert plain.controller.listener == "PLAINTEXT"

    # The same broker on its EXTERNAL port: EXTERNAL endpoints only; broker 3 has no such
    # listener and is left out.
    ext = metadata(external[1])
    assert brokers(ext) == {b: (a, "EXTERNAL") for b, a in external.items()}
    assert f"{ext.controller.host}:{ext.controller.port}" == ctl_external
    assert ext.controller_id == plain.controller_id == ctl.id

    # Through EXTERNAL only: create (controller's EXTERNAL listener), produce with acks=all
    # (the follower replicates over PLAINTEXT, the inter-broker listener) and consume from
    # the other broker's EXTERNAL bootstrap.
    p = replog("topics", "create", "--bootstrap-server", external[1], "--topic", "outside",
               "--replica-assignment", "1:2,2:1", "--config", "min.insync.replicas=2")
    assert p.returncode == 0, p.stderr.decode()
    records = [f"record-{i}" for i in range(50)]
    p = replog("produce", "--bootstrap-server", external[1], "--topic", "outside",
               "--acks", "all", "--request-timeout-ms", "30000", stdin="\n".join(records).encode() + b"\n")
    assert p.returncode == 0, p.stderr.decode()
    p = replog("consume", "--bootstrap-server", external[2], "--topic", "outside",
               "--from-beginning", "--max-messages", str(len(records)), "--timeout-ms", "30000")
    assert p.returncode == 0, p.stderr.decode()
    assert sorted(p.stdout.decode().split()) == sorted(records)

    # A partition led by broker 3 has no leader reachable through EXTERNAL.
    p = replog("topics", "create", "--bootstrap-server", c.bootstrap_servers, "--topic",
               "inside", "--replica-assignment", "3")
    assert p.returncode == 0, p.stderr.decode()

    def led_by_3(address: str):
        t = metadata(address, "inside").topics[0]
        return t.partitions and t.partitions[0].leader_id == 3 and t.partitions[0]
    assert wait_until(lambda: led_by_3(c.brokers[1].address), 30, "leader 3").error_code == 0
    assert led_by_3(external[1]).error_code == pb.LEADER_NOT_AVAILABLE

    # DescribeCluster on the controller's EXTERNAL listener: the brokers that have one.
    with grpc.insecure_channel(ctl_external) as ch:
        d = replog_pb2_grpc.ControllerStub(ch).DescribeCluster(pb.DescribeClusterRequest(),
                                                               timeout=10)
    assert brokers(d) == {b: (a, "EXTERNAL") for b, a in external.items()}
    assert f"{d.controller.host}:{d.controller.port}" == ctl_external

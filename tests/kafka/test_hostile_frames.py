"""Issue 42's acceptance for big frames, against a real broker process: while a 50 MB hostile
Metadata frame (N empty topic names, 2 bytes each) is being sent to the broker's Kafka port,
the broker answers a small Metadata on another connection and its gRPC health check; then the
hostile connection is closed and the broker keeps serving. No timing is asserted: each check
must be answered while the hostile sender is still in the middle of its frame, or while the
broker has just received it (before the fix, decoding it held the loop for minutes)."""
from __future__ import annotations

import threading

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from common.kafka_protocol.api import ApiKey
from harness.hostile_frames import enormous_body, request_frame
from tests.kafka.test_wire import call, connect, recv_frame

pytestmark = pytest.mark.integration
HOSTILE_BYTES = 50 * 1024 * 1024


@pytest.fixture(scope="module")
def one_broker(tmp_path_factory):
    from harness.local_cluster import LocalCluster
    cluster = LocalCluster(tmp_path_factory.mktemp("hostile-frames"), brokers=1,
                           log_dirs_per_broker=1)
    cluster.start()
    yield cluster
    cluster.stop(graceful=False)


def small_metadata_and_health(cluster) -> None:
    with connect(cluster) as s:
        got = call(s, ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False},
                   11)
        assert [b["node_id"] for b in got["brokers"]] == [1]
    with grpc.insecure_channel(cluster.brokers[1].address) as ch:
        r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert r.status == health_pb2.HealthCheckResponse.SERVING


def test_a_50mb_hostile_metadata_does_not_stop_the_broker(one_broker):
    frame = request_frame(ApiKey.METADATA, 9, enormous_body(ApiKey.METADATA, 9, HOSTILE_BYTES))
    half = len(frame) // 2
    first_half_sent, checked, done = threading.Event(), threading.Event(), threading.Event()
    outcome: dict = {}

    def hostile():
        try:
            with connect(one_broker) as s:
                s.sendall(frame[:half])
                first_half_sent.set()
                checked.wait(120)
                s.sendall(frame[half:])
                outcome["answer"] = recv_frame(s)  # None: the broker closed the connection
        except OSError as e:
            outcome["answer"] = None
            outcome["error"] = e
        finally:
            done.set()

    t = threading.Thread(target=hostile, daemon=True)
    t.start()
    assert first_half_sent.wait(120)
    small_metadata_and_health(one_broker)  # the hostile frame is half sent
    assert not done.is_set()
    checked.set()
    small_metadata_and_health(one_broker)  # the rest sent, being received or refused
    t.join(120)
    assert done.is_set()
    assert outcome["answer"] is None, "the hostile request was answered"
    small_metadata_and_health(one_broker)
    assert one_broker.brokers[1].is_running()


def test_a_metadata_within_the_budget_is_still_answered(one_broker):
    """A big but honest Metadata (10,000 names, decoded off the loop) gets its answer."""
    names = [f"no-such-topic-{i}" for i in range(10_000)]
    with connect(one_broker) as s:
        got = call(s, ApiKey.METADATA, 9, {"topics": [{"name": n} for n in names],
                                           "allow_auto_topic_creation": False}, 3)
    assert len(got["topics"]) == len(names)
    assert {t["error_code"] for t in got["topics"]} == {3}  # UNKNOWN_TOPIC_OR_PARTITION



def test_grpc_requests_beyond_their_bounds_are_refused_before_the_servicer(one_broker):
    """The gRPC side of defect 2 (common/grpc_limits.py): a Metadata of 20,000 names is over
    its element budget, one of 5 million empty names over the 8 MiB bound of non-data RPCs."""
    from common.rpc import replog_pb2 as pb
    from common.rpc import replog_pb2_grpc
    with grpc.insecure_channel(one_broker.brokers[1].address,
                               options=[("grpc.max_send_message_length", -1)]) as ch:
        stub = replog_pb2_grpc.BrokerStub(ch)
        with pytest.raises(grpc.RpcError) as e:
            stub.Metadata(pb.MetadataRequest(topics=[f"t{i}" for i in range(20_000)]),
                          timeout=60)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "more than 10000 elements" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            stub.Metadata(pb.MetadataRequest(topics=[""] * 5_000_000), timeout=60)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        got = stub.Metadata(pb.MetadataRequest(topics=["a"]), timeout=30)
        assert [b.broker_id for b in got.brokers] == [1]
    small_metadata_and_health(one_broker)

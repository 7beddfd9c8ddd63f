"""KIP-73 replication throttles: the quota module with a fake clock (rates, windows, throttled
replica lists, Kafka's in-sync exemption), and the leader's fetch path of a real
ReplicaManager over a real log, with the same fake clock driving its quota."""

from __future__ import annotations

import pytest

from broker.metadata_cache import MetadataCache
from broker.metrics import BrokerMetrics
from broker.replica_manager import ReplicaManager
from broker.replica_types import FetchPartitionRequest
from broker.replication_quota import (
    ALL_PARTITIONS,
    UNLIMITED,
    ReplicationQuota,
    ReplicationQuotas,
    SampledRate,
    parse_throttled_partitions,
    should_throttle,
)
from broker.servicer import leader_and_isr_request
from broker.storage.log_manager import LogManager
from common.config import build_config
from common.names import TopicPartition
from common.observability import configure_event_log
from common.records import ProducerRecord, build_batch
from common.rpc import replog_pb2 as pb

T0, T1, OTHER = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


class FakeClock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# ----------------------------------------------------------------------------- the rate

def test_rate_is_bytes_over_at_least_one_window():
    r = SampledRate(samples=11, window_s=1.0)
    assert r.measure(0.0) == 0.0
    r.record(1000, 0.0)
    assert r.measure(0.0) == 1000.0  # never divided by less than one window
    assert r.measure(0.5) == 1000.0
    assert r.measure(4.0) == 250.0  # since the oldest sample started


def test_rate_forgets_samples_older_than_all_windows():
    r = SampledRate(samples=3, window_s=1.0)
    r.record(3000, 0.0)
    assert r.measure(2.9) == pytest.approx(3000 / 2.9)
    assert r.measure(3.0) == 0.0  # no event within the 3 windows: the sample is reset
    r.record(500, 3.5)
    assert r.measure(3.5) == 500.0


def test_rate_slides_across_windows():
    r = SampledRate(samples=2, window_s=1.0)
    for t in range(10):
        r.record(100, float(t))
    # Three slots (two windows and one overlapping the edge); at 9.0 the sample of 7 has had
    # no event for two windows and is dropped: 8 and 9 over the second since 8 started.
    assert r.measure(9.0) == pytest.approx(200 / 1.0)
    assert r.measure(9.5) == pytest.approx(200 / 1.5)


def test_window_shape_is_checked():
    with pytest.raises(ValueError):
        SampledRate(samples=0)
    with pytest.raises(ValueError):
        SampledRate(window_s=0)


# ----------------------------------------------------------------------------- the quota

def test_unlimited_quota_is_never_exceeded():
    clock = FakeClock()
    q = ReplicationQuota(clock)
    q.record(1 << 40)
    assert q.bound == UNLIMITED and not q.is_quota_exceeded()


def test_quota_exceeded_above_the_bound_and_recovers_as_time_passes():
    clock = FakeClock()
    q = ReplicationQuota(clock, bound=1000)
    q.record(1000)
    assert not q.is_quota_exceeded()  # exactly at the bound is acceptable (Kafka's Quota)
    q.record(1)
    assert q.is_quota_exceeded()
    clock.advance(1.0)
    assert q.rate() == pytest.approx(1001 / 1.0) and q.is_quota_exceeded()
    clock.advance(0.01)
    assert not q.is_quota_exceeded()  # 1001 bytes over 1.01 s


def test_bound_changes_live():
    clock = FakeClock()
    q = ReplicationQuota(clock, bound=100)
    q.record(500)
    assert q.is_quota_exceeded()
    q.update_quota(1000)
    assert not q.is_quota_exceeded()
    q.update_quota(UNLIMITED)
    q.record(10**9)
    assert not q.is_quota_exceeded()


def test_a_fetcher_obeying_the_quota_averages_the_bound():
    """A simulated follower: every 50 ms it fetches 64 KiB unless the quota is exceeded. Over
    two minutes the bytes it received are the bound, give or take one fetch per window span."""
    clock = FakeClock(0.0)
    bound = 1 << 20
    q = ReplicationQuota(clock, bound=bound)
    received = 0
    for _ in range(int(120 / 0.05)):
        if not q.is_quota_exceeded():
            q.record(64 << 10)
            received += 64 << 10
        clock.advance(0.05)
    assert received / clock.now == pytest.approx(bound, rel=0.05)


# ----------------------------------------------------------------------------- throttled lists

@pytest.mark.parametrize("value, broker, expected", [
    ("*", 1, ALL_PARTITIONS),
    (" * ", 7, ALL_PARTITIONS),
    ("", 1, frozenset()),
    (None, 1, frozenset()),
    ("0:1,1:2", 1, frozenset({0})),
    ("0:1,1:2", 2, frozenset({1})),
    ("0:1, 1:2, 2:1", 1, frozenset({0, 2})),
    ("0:1,1:2", 3, frozenset()),
])
def test_throttled_replicas_keep_only_this_brokers_entries(value, broker, expected):
    assert parse_throttled_partitions(value, broker) == expected


def test_is_throttled_per_topic_and_partition():
    q = ReplicationQuota(FakeClock())
    assert not q.is_throttled(T0)
    q.mark_throttled("t", frozenset({1}))
    assert q.is_throttled(T1) and not q.is_throttled(T0) and not q.is_throttled(OTHER)
    q.mark_throttled("t", ALL_PARTITIONS)
    assert q.is_throttled(T0) and q.is_throttled(T1)
    q.mark_throttled("t", frozenset())
    assert not q.is_throttled(T1)
    q.mark_throttled("u", ALL_PARTITIONS)
    q.remove_throttle("u")
    assert not q.is_throttled(OTHER)


def test_leader_and_follower_lists_apply_to_their_own_side():
    quotas = ReplicationQuotas(broker_id=1, clock=FakeClock())
    quotas.apply_topic_config("t", {"leader.replication.throttled.replicas": "0:1,1:2",
                                    "follower.replication.throttled.replicas": "1:1"})
    assert quotas.leader.is_throttled(T0) and not quotas.leader.is_throttled(T1)
    assert quotas.follower.is_throttled(T1) and not quotas.follower.is_throttled(T0)
    quotas.apply_topic_config("t", None)  # unreadable: the throttles in force stay
    assert quotas.leader.is_throttled(T0)
    quotas.apply_topic_config("t", {})  # the keys were deleted
    assert not quotas.leader.is_throttled(T0) and not quotas.follower.is_throttled(T1)


def test_rates_come_from_dynamic_configs_over_static_ones():
    static = build_config([("broker.id", "1", "test"),
                           ("follower.replication.throttled.rate", "5000", "test")])
    quotas = ReplicationQuotas(broker_id=1, clock=FakeClock())
    quotas.apply_broker_config({}, static)
    assert (quotas.leader.bound, quotas.follower.bound) == (UNLIMITED, 5000)
    quotas.apply_broker_config({"leader.replication.throttled.rate": "100",
                                "follower.replication.throttled.rate": "200"}, static)
    assert (quotas.leader.bound, quotas.follower.bound) == (100, 200)
    quotas.apply_broker_config(None, static)  # unknown: the bounds in force stay
    assert (quotas.leader.bound, quotas.follower.bound) == (100, 200)
    quotas.apply_broker_config({}, static)  # deleted: back to the static values
    assert (quotas.leader.bound, quotas.follower.bound) == (UNLIMITED, 5000)


def test_only_out_of_sync_replicas_of_throttled_partitions_are_held_back():
    clock = FakeClock()
    q = ReplicationQuota(clock, bound=10)
    q.mark_throttled("t", frozenset({0}))
    assert not should_throttle(q, T0, replica_in_sync=False)  # quota not exceeded yet
    q.record(100)
    assert should_throttle(q, T0, replica_in_sync=False)
    assert not should_throttle(q, T0, replica_in_sync=True)  # no ISR thrashing
    assert not should_throttle(q, T1, replica_in_sync=False)  # not a throttled partition


# ----------------------------------------------------------------------------- leader fetch path

@pytest.fixture
async def leader(tmp_path):
    """Broker 1 leading t-0 with replicas 1, 2, 3 and ISR {1, 3}: 2 is catching up."""
    clock = FakeClock()
    cfg = build_config([("broker.id", "1", "test")])
    lm = LogManager([str(tmp_path / "d0")], 1)
    lm.startup()
    events = configure_event_log(str(tmp_path / "b1.json"), "broker", broker=1)
    metrics = BrokerMetrics(1)
    rm = ReplicaManager(1, cfg, lm, MetadataCache(), metrics, events, monotonic=clock)
    rm.broker_epoch = 7
    state = pb.LeaderAndIsrPartitionState(topic="t", partition=0, controller_epoch=1, leader=1,
                                          leader_epoch=0, partition_epoch=0, isr=[1, 3],
                                          replicas=[1, 2, 3], adding_replicas=[2])
    req = pb.LeaderAndIsrRequest(controller_id=0, controller_epoch=1, broker_epoch=7,
                                 partition_states=[state])
    assert [e for _, e in await rm.leader_and_isr(leader_and_isr_request(req))] == [0]
    res = await rm.produce(1, 5000, [(T0, build_batch([ProducerRecord(b"k", b"v" * 1000)
                                                       for _ in range(10)]))])
    assert res[0].error == 0
    yield rm, clock, metrics
    lm.shutdown()


async def _fetch_from_zero(rm, replica_id):
    (r,) = await rm.fetch(replica_id, 11, 0, 1, 1 << 20,
                          [FetchPartitionRequest(T0, 0, 1 << 20, current_leader_epoch=0)])
    return r


def _sample(metrics, name, **labels):
    return metrics.registry.get_sample_value(name, labels)


async def test_leader_holds_back_an_out_of_sync_follower_while_the_quota_is_exceeded(leader):
    rm, clock, metrics = leader
    rm.apply_topic_config("t", {"leader.replication.throttled.replicas": "0:1"})
    rm.apply_broker_config({"leader.replication.throttled.rate": "1000"})

    first = await _fetch_from_zero(rm, 2)  # under the bound: served, and recorded
    sent = len(first.records)
    assert sent > 1000 and not first.throttled
    assert rm.quotas.leader.rate() == sent
    assert _sample(metrics, "replog_replication_throttled_bytes_total",
                   direction="leader") == sent
    assert _sample(metrics, "kafka_server_brokertopicmetrics_reassignmentbytesout_total") == sent

    held = await _fetch_from_zero(rm, 2)  # over the bound, and 2 is not in the ISR
    assert held.records == b"" and held.throttled and held.error == 0
    assert held.high_watermark == first.high_watermark
    assert _sample(metrics, "replog_replication_throttled_partitions", direction="leader") == 1
    assert _sample(metrics, "kafka_server_leaderreplication_byte_rate") == sent

    in_sync = await _fetch_from_zero(rm, 3)  # 3 is in the ISR: never held back
    assert in_sync.records == first.records and not in_sync.throttled
    assert rm.quotas.leader.rate() == 2 * sent  # but its bytes count against the quota
    assert _sample(metrics, "kafka_server_brokertopicmetrics_reassignmentbytesout_total") == sent

    clock.advance(2 * sent / 1000)  # the rate falls below the bound as time passes
    again = await _fetch_from_zero(rm, 2)
    assert again.records == first.records


async def test_live_rate_change_and_unthrottled_partitions(leader):
    rm, _, _ = leader
    rm.apply_topic_config("t", {"leader.replication.throttled.replicas": "0:2"})  # not ours
    rm.apply_broker_config({"leader.replication.throttled.rate": "1"})
    for _ in range(3):
        assert (await _fetch_from_zero(rm, 2)).records  # t-0 is not throttled on broker 1
    rm.apply_topic_config("t", {"leader.replication.throttled.replicas": "*"})
    assert (await _fetch_from_zero(rm, 2)).records  # the first bytes are recorded now
    assert (await _fetch_from_zero(rm, 2)).throttled
    rm.apply_broker_config({})  # the rate deleted: Long.MAX, unlimited
    assert (await _fetch_from_zero(rm, 2)).records


async def test_reassignment_gauges_on_the_leader(leader):
    rm, _, metrics = leader
    assert _sample(metrics, "kafka_server_replicamanager_reassigningpartitions") == 1
    lag = _sample(metrics, "replog_reassignment_replica_lag_messages",
                  topic="t", partition="0", replica="2")
    assert lag == 10  # 2 has not fetched: the whole log
    await _fetch_from_zero(rm, 2)
    await rm.fetch(2, 11, 0, 1, 1 << 20,
                   [FetchPartitionRequest(T0, 10, 1 << 20, current_leader_epoch=0)])
    assert _sample(metrics, "replog_reassignment_replica_lag_messages",
                   topic="t", partition="0", replica="2") == 0
    assert _sample(metrics, "replog_reassignment_replica_lag_messages",
                   topic="t", partition="0", replica="3") is None  # not being added


# ----------------------------------------------------------------------------- follower fetcher

async def test_follower_leaves_out_a_throttled_out_of_sync_partition_but_not_an_in_sync_one(
        tmp_path):
    """Two in-process brokers over real gRPC. Broker 2 follows t-0 out of the ISR and t-1 in
    it, both named by follower.replication.throttled.replicas, with its follower quota
    exceeded on a frozen clock: t-1 is fetched (in sync: never held back), t-0 is left out
    of every Fetch until the rate is deleted, then it catches up."""
    from tests.broker.inprocess import Node, leader_and_isr, produce_req, wait_until
    a, b = Node(1, tmp_path), Node(2, tmp_path)
    for n in (a, b):
        await n.start()
    try:
        frozen = FakeClock()
        b.rm.quotas.follower.clock = frozen
        b.rm.apply_topic_config("t", {"follower.replication.throttled.replicas": "*"})
        b.rm.apply_broker_config({"follower.replication.throttled.rate": "1000"})
        b.rm.quotas.follower.record(10**6)  # exceeded for as long as the clock stands still
        for tp, isr in ((T0, [1]), (T1, [1, 2])):
            await a.stub.LeaderAndIsr(leader_and_isr(a, 1, 0, isr, [1, 2], [a, b], tp=tp))
            assert (await a.stub.Produce(produce_req("x", acks=1, tp=tp))).responses[0] \
                .partition_responses[0].error_code == 0
        for tp, isr in ((T0, [1]), (T1, [1, 2])):
            await b.stub.LeaderAndIsr(leader_and_isr(b, 1, 0, isr, [1, 2], [a, b], tp=tp))

        leo = lambda node, tp: node.rm.partitions[tp].log_end_offset  # noqa: E731
        await wait_until(lambda: leo(b, T1) == leo(a, T1) == 5, 30, "in-sync t-1 replicated")
        metrics = b.rm.metrics
        await wait_until(lambda: _sample(metrics, "replog_replication_throttled_partitions",
                                         direction="follower") == 1, 30, "t-0 held back")
        assert leo(b, T0) == 0  # left out of every Fetch so far
        received = _sample(metrics, "replog_replication_throttled_bytes_total",
                           direction="follower")
        assert received > 0  # t-1's bytes count against the quota, in sync or not
        assert b.rm.quotas.follower.rate() == 10**6 + received

        b.rm.apply_broker_config({})  # the rate deleted: unlimited
        await wait_until(lambda: leo(b, T0) == 5, 30, "t-0 caught up once unthrottled")
    finally:
        for n in (a, b):
            await n.stop()

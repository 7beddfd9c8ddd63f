"""Network faults between real hosts (``cluster up --hosts``: one network namespace per process,
nftables drops in a host's own namespace), each on the smallest cluster that shows it - one
ZooKeeper server, one controller and three brokers, each on its own host - under acks=all load.

- **A broker cut off from ZooKeeper only** (its peers and the controller still reach it): its
  session expires, the controller moves its leaderships to another ISR member in a new leader
  epoch, and what the cut broker still takes as leader is never acknowledged: its followers
  now fetch from the new leader, and the ISR shrink that would let it commit alone is refused
  by the controller (its registration is gone). After the heal it registers again (a new
  broker epoch), truncates to the new leader and rejoins the ISR; every acknowledged record
  is there and none of the cut broker's unacknowledged ones.
- **A broker cut off from its peers only** (ZooKeeper and the controller still reach it): the
  leaders it follows shrink it out of their ISRs; its own partition's ISR shrinks to itself
  (so with min.insync.replicas=2 acks=all writes there are refused, not lost); its session
  is never interrupted; after the heal it rejoins every ISR.
- **An asymmetric cut** (the leader's packets to ZooKeeper and the controller dropped, theirs
  to it delivered: it hears them, it cannot answer): acks=all writers on both sides - one
  sending only to the old leader, one following the metadata - never see one offset
  acknowledged for two different records, and every acknowledged record is read back.

As Kafka does it (ZooKeeper era): ``KafkaController.onBrokerFailure`` (via
``onReplicasBecomeOffline``) elects a new leader from the live ISR members for each partition
the dead broker led, in a new leader epoch, and removes the dead broker from every ISR; it
sends no request to a broker it holds dead. ``Partition.maybeShrinkIsr`` on the old leader
drops the followers that stopped fetching, but the ISR change is conditional - before
Kafka 2.7 a ZooKeeper ``setData`` on the state znode at the cached ``zkVersion``
(``ReplicationUtils.updateLeaderAndIsr``: "Cached zkVersion ... not equal to that in
zookeeper, skip updating ISR"), from 2.7 an AlterIsr/AlterPartition (KIP-497) that the
controller checks against the sender's broker epoch, the leader epoch and the partition
epoch - so a deposed leader never commits alone. replog's leaders send AlterPartition
(broker/alter_partition.py); the controller refuses it (controller/decisions/isr.py).

Root only (namespaces, nftables); skipped otherwise, saying why. Faults are set with the host
plan's own commands (harness/hosts.py, as chaos/host_nemesis.py does) and healed with its
chaos heal, which deletes table ``replog_chaos`` in every host.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

import grpc
import pytest

from client.admin_client import AdminClient
from common import zk_layout as zl
from common.errors import ErrorCode
from common.records import ProducerRecord, build_batch
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from harness import hosts as hostlib
from harness.cluster_hosts import HostsOptions, zookeeper_names
from harness.local_cluster import LocalCluster
from tests.cluster.helpers import (
    LoadProducer,
    assert_acked_read_back,
    consume_range,
    eventually,
    replica_batches,
)
from tests.zookeeper.test_ensemble_faults import _events

pytestmark = [pytest.mark.integration, pytest.mark.skipif(
    hostlib.unavailable() is not None, reason=f"{hostlib.unavailable()}")]

SESSION_TIMEOUT_MS = 3000
# A deposed leader that cannot shrink its ISR answers acks=all writes with REQUEST_TIMED_OUT,
# which - as in Kafka's producer (Sender.completeBatch refreshes only on an
# InvalidMetadataException) - does not make a client refresh its metadata, and the deposed
# leader's own metadata still names itself. A client that had it as leader finds the new one
# at its next periodic refresh (metadata.max.age.ms, 5 minutes by default): short here.
FOLLOW = {"metadata_max_age_ms": 1000}
OVERRIDES = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
             "replica.lag.time.max.ms": 3000, "replica.fetch.wait.max.ms": 200}


@pytest.fixture
def hosts_cluster(tmp_path):
    """Starts a cluster on hosts of its own (1 rack: no delay, only the faults); SIGKILLs it
    and checks nothing of its hosts is left at teardown."""
    made: list[LocalCluster] = []

    def make(brokers: int = 3) -> LocalCluster:
        c = LocalCluster(tmp_path / f"cluster-{len(made)}", brokers=brokers, controllers=1,
                         log_dirs_per_broker=1, overrides=OVERRIDES,
                         hosts=HostsOptions(racks=1))
        made.append(c)
        c.start()
        c.zk_client()  # this machine's own session: registrations and states are read here
        return c

    yield make
    for c in made:
        c.stop(graceful=False)
        tag = hostlib.cluster_tag(c.data_dir)
        assert not [n for n in hostlib.netns_list() if tag in n]


def _cut(c: LocalCluster, src: str, dsts: list[str], both_ways: bool = True) -> None:
    """Host ``src`` stops reaching each of ``dsts`` (and, ``both_ways``, they stop reaching
    it); every other path stays."""
    plan = c.running_hosts.plan
    for dst in dsts:
        cmds = plan.cut_commands(src, dst) + (plan.cut_commands(dst, src) if both_ways else [])
        for cmd in cmds:
            hostlib.run(cmd)


def _heal(c: LocalCluster) -> None:
    for cmd in c.running_hosts.plan.chaos_heal_commands():
        hostlib.run(cmd, False)


def _state(c: LocalCluster, topic: str, partition: int = 0) -> zl.LeaderAndIsr:
    """The partition's state znode, as the controller wrote it."""
    data, stat = c.zk_client().get(zl.partition_state_path(topic, partition))
    return zl.decode_partition_state(data, stat.version)


def _state_where(c: LocalCluster, topic: str, cond, partition: int = 0):
    s = _state(c, topic, partition)
    return s if cond(s) else None


async def _create(c: LocalCluster, topic: str, assignment: dict[int, list[int]]) -> None:
    async with AdminClient(c.bootstrap_servers) as admin:
        await admin.create_topic(topic, replica_assignment=assignment,
                                 configs={"min.insync.replicas": "2"})
    for p, replicas in assignment.items():
        await eventually(lambda p=p, r=replicas: _state_where(
            c, topic, lambda s: s.leader == r[0] and set(s.isr) == set(r), p),
            what=f"{topic}-{p} led by {replicas[0]} with a full ISR")


async def _acked_more(load, n: int, timeout: float = 60) -> None:
    want = len(load.acked) + n
    await eventually(lambda: len(load.acked) >= want, timeout=timeout,
                     what=f"{n} more acknowledged records ({len(load.acked)} so far)")


class DirectWrites:
    """acks=all produce requests to one broker only, one record each, never redirected to
    another broker: what that broker itself acknowledges, by (partition, offset). Shaped like
    LoadProducer (topic, partitions, acked) so assert_acked_read_back reads it back."""

    def __init__(self, address: str, topic: str, tag: str):
        self.address, self.topic, self.tag = address, topic, tag
        self.partitions = 1
        self.acked: dict[tuple[int, int], bytes] = {}
        self.answers: collections.Counter = collections.Counter()
        self.stop = asyncio.Event()

    async def run(self) -> None:
        async with grpc.aio.insecure_channel(self.address) as ch:
            stub = replog_pb2_grpc.BrokerStub(ch)
            i = 0
            while not self.stop.is_set():
                value = f"{self.tag}{i}".encode()
                i += 1
                req = pb.ProduceRequest(acks=-1, timeout_ms=2000, topic_data=[
                    pb.ProduceTopicData(topic=self.topic, partition_data=[
                        pb.ProducePartitionData(partition=0, records=build_batch(
                            [ProducerRecord(None, value)]))])])
                try:
                    r = (await stub.Produce(req, timeout=10)).responses[0] \
                        .partition_responses[0]
                except grpc.aio.AioRpcError as e:
                    self.answers[e.code().name] += 1
                else:
                    self.answers[ErrorCode(r.error_code).name] += 1
                    if r.error_code == ErrorCode.NONE:
                        self.acked[(0, r.base_offset)] = value
                await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def _running(*writers):
    tasks = [asyncio.create_task(w.run()) for w in writers]
    try:
        yield
    finally:
        for w in writers:
            w.stop.set()
        await asyncio.gather(*tasks)


def _no_offset_acked_twice(*writers) -> None:
    """No (partition, offset) acknowledged for two different records: two leaders never
    committed the same offset."""
    seen: dict[tuple[int, int], bytes] = {}
    for w in writers:
        for tp, value in w.acked.items():
            assert seen.setdefault(tp, value) == value, \
                f"offset {tp} acknowledged as {seen[tp]!r} and as {value!r}"


async def _values_up_to_hw(c: LocalCluster, topic: str) -> dict[tuple[int, int], bytes]:
    from client.consumer import Consumer
    async with Consumer(c.bootstrap_servers) as cons:
        hw = (await cons.end_offsets([(topic, 0)]))
    hw = next(iter(hw.values()))
    return await consume_range(c.bootstrap_servers, topic, {0: hw},
                               {(0, o) for o in range(hw)})


async def test_a_broker_cut_off_from_zookeeper_only_is_fenced_and_rejoins(hosts_cluster):
    c = hosts_cluster()
    await _create(c, "z", {0: [1, 2, 3]})
    before = _state(c, "z")
    registered = c._registration_czxid(1)
    load = LoadProducer(c.bootstrap_servers, "z", 1, **FOLLOW)
    cut_writes = DirectWrites(c.broker(1).address, "z", "cut-")
    async with _running(load):
        await _acked_more(load, 50)
        # broker-1 <-> every ZooKeeper member dropped; the controller and the peers reach it
        _cut(c, "broker-1", zookeeper_names(c))
        try:
            await eventually(lambda: c._registration_czxid(1) is None, timeout=60,
                             what="broker 1's registration gone with its session")
            after = await eventually(lambda: _state_where(
                c, "z", lambda s: s.leader in (2, 3) and 1 not in s.isr), timeout=60,
                what="z-0 moved to another ISR member, broker 1 out of the ISR")
            assert after.leader_epoch > before.leader_epoch
            assert after.controller_epoch == before.controller_epoch  # the controller stayed
            # the cut broker is still leader in its own eyes (the controller sends nothing
            # to a broker it holds dead); nothing it is sent now is acknowledged
            async with _running(cut_writes):
                await eventually(lambda: sum(cut_writes.answers.values()) >= 5, timeout=60,
                                 what="5 answers from the cut broker")
                await _acked_more(load, 50)  # the new leader serves acks=all meanwhile
        finally:
            _heal(c)
        assert cut_writes.acked == {}, cut_writes.answers
        # why: the ISR shrink that would let it commit alone was refused by the controller
        assert any("is not registered" in e.get("error", "")
                   for e in _events(c.broker(1), "alter_partition_retry"))
        # it registers again (a new session: a new broker epoch, KIP-380) and rejoins the ISR
        await eventually(lambda: (c._registration_czxid(1) or 0) > registered, timeout=60,
                         what="broker 1 registered again")
        await eventually(lambda: _state_where(c, "z", lambda s: set(s.isr) == {1, 2, 3}),
                         timeout=60, what="broker 1 back in the ISR")
        await _acked_more(load, 50)
    leader = _state(c, "z").leader
    assert leader == after.leader  # no election since
    await assert_acked_read_back(c.bootstrap_servers, load)
    # what broker 1 appended alone is gone: nothing of it is read, and its log is the
    # leader's, batch for batch (leader epochs and CRCs included), up to the high watermark
    values = await _values_up_to_hw(c, "z")
    assert not [v for v in values.values() if v.startswith(b"cut-")]
    hw = max(o for _, o in values) + 1
    await eventually(lambda: replica_batches(c, 1, "z", 0, hw) == replica_batches(
        c, leader, "z", 0, hw), what="broker 1's log equal to the leader's below the HW")
    print(f"the cut broker's answers: {dict(cut_writes.answers)}")


async def test_a_broker_cut_off_from_its_peers_only_leaves_the_isrs_and_comes_back(
        hosts_cluster):
    c = hosts_cluster()
    # broker 3 follows p-0 and leads p-1
    await _create(c, "p", {0: [1, 2, 3], 1: [3, 1, 2]})
    registered = c._registration_czxid(3)
    controller_epoch = c.controller_epoch()
    load = LoadProducer(c.bootstrap_servers, "p", 2)
    async with _running(load):
        await _acked_more(load, 50)
        _cut(c, "broker-3", ["broker-1", "broker-2"])  # ZooKeeper and the controller: intact
        try:
            # the leader of p-0 shrinks it out (its fetches stopped); p-1's leader, itself,
            # shrinks its unreachable followers out - still registered, it is the leader
            # ZooKeeper knows (Kafka's behaviour), and min.insync.replicas=2 then refuses
            # acks=all writes there rather than acknowledging them on one copy
            await eventually(lambda: _state_where(c, "p", lambda s: s.isr == (1, 2), 0),
                             timeout=60, what="broker 3 out of p-0's ISR")
            await eventually(lambda: _state_where(
                c, "p", lambda s: s.leader == 3 and s.isr == (3,), 1),
                timeout=60, what="p-1's ISR shrunk to its leader, broker 3")
            await _acked_more(load, 50)
            # its session never ended: the same registration, the same controller epoch
            assert c._registration_czxid(3) == registered
            assert c.controller_epoch() == controller_epoch
        finally:
            _heal(c)
        for p, isr in ((0, {1, 2, 3}), (1, {1, 2, 3})):
            await eventually(lambda p=p, isr=isr: _state_where(
                c, "p", lambda s: set(s.isr) == isr, p), timeout=60,
                what=f"p-{p}'s ISR full again")
        await _acked_more(load, 50)
    assert c._registration_czxid(3) == registered
    assert (_state(c, "p", 0).leader, _state(c, "p", 1).leader) == (1, 3)
    await assert_acked_read_back(c.bootstrap_servers, load)


# make soak: ~27 s; make test keeps test_a_broker_cut_off_from_zookeeper_only_... (~28 s), which
# deposes a leader the same way (an expired session) and checks what it alone acknowledges.
@pytest.mark.soak
async def test_an_asymmetric_cut_leaves_no_offset_acknowledged_by_two_leaders(hosts_cluster):
    c = hosts_cluster()
    await _create(c, "a", {0: [1, 2, 3]})
    before = _state(c, "a")
    registered = c._registration_czxid(1)
    # side A writes only to broker 1 (the leader now); side B follows the metadata of
    # brokers 2 and 3
    old_side = DirectWrites(c.broker(1).address, "a", "old-")
    new_side = LoadProducer(",".join(c.broker(b).address for b in (2, 3)), "a", 1,
                            **FOLLOW)
    async with _running(old_side, new_side):
        await _acked_more(new_side, 50)
        await _acked_more(old_side, 20)
        # one direction: broker 1 hears ZooKeeper and the controller, they do not hear it
        _cut(c, "broker-1", [*zookeeper_names(c), "controller-100"], both_ways=False)
        try:
            after = await eventually(lambda: _state_where(
                c, "a", lambda s: s.leader in (2, 3)), timeout=60,
                what="a-0 led by another broker")
            assert after.leader_epoch > before.leader_epoch
            cut_at = len(old_side.acked)
            await _acked_more(new_side, 50)  # the new leader serves acks=all
            await eventually(lambda: sum(old_side.answers.values()) >= 5 + cut_at, timeout=60,
                             what="more answers from the old leader")
        finally:
            _heal(c)
        await eventually(lambda: (c._registration_czxid(1) or 0) > registered, timeout=60,
                         what="broker 1 registered again")
        await eventually(lambda: _state_where(c, "a", lambda s: set(s.isr) == {1, 2, 3}),
                         timeout=60, what="broker 1 back in the ISR")
        await _acked_more(new_side, 50)
    _no_offset_acked_twice(old_side, new_side)
    await assert_acked_read_back(c.bootstrap_servers, new_side)
    await assert_acked_read_back(c.bootstrap_servers, old_side)
    print(f"the old leader's answers: {dict(old_side.answers)}")

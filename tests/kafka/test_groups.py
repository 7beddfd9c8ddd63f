"""Consumer groups end to end (issue 44 acceptance): unmodified clients - confluent-kafka
(librdkafka), kafka-python 3 and aiokafka - subscribe as one group to a replog cluster of real
processes (ZooKeeper, controller, brokers) through the Kafka listener. The broker creates
__consumer_offsets on the first FindCoordinator, the coordinator of each group is the leader of
its partition, and commits are stored there with acks=all (docs/groups.md)."""
from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from client.admin_client import AdminClient
from harness.polling import wait_until

pytestmark = pytest.mark.integration
TOPIC = "orders"
PARTITIONS = 6
RECORDS = 600
# Quicker groups than Kafka's defaults, so the tests do not wait out a 3 s initial rebalance
# delay each time; the offsets topic keeps Kafka's 50 partitions and replication factor 3.
BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": 0}


def create_topic(cluster, name: str = TOPIC, partitions: int = PARTITIONS, rf: int = 3) -> None:
    async def go():
        async with AdminClient(cluster.bootstrap_servers, request_timeout_ms=10000) as admin:
            await admin.create_topic(name, partitions, rf)
    asyncio.run(go())


def produce(cluster, count: int = RECORDS, topic: str = TOPIC) -> None:
    p = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all",
                  "enable.idempotence": False, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


def ck_consumer(cluster, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 500, **extra})


class Member(threading.Thread):
    """One confluent-kafka group member polling on its own thread; commits what it read."""

    def __init__(self, cluster, group: str, **extra):
        super().__init__(daemon=True)
        self.consumer = ck_consumer(cluster, group, **extra)
        self.consumer.subscribe([TOPIC])
        self.read: list[tuple[int, int]] = []  # (partition, offset)
        self.errors: list[str] = []
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.assigned: set[int] = set()
        self.acked: dict[int, int] = {}  # partition -> the highest commit acknowledged

    def run(self) -> None:
        while not self.stop_flag.is_set():
            m = self.consumer.poll(0.2)
            with self.lock:
                self.assigned = {tp.partition for tp in self.consumer.assignment()}
            if m is None:
                continue
            if m.error():
                self.errors.append(str(m.error()))
                continue
            self.read.append((m.partition(), m.offset()))
            try:
                self.consumer.commit(message=m, asynchronous=False)
            except KafkaException as e:  # a commit raced a rebalance: retried by the next one
                self.errors.append(str(e))
            else:
                with self.lock:
                    self.acked[m.partition()] = max(self.acked.get(m.partition(), 0),
                                                    m.offset() + 1)

    def close(self) -> None:
        self.stop_flag.set()
        self.join(30)
        self.consumer.close()


def _assignments(members: list[Member]) -> list[set[int]]:
    out = []
    for m in members:
        with m.lock:
            out.append(set(m.assigned))
    return out


def _disjoint_cover(assignments: list[set[int]]) -> bool:
    every = [p for a in assignments for p in a]
    return all(assignments) and sorted(every) == list(range(PARTITIONS))


def committed(cluster, group: str) -> dict[int, int]:
    c = ck_consumer(cluster, group)
    try:
        got = c.committed([CkTopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def end_offsets(cluster) -> dict[int, int]:
    c = ck_consumer(cluster, f"probe-{uuid.uuid4().hex[:6]}")
    try:
        return {p: c.get_watermark_offsets(CkTopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_librdkafka_group_shares_a_topic_and_commits(cluster_factory, strategy):
    cluster = cluster_factory(broker_overrides=BROKER_OVERRIDES)
    create_topic(cluster)
    produce(cluster)
    group = f"g-{strategy}"
    members = [Member(cluster, group, **{"partition.assignment.strategy": strategy})
               for _ in range(3)]
    for m in members:
        m.start()
    try:
        # three members, six partitions: disjoint assignments that cover the topic
        wait_until(lambda: _disjoint_cover(_assignments(members)), timeout=60,
                   what="assignments")
        assert all(len(a) == 2 for a in _assignments(members))
        wait_until(lambda: len({r for m in members for r in m.read}) == RECORDS, timeout=60,
                   what="read")
        # a member leaves: the others take its partitions over
        gone = members.pop()
        gone.close()
        wait_until(lambda: _disjoint_cover(_assignments(members)), timeout=60,
                   what="assignments after a leave")
    finally:
        for m in members:
            m.close()
    # every record was committed: a new consumer of the group sees the log end offsets
    assert committed(cluster, group) == end_offsets(cluster)
    fresh = ck_consumer(cluster, group)
    fresh.subscribe([TOPIC])
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            m = fresh.poll(0.5)
            assert m is None or m.error() is not None, \
                f"a committed record was read again: {m.partition()}@{m.offset()}"
    finally:
        fresh.close()


def test_offsets_survive_a_restart_of_the_whole_cluster(cluster_factory):
    cluster = cluster_factory(broker_overrides=BROKER_OVERRIDES)
    create_topic(cluster)
    produce(cluster, 60)
    group = "g-restart"
    c = ck_consumer(cluster, group)
    offsets = [CkTopicPartition(TOPIC, p, 3 + p) for p in range(PARTITIONS)]
    wait_until(lambda: _try_commit(c, offsets), timeout=60, what="a first commit")
    c.close()
    assert committed(cluster, group) == {p: 3 + p for p in range(PARTITIONS)}
    for b in cluster.brokers.values():
        b.stop()
    for b in cluster.brokers.values():
        b.start()
    cluster.wait_for_metadata()
    wait_until(lambda: _committed_or_none(cluster, group) == {p: 3 + p for p in range(PARTITIONS)},
               timeout=90, what="after restart")


def _try_commit(c: Consumer, offsets) -> bool:
    try:
        c.commit(offsets=offsets, asynchronous=False)
        return True
    except KafkaException:
        return False


def _committed_or_none(cluster, group):
    try:
        return committed(cluster, group)
    except KafkaException:
        return None


def test_kafka_python_and_aiokafka_consume_and_commit_in_one_group(cluster_factory):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition
    cluster = cluster_factory(broker_overrides=BROKER_OVERRIDES)
    create_topic(cluster)
    produce(cluster, 120)
    group = "g-python"
    # kafka-python 3 with its defaults (auto commit on, range/roundrobin assignors)
    kp = KafkaConsumer(TOPIC, bootstrap_servers=cluster.kafka_bootstrap_servers,
                       group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=20000)
    read = []
    for m in kp:
        read.append(m)
        if len(read) == 120:
            break
    kp.commit()
    kp.close()
    assert len({(m.partition, m.offset) for m in read}) == 120
    # aiokafka sees kafka-python's commits, then commits its own
    produce(cluster, 60)

    async def aio():
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition as AioTopicPartition
        c = AIOKafkaConsumer(TOPIC, bootstrap_servers=cluster.kafka_bootstrap_servers,
                             group_id=group, auto_offset_reset="earliest")
        await c.start()
        try:
            got = []
            async with asyncio.timeout(60):
                while len(got) < 60:
                    batch = await c.getmany(timeout_ms=1000)
                    for msgs in batch.values():
                        got.extend(msgs)
            await c.commit()
            return got, {p: await c.committed(AioTopicPartition(TOPIC, p))
                         for p in range(PARTITIONS)}
        finally:
            await c.stop()
    got, aio_committed = asyncio.run(aio())
    assert len(got) == 60  # only the new records: kafka-python's commits were seen
    assert all(m.offset >= 20 for m in got)
    ends = end_offsets(cluster)
    assert aio_committed == ends
    # and kafka-python sees aiokafka's
    kp2 = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers, group_id=group)
    try:
        assert {p: kp2.committed(KpTopicPartition(TOPIC, p)) for p in range(PARTITIONS)} == ends
    finally:
        kp2.close()


# ---------------------------------------------------------------------------- every version

def test_every_version_of_the_group_apis_on_the_wire(cluster_factory):
    """One member's life at each version of each group API, on a one-broker cluster (it leads
    every __consumer_offsets partition): FindCoordinator names it, JoinGroup (v4+ first asks
    for a member id, KIP-394), SyncGroup hands back the leader's assignment byte for byte,
    Heartbeat, OffsetCommit then OffsetFetch read the offset and its metadata, DescribeGroups
    and ListGroups show it Stable, LeaveGroup, OffsetDelete and DeleteGroups remove it."""
    from common.kafka_protocol.api import ApiKey as K
    from tests.kafka.test_wire import call, connect
    cluster = cluster_factory(brokers=1, log_dirs_per_broker=1,
                              broker_overrides=BROKER_OVERRIDES)
    create_topic(cluster, partitions=1, rf=1)
    n = iter(range(1000, 100000))
    with connect(cluster) as s:
        for i in range(10):
            g = f"wire-{i}"
            v = min(i, 6)

            def coordinator(g=g, v=v):
                r = call(s, K.FIND_COORDINATOR, v, {"key": g, "key_type": 0,
                                                     "coordinator_keys": [g]}, next(n))
                return (r["coordinators"][0] if v >= 4 else r)["error_code"] == 0 and r
            r = wait_until(coordinator, timeout=60, what="a coordinator")
            node = r["coordinators"][0] if v >= 4 else r
            assert (node["node_id"], f"{node['host']}:{node['port']}") == \
                (1, cluster.brokers[1].kafka_address)
            join = {"group_id": g, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                    "member_id": "", "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b"meta"}]}
            r = call(s, K.JOIN_GROUP, i, join, next(n))
            if i >= 4:
                assert r["error_code"] == 79 and r["member_id"]  # MEMBER_ID_REQUIRED
                join["member_id"] = r["member_id"]
                r = call(s, K.JOIN_GROUP, i, join, next(n))
            assert r["error_code"] == 0, (i, r)
            member = r["member_id"]
            assert (r["generation_id"], r["leader"], r["protocol_name"]) == (1, member, "range")
            assert [(m["member_id"], m["metadata"]) for m in r["members"]] == [(member, b"meta")]
            r = call(s, K.SYNC_GROUP, min(i, 5), {
                "group_id": g, "generation_id": 1, "member_id": member,
                "protocol_type": "consumer", "protocol_name": "range",
                "assignments": [{"member_id": member, "assignment": b"assigned"}]}, next(n))
            assert (r["error_code"], r["assignment"]) == (0, b"assigned")
            r = call(s, K.HEARTBEAT, min(i, 4), {"group_id": g, "generation_id": 1,
                                                 "member_id": member}, next(n))
            assert r["error_code"] == 0
            r = call(s, K.OFFSET_COMMIT, i, {
                "group_id": g, "generation_id_or_member_epoch": 1, "member_id": member,
                "topics": [{"name": TOPIC, "partitions": [
                    {"partition_index": 0, "committed_offset": 10 + i,
                     "committed_metadata": "md"}]}]}, next(n))
            # v0 has no member id: a commit into a group with members is refused
            # (UNKNOWN_MEMBER_ID, GroupCoordinator.validateOffsetCommit), so nothing is stored
            assert r["topics"][0]["partitions"][0]["error_code"] == (25 if i == 0 else 0)
            ask = [{"name": TOPIC, "partition_indexes": [0]}]
            r = call(s, K.OFFSET_FETCH, i, {"groups": [{"group_id": g, "topics": ask}]}
                     if i >= 8 else {"group_id": g, "topics": ask}, next(n))
            topics = r["groups"][0]["topics"] if i >= 8 else r["topics"]
            got = topics[0]["partitions"][0]
            assert (got["committed_offset"], got["metadata"], got["error_code"]) == \
                ((10 + i, "md", 0) if i else (-1, "", 0))
            r = call(s, K.DESCRIBE_GROUPS, min(i, 5), {"groups": [g]}, next(n))
            d = r["groups"][0]
            assert (d["error_code"], d["group_state"], d["protocol_data"],
                    [m["member_id"] for m in d["members"]]) == (0, "Stable", "range", [member])
            r = call(s, K.LIST_GROUPS, min(i, 5), {"states_filter": ["stable"]}, next(n))
            assert g in {x["group_id"] for x in r["groups"]}
            r = call(s, K.LEAVE_GROUP, min(i, 5), {"group_id": g, "member_id": member,
                                                   "members": [{"member_id": member}]},
                     next(n))
            assert r["error_code"] == 0
            if i >= 3:
                assert [(m["member_id"], m["error_code"]) for m in r["members"]] == \
                    [(member, 0)]
            r = call(s, K.DELETE_GROUPS, min(i, 2), {"groups_names": [g, g + "-unknown"]},
                     next(n))
            assert [(x["group_id"], x["error_code"]) for x in r["results"]] == \
                [(g, 0), (g + "-unknown", 69)]  # GROUP_ID_NOT_FOUND
            # deleted with its offsets: nothing left to delete
            r = call(s, K.OFFSET_DELETE, 0, {"group_id": g, "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": 0}]}]}, next(n))
            assert r["error_code"] == 69
            r = call(s, K.OFFSET_FETCH, min(i, 7), {"group_id": g, "topics": ask}, next(n))
            assert r["topics"][0]["partitions"][0]["committed_offset"] == -1


# ---------------------------------------------------------------------------- faults

# A killed process is noticed sooner than with Kafka's defaults: its ZooKeeper session ends
# after 6 s (the controller then elects new leaders) and a dead follower leaves the ISRs after
# 5 s (so acks=all commits to the partitions it followed complete).
FAULT_OVERRIDES = {**BROKER_OVERRIDES, "zookeeper.session.timeout.ms": 6000,
                   "replica.lag.time.max.ms": 5000}

_KILLABLE_MEMBER = """
import sys, confluent_kafka as ck
c = ck.Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                 "auto.offset.reset": "earliest", "enable.auto.commit": False,
                 "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.2)
"""


def coordinator_of(cluster, group: str) -> int:
    import socket

    from common.kafka_protocol.api import ApiKey as K
    from tests.kafka.test_wire import call
    alive = next(b for b in cluster.brokers.values() if b.is_running())
    host, port = alive.kafka_address.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        r = call(s, K.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}, 1)
    c = r["coordinators"][0]
    assert c["error_code"] == 0, c
    return c["node_id"]


def test_a_killed_member_is_rebalanced_away(cluster_factory):
    import subprocess
    import sys
    cluster = cluster_factory(broker_overrides=BROKER_OVERRIDES)
    create_topic(cluster)
    group = "g-kill-member"
    members = [Member(cluster, group) for _ in range(2)]
    for m in members:
        m.start()
    proc = subprocess.Popen([sys.executable, "-c", _KILLABLE_MEMBER,
                             cluster.kafka_bootstrap_servers, group, TOPIC])
    try:
        # the third member (another process) holds the two partitions the threads do not
        wait_until(lambda: sorted(len(a) for a in _assignments(members)) == [2, 2]
                   and not set.intersection(*_assignments(members)), timeout=60,
                   what="three members sharing the topic")
        proc.kill()  # SIGKILL: no LeaveGroup, its session just ends
        proc.wait(10)
        wait_until(lambda: _disjoint_cover(_assignments(members)), timeout=60,
                   what="the survivors covering the topic")
    finally:
        proc.kill()
        for m in members:
            m.close()


def test_killing_the_coordinators_broker_loses_no_acknowledged_commit(cluster_factory):
    cluster = cluster_factory(broker_overrides=FAULT_OVERRIDES)
    create_topic(cluster)
    produce(cluster)
    group = "g-kill-coordinator"
    members = [Member(cluster, group) for _ in range(2)]
    for m in members:
        m.start()
    victim = None
    try:
        wait_until(lambda: len({r for m in members for r in m.read}) >= RECORDS // 4,
                   timeout=60, what="a quarter of the records read")
        victim = coordinator_of(cluster, group)
        cluster.brokers[victim].kill()
        acked_at_kill = _acked(members)
        # every record is consumed at least once, through the failover
        wait_until(lambda: len({r for m in members for r in m.read}) == RECORDS, timeout=120,
                   what="every record read")
        wait_until(lambda: _acked(members) == end_offsets(cluster), timeout=120,
                   what="every record's commit acknowledged")
        wait_until(lambda: coordinator_of(cluster, group) != victim, timeout=60,
                   ignore=(AssertionError,), what="a new coordinator")
    finally:
        for m in members:
            m.close()
    # no acknowledged commit went back: what the new coordinator holds is at least what was
    # acknowledged before and after the kill
    held = committed(cluster, group)
    assert all(held[p] >= acked_at_kill.get(p, 0) for p in range(PARTITIONS)), \
        (held, acked_at_kill)
    assert held == end_offsets(cluster)
    # and once the killed broker is back and the coordinator moves to it again, still so
    cluster.brokers[victim].start()
    cluster.wait_for_metadata()
    wait_until(lambda: _committed_or_none(cluster, group) == end_offsets(cluster), timeout=90,
               what="the commits after the killed broker's return")


def _acked(members: list[Member]) -> dict[int, int]:
    out: dict[int, int] = {}
    for m in members:
        with m.lock:
            for p, o in m.acked.items():
                out[p] = max(out.get(p, 0), o)
    return out


# ---------------------------------------------------------------------------- the CLI

def test_replog_consumer_groups_lists_describes_and_deletes(cluster_factory):
    import subprocess
    import sys

    from harness.local_cluster import REPO_ROOT
    cluster = cluster_factory(broker_overrides=BROKER_OVERRIDES)
    create_topic(cluster, partitions=2)
    p = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    for i in range(10):
        p.produce(TOPIC, value=b"v", partition=i % 2)
    assert p.flush(30) == 0

    def replog(*args):
        return subprocess.run([sys.executable, "-m", "admin.cli", "consumer-groups",
                               "--bootstrap-server", cluster.kafka_bootstrap_servers, *args],
                              capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)

    def two(offsets):  # the topic has two partitions here
        return {p: o for p, o in offsets.items() if p < 2}

    c = ck_consumer(cluster, "g-cli", **{"client.id": "cli-client"})
    c.subscribe([TOPIC])

    def assigned():
        c.poll(0.2)
        return len(c.assignment()) == 2
    wait_until(assigned, timeout=60, what="the consumer's assignment")
    wait_until(lambda: _try_commit(c, [CkTopicPartition(TOPIC, 0, 3),
                                       CkTopicPartition(TOPIC, 1, 5)]), timeout=30,
               what="a commit")
    out = replog("--describe", "--group", "g-cli")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == ""
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    rows = sorted(tuple(line.split()) for line in lines[2:] if line.strip())
    assert [r[:6] for r in rows] == [("g-cli", TOPIC, "0", "3", "5", "2"),
                                     ("g-cli", TOPIC, "1", "5", "5", "0")]
    assert {r[8] for r in rows} == {"cli-client"} and {r[7] for r in rows} == {"/127.0.0.1"}
    assert lines[1].index("TOPIC") == 16 and lines[1].index("PARTITION") == 32  # Kafka's widths
    # active: not deleted, with Kafka's message
    out = replog("--delete", "--group", "g-cli")
    assert "Group 'g-cli' could not be deleted due to: " \
           "org.apache.kafka.common.errors.GroupNotEmptyException" in out.stdout
    out = replog("--reset-offsets", "--group", "g-cli", "--all-topics", "--to-earliest")
    assert out.stdout.splitlines()[:2] == [
        "", "Error: Assignments can only be reset if the group 'g-cli' is inactive, but the "
            "current state is Stable."]
    c.close()
    wait_until(lambda: "Empty" in replog("--list", "--state").stdout, timeout=30,
               what="the group empty")
    # a plan only (dry run, the default), Kafka's table
    out = replog("--reset-offsets", "--group", "g-cli", "--topic", TOPIC, "--to-earliest")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "", f"{'GROUP':<15} {'TOPIC':<15} {'PARTITION':<10} NEW-OFFSET",
        f"{'g-cli':<15} {TOPIC:<15} {'0':<10} 0", f"{'g-cli':<15} {TOPIC:<15} {'1':<10} 0"]
    assert two(committed(cluster, "g-cli")) == {0: 3, 1: 5}
    # --shift-by is clamped to the log (Kafka's checkOffsetsRange); --execute commits it
    out = replog("--reset-offsets", "--group", "g-cli", "--topic", f"{TOPIC}:0,1",
                 "--shift-by", "-4", "--execute")
    assert [line.split()[-1] for line in out.stdout.splitlines()[2:]] == ["0", "1"]
    assert two(committed(cluster, "g-cli")) == {0: 0, 1: 1}
    out = replog("--reset-offsets", "--group", "g-cli", "--all-topics", "--to-latest",
                 "--execute")
    assert two(committed(cluster, "g-cli")) == {0: 5, 1: 5}
    out = replog("--reset-offsets", "--group", "g-cli", "--all-topics")
    assert out.returncode == 1 and "takes exactly one of these options" in out.stderr
    out = replog("--list", "--state")
    assert out.stdout.splitlines()[0].split() == ["GROUP", "STATE"]
    assert ["g-cli", "Empty"] in [line.split() for line in out.stdout.splitlines()]
    assert replog("--list").stdout.split() == ["g-cli"]
    out = replog("--describe", "--group", "g-cli")
    assert "Consumer group 'g-cli' has no active members." in out.stderr
    assert " - " in out.stdout.splitlines()[2]  # no member: "-" columns
    out = replog("--delete", "--group", "g-cli")
    assert out.stdout.strip() == "Deletion of requested consumer groups ('g-cli') was successful."
    assert replog("--list").stdout.split() == []
    out = replog("--describe", "--group", "g-cli")
    assert "Error: Consumer group 'g-cli' does not exist." in out.stdout
    # bad input: one line, status 1
    out = replog("--list", "--describe")
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    out = replog("--list", "--state", "Bogus")
    assert out.returncode == 1 and "Invalid state list 'Bogus'" in out.stderr

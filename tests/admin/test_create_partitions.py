"""Adding partitions (CreatePartitions) against real processes: ZooKeeper, two controllers,
three brokers. ``replog topics alter`` and AdminClient.create_partitions grow a topic across a
controller failover; the new partitions take records with acks=all on every replica, and
refusals print one line and change nothing."""

from __future__ import annotations

import asyncio

import pytest

from client import AdminClient, Consumer, NewPartitions, Producer
from common.errors import ErrorCode
from harness.local_cluster import LocalCluster
from tests.admin.test_integration import describe, one_line_error, replog
from tests.polling import wait_until

pytestmark = pytest.mark.integration

WARNING = ("WARNING: If partitions are increased for a topic that has a key, the partition "
           "logic or ordering of the messages will be affected")


def _partition_lines(bootstrap: str, topic: str) -> list[str]:
    return [ln for ln in describe(bootstrap, "--topic", topic) if "\tPartition: " in ln]


async def _topic(admin: AdminClient, name: str):
    return (await admin.describe_topics([name]))[name]


def test_a_topic_grows_across_a_controller_failover_and_its_new_partitions_replicate(
        cluster_factory):
    cluster: LocalCluster = cluster_factory(brokers=3, controllers=2)
    b = cluster.bootstrap_servers

    async def create():
        async with AdminClient(b) as admin:
            await admin.create_topic("t", 2, 3)
    asyncio.run(create())

    p = replog("topics", "alter", "--bootstrap-server", b, "--topic", "t", "--partitions", "4")
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode().splitlines() == [WARNING, "Adding partitions succeeded!"]
    assert len(_partition_lines(b, "t")) == 4

    # The active controller dies: the next one loads the grown assignment and serves the
    # next CreatePartitions (the client follows it through NOT_CONTROLLER / no answer).
    first = cluster.wait_for_controller()
    cluster.controller(first).kill()
    cluster.wait_for_controller(exclude=[first])

    async def grow_and_use():
        async with AdminClient(b, default_api_timeout_ms=60000) as admin:
            assert await admin.create_partitions({"t": NewPartitions(5)}) == {"t": None}
            t = await _topic(admin, "t")
            assert [p.partition for p in t.partitions] == [0, 1, 2, 3, 4]
            for p in t.partitions:
                assert len(p.replicas) == 3 and sorted(p.isr) == sorted(p.replicas), p
                assert p.leader in p.replicas and not p.elr and not p.last_known_elr, p
        sent = {}
        async with Producer(b, acks="all", linger_ms=2) as producer:
            for p in (2, 3, 4):
                for i in range(10):
                    md = await producer.send_and_wait("t", f"v{p}-{i}".encode(), partition=p)
                    sent[(p, md.offset)] = f"v{p}-{i}".encode()
        got = {}
        async with Consumer(b) as consumer:
            await consumer.assign([("t", p) for p in (2, 3, 4)])
            consumer.seek_to_beginning()
            while len(got) < len(sent):
                for r in await consumer.poll(1000):
                    got[(r.partition, r.offset)] = r.value
        assert got == sent
        # acks=all: every replica's log holds the 10 records of each new partition.
        async with AdminClient(b) as admin:
            for broker in (1, 2, 3):
                leos = await admin.replica_log_end_offsets(broker, [("t", p) for p in (2, 3, 4)])
                assert leos == {("t", 2): 10, ("t", 3): 10, ("t", 4): 10}, (broker, leos)
    asyncio.run(grow_and_use())
    assert len(_partition_lines(b, "t")) == 5


def test_alter_refusals_print_one_line_and_change_nothing(cluster: LocalCluster):
    b = cluster.bootstrap_servers
    p = replog("topics", "create", "--bootstrap-server", b, "--topic", "t", "--partitions", "2",
               "--replication-factor", "3")
    assert p.returncode == 0, p.stderr.decode()
    before = _partition_lines(b, "t")

    def alter(*args: str):
        return replog("topics", "alter", "--bootstrap-server", b, "--topic", "t", *args)

    one_line_error(alter("--partitions", "1"),
                   "Topic currently has 2 partitions, which is higher than the requested 1.")
    one_line_error(alter("--partitions", "2"), "Topic already has 2 partitions.")
    one_line_error(alter("--partitions", "3", "--replica-assignment", "1:2:3,1:2:3,1:2:9"),
                   "Unknown broker(s) in replica assignment: 9.")
    one_line_error(alter("--partitions", "4", "--replica-assignment", "1:2:3,1:2:3,3:2:1"),
                   "Increasing the number of partitions by 2 but 1 assignments provided.")
    one_line_error(alter("--partitions", "3", "--replica-assignment", "1:2:3,1:2:3"),
                   "Increasing the number of partitions by 1 but 0 assignments provided.")
    one_line_error(alter("--partitions", "3", "--replica-assignment", "1:2:3,1:2:3,1:2:2"),
                   "Partition replica lists may not contain duplicate entries: 2")
    one_line_error(alter("--partitions", "3", "--replica-assignment", "1:2:3,1:2:3,1:2"),
                   "Partition 2 has different replication factor: [1, 2]")
    one_line_error(alter(), "the following arguments are required: --partitions")
    one_line_error(replog("topics", "alter", "--bootstrap-server", b, "--topic", "nosuch",
                          "--partitions", "3"), "Topic 'nosuch' does not exist as expected")
    p = replog("topics", "alter", "--bootstrap-server", b, "--topic", "nosuch", "--partitions",
               "3", "--if-exists")
    assert p.returncode == 0 and not p.stdout, p

    async def validate_only():
        async with AdminClient(b) as admin:
            ok = await admin.create_partitions({"t": 4}, validate_only=True)
            bad = await admin.create_partitions({"t": NewPartitions(3, [[1, 2]])},
                                                validate_only=True)
        assert ok == {"t": None}
        assert bad["t"].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    asyncio.run(validate_only())
    assert _partition_lines(b, "t") == before

    # An explicit assignment lists every partition; the ones past the count are the new ones.
    p = alter("--partitions", "3", "--replica-assignment", "1:2:3,2:3:1,3:1:2")
    assert p.returncode == 0, p.stderr.decode()
    lines = _partition_lines(b, "t")
    assert lines[:2] == before
    wait_until(lambda: "\tReplicas: 3,1,2\tIsr: 3,1,2" in _partition_lines(b, "t")[2],
               what="partition 2 on 3,1,2 with a full ISR")

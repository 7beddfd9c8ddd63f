"""``replog consumer-groups`` against a real cluster (issue 44 item 4): the parts of
kafka-consumer-groups beyond list/describe/delete/reset that tests/kafka/test_groups.py covers -
--reset-offsets --to-datetime / --by-duration (ListOffsets by timestamp), --export and
--from-file (Kafka's CSV), --delete-offsets (OffsetDelete), --describe --members [--verbose],
--state and --offsets - with Kafka's columns and messages, and bad input as one line and exit
status 1. One cluster (ZooKeeper, controller, three brokers) serves the module; each test has its
own topic and groups."""
from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from harness.local_cluster import REPO_ROOT, LocalCluster
from harness.polling import wait_until
from tests.kafka.test_groups import BROKER_OVERRIDES, _try_commit, ck_consumer, create_topic

pytestmark = pytest.mark.integration
T0_MS = 1704067200000  # 2024-01-01T00:00:00.000Z: record i of a timed topic is T0 + i s


@pytest.fixture(scope="module")
def cgcluster(tmp_path_factory, zk_server):
    cluster = LocalCluster(tmp_path_factory.mktemp("consumer-groups-cli"), brokers=3,
                           log_dirs_per_broker=1, broker_overrides=BROKER_OVERRIDES,
                           zookeeper=f"{zk_server.hosts}/replog-cgcli-{uuid.uuid4().hex[:8]}")
    cluster.start()
    yield cluster
    cluster.stop(graceful=False)


def replog(cluster, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "admin.cli", "consumer-groups",
                           "--bootstrap-server", cluster.kafka_bootstrap_servers, *args],
                          capture_output=True, text=True, timeout=90, cwd=REPO_ROOT)


def timed_topic(cluster, topic: str, partitions: int = 2, records: int = 10) -> None:
    """``records`` records in each partition, record i stamped T0 + i seconds (CreateTime)."""
    create_topic(cluster, topic, partitions=partitions)
    p = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all"})
    for part in range(partitions):
        for i in range(records):
            p.produce(topic, value=b"v", partition=part, timestamp=T0_MS + i * 1000)
    assert p.flush(30) == 0


def commit(cluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = ck_consumer(cluster, group)
    try:
        tps = [CkTopicPartition(t, p, o) for (t, p), o in offsets.items()]
        wait_until(lambda: _try_commit(c, tps), timeout=60, what="a commit")
    finally:
        c.close()


def committed(cluster, group: str, topic: str, partitions: int = 2) -> dict[int, int]:
    c = ck_consumer(cluster, group)
    try:
        got = c.committed([CkTopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def plan_of(out: subprocess.CompletedProcess) -> dict[int, int]:
    """partition -> NEW-OFFSET from Kafka's reset table."""
    assert out.returncode == 0, out.stderr
    lines = [line.split() for line in out.stdout.splitlines() if line.strip()]
    header = lines.index(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"])
    return {int(r[2]): int(r[3]) for r in lines[header + 1:]}


def test_reset_to_datetime_and_by_duration(cgcluster):
    topic = "timed"
    timed_topic(cgcluster, topic)
    # the first offset at or after the time; a zone is honoured, none means UTC
    out = replog(cgcluster, "--reset-offsets", "--group", "g-time", "--topic", topic,
                 "--to-datetime", "2024-01-01T00:00:05.000", "--dry-run")
    assert plan_of(out) == {0: 5, 1: 5}
    out = replog(cgcluster, "--reset-offsets", "--group", "g-time", "--topic", f"{topic}:1",
                 "--to-datetime", "2024-01-01T01:00:03.500+01:00", "--execute")
    assert plan_of(out) == {1: 4}
    assert committed(cgcluster, "g-time", topic)[1] == 4
    # every record is older than an hour: Kafka's Warn line and the log end
    out = replog(cgcluster, "--reset-offsets", "--group", "g-time", "--topic", topic,
                 "--by-duration", "PT1H", "--execute")
    assert "Warn: Partition 0 from topic timed is empty. Falling back to latest known offset." \
        in out.stdout.splitlines()
    assert plan_of(out) == {0: 10, 1: 10}
    assert committed(cgcluster, "g-time", topic) == {0: 10, 1: 10}
    # and a duration reaching back before the records: the log start
    out = replog(cgcluster, "--reset-offsets", "--group", "g-time", "--all-topics",
                 "--by-duration", "P3650DT1H30M", "--execute")
    assert plan_of(out) == {0: 0, 1: 0}
    assert "Warn:" not in out.stdout
    assert committed(cgcluster, "g-time", topic) == {0: 0, 1: 0}
    # a time after the last record is the log end too
    out = replog(cgcluster, "--reset-offsets", "--group", "g-time", "--all-topics",
                 "--to-datetime", "2030-01-01T00:00:00.000Z")
    assert plan_of(out) == {0: 10, 1: 10}
    for bad, words in [("2024-01-01", "does not contain a 'T'"),
                       ("2024-02-30T00:00:00.000", 'Unparseable date: "2024-02-30T00:00:00.000"')]:
        out = replog(cgcluster, "--reset-offsets", "--group", "g-time", "--all-topics",
                     "--to-datetime", bad)
        assert out.returncode == 1 and out.stdout == ""
        assert len(out.stderr.splitlines()) == 1 and words in out.stderr
    out = replog(cgcluster, "--reset-offsets", "--group", "g-time", "--all-topics",
                 "--by-duration", "1 hour")
    assert out.returncode == 1 and out.stderr.strip() == (
        "Error: Executing consumer group command failed due to Text cannot be parsed to a "
        "Duration: 1 hour")


def test_export_and_from_file(cgcluster, tmp_path):
    topic = "planned"
    timed_topic(cgcluster, topic)
    commit(cgcluster, "g-plan", {(topic, 0): 2, (topic, 1): 7})
    commit(cgcluster, "g-plan2", {(topic, 0): 1})
    # --export: the plan as Kafka's CSV, nothing committed in a dry run
    out = replog(cgcluster, "--reset-offsets", "--group", "g-plan", "--topic", topic,
                 "--shift-by", "2", "--export")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{topic},0,4\n{topic},1,9\n\n"
    assert committed(cgcluster, "g-plan", topic) == {0: 2, 1: 7}
    # --to-current: the committed offsets, the log end where there is none
    out = replog(cgcluster, "--reset-offsets", "--group", "g-plan2", "--topic", topic,
                 "--to-current", "--export")
    assert out.stdout == f"{topic},0,1\n{topic},1,10\n\n"
    # what --export wrote, edited, is read back by --from-file (clamped to the log)
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,3\n{topic},1,99\n")
    out = replog(cgcluster, "--reset-offsets", "--group", "g-plan", "--from-file", str(plan),
                 "--execute")
    assert plan_of(out) == {0: 3, 1: 10}
    assert committed(cgcluster, "g-plan", topic) == {0: 3, 1: 10}
    # several groups: group,topic,partition,offset lines each way
    out = replog(cgcluster, "--reset-offsets", "--group", "g-plan", "--group", "g-plan2",
                 "--topic", f"{topic}:0", "--to-earliest", "--export", "--dry-run")
    assert out.stdout == f"g-plan,{topic},0,0\ng-plan2,{topic},0,0\n\n"
    both = tmp_path / "both.csv"
    both.write_text(f"g-plan,{topic},1,5\ng-plan2,{topic},0,6\n")
    out = replog(cgcluster, "--reset-offsets", "--group", "g-plan", "--group", "g-plan2",
                 "--from-file", str(both), "--execute")
    assert out.returncode == 0, out.stderr
    assert committed(cgcluster, "g-plan", topic) == {0: 3, 1: 5}
    assert committed(cgcluster, "g-plan2", topic)[0] == 6
    # a group the file has no plan for: Kafka's error, nothing reset
    out = replog(cgcluster, "--reset-offsets", "--group", "g-plan-none", "--group", "g-plan2",
                 "--from-file", str(both), "--execute")
    assert "Error: No reset plan for group g-plan-none found" in out.stdout.splitlines()
    assert plan_of(out) == {0: 6}
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{topic},zero,3\n")
    out = replog(cgcluster, "--reset-offsets", "--group", "g-plan", "--from-file", str(bad))
    assert out.returncode == 1 and out.stdout == "" and out.stderr.strip() == (
        f"Error: Invalid reset plan line 1 of {bad}: '{topic},zero,3' (expected "
        "topic,partition,offset)")
    # --shift-by with no committed offset: Kafka's refusal
    out = replog(cgcluster, "--reset-offsets", "--group", "g-plan2", "--topic", f"{topic}:1",
                 "--shift-by", "1")
    assert out.returncode == 1 and out.stderr.strip() == (
        f"Error: Cannot shift offset for partition {topic}-1 since there is no current "
        "committed offset")


def test_delete_offsets(cgcluster):
    topic, other = "deleted", "kept"
    timed_topic(cgcluster, topic)
    timed_topic(cgcluster, other, partitions=1)
    commit(cgcluster, "g-del", {(topic, 0): 1, (topic, 1): 2, (other, 0): 3})
    out = replog(cgcluster, "--delete-offsets", "--group", "g-del", "--topic", f"{topic}:0")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"Request succeed for deleting offsets with topic {topic}:0 group g-del", "",
        f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}",
        f"{topic:<30} {'0':<15} {'Successful':<15}"]
    assert committed(cgcluster, "g-del", topic) == {0: -1001, 1: 2}  # librdkafka's INVALID
    # a topic that does not exist is a "Not Provided" row, the others are still deleted
    out = replog(cgcluster, "--delete-offsets", "--group", "g-del", "--topic", topic,
                 "--topic", "no-such-topic")
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[:2] == ["", "Error: Encounter some partition level error, see the follow-up "
                             "details:"]
    rows = [[line[:30].strip(), line[31:46].strip(), line[47:].strip()] for line in lines[4:]]
    assert rows == [[topic, "0", "Successful"], [topic, "1", "Successful"],
                    ["no-such-topic", "Not Provided",
                     "Error: :org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                     "This server does not host this topic-partition."]]
    assert committed(cgcluster, "g-del", topic) == {0: -1001, 1: -1001}
    assert committed(cgcluster, "g-del", other, 1) == {0: 3}
    # a member subscribed to the topic: GROUP_SUBSCRIBED_TO_TOPIC, nothing deleted
    c = ck_consumer(cgcluster, "g-del")
    c.subscribe([other])
    try:
        def assigned():
            c.poll(0.2)
            return len(c.assignment()) == 1
        wait_until(assigned, timeout=60, what="the member's assignment")
        out = replog(cgcluster, "--delete-offsets", "--group", "g-del", "--topic", other)
        assert out.returncode == 1
        assert out.stdout.splitlines()[1] == \
            "Error: Encounter some partition level error, see the follow-up details:"
        row = out.stdout.splitlines()[4]
        assert [row[:30].strip(), row[31:46].strip(), row[47:]] == [
            other, "0", "Error: :org.apache.kafka.common.errors.GroupSubscribedToTopicException:"
                        " Deleting offsets of a topic is forbidden while the consumer group is "
                        "actively subscribed to it."]
    finally:
        c.close()
    assert committed(cgcluster, "g-del", other, 1) == {0: 3}
    out = replog(cgcluster, "--delete-offsets", "--group", "g-del-none", "--topic", other)
    assert out.returncode == 1
    assert out.stdout.splitlines()[:2] == ["", "Error: 'g-del-none' does not exist."]
    out = replog(cgcluster, "--delete-offsets", "--group", "g-del")
    assert out.returncode == 1 and out.stderr.strip() == (
        "Error: Option [delete-offsets] takes the following options: [group], [topic]")


def test_describe_members_state_and_offsets(cgcluster):
    topic = "described"
    timed_topic(cgcluster, topic, partitions=3)
    c = ck_consumer(cgcluster, "g-desc", **{"client.id": "desc-client",
                                            "partition.assignment.strategy": "roundrobin"})
    c.subscribe([topic])
    try:
        def assigned():
            c.poll(0.2)
            return len(c.assignment()) == 3
        wait_until(assigned, timeout=60, what="the member's assignment")
        wait_until(lambda: "Stable" in replog(cgcluster, "--describe", "--group", "g-desc",
                                              "--state").stdout,
                   timeout=30, what="the group stable")
        out = replog(cgcluster, "--describe", "--group", "g-desc", "--members")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == "" and lines[1].split() == [
            "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        member = lines[2].split()
        assert (member[0], member[2], member[3], member[4]) == \
            ("g-desc", "/127.0.0.1", "desc-client", "3")
        assert member[1].startswith("desc-client-")
        assert lines[1].index("CONSUMER-ID") == 16  # Kafka's widths
        assert lines[1].index("HOST") == 17 + max(15, len(member[1]))
        out = replog(cgcluster, "--describe", "--group", "g-desc", "--members", "--verbose")
        lines = out.stdout.splitlines()
        assert lines[1].split()[-1] == "ASSIGNMENT"
        assert lines[2].split()[-1] == f"{topic}(0,1,2)"
        out = replog(cgcluster, "--describe", "--group", "g-desc", "--state")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == "" and lines[1].split() == [
            "GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        node = next(n for n, b in cgcluster.brokers.items()
                    if f"{b.kafka_address}  ({n})" in lines[2])
        assert lines[2].split() == ["g-desc", cgcluster.brokers[node].kafka_address,
                                    f"({node})", "roundrobin", "Stable", "1"]
        assert lines[1].index("COORDINATOR") == 26
        # --offsets is the default's explicit form
        default = replog(cgcluster, "--describe", "--group", "g-desc")
        offsets = replog(cgcluster, "--describe", "--group", "g-desc", "--offsets")
        assert offsets.returncode == 0 and offsets.stdout == default.stdout
        assert offsets.stdout.splitlines()[1].split()[:3] == ["GROUP", "TOPIC", "PARTITION"]
    finally:
        c.close()
    commit(cgcluster, "g-desc", {(topic, 0): 4})
    wait_until(lambda: "Empty" in replog(cgcluster, "--describe", "--group", "g-desc",
                                         "--state").stdout, timeout=30, what="the group empty")
    out = replog(cgcluster, "--describe", "--group", "g-desc", "--state")
    assert out.stdout.splitlines()[2].split()[-2:] == ["Empty", "0"]
    assert "Consumer group 'g-desc' has no active members." in out.stderr
    out = replog(cgcluster, "--describe", "--group", "g-desc", "--members")
    assert [line.split() for line in out.stdout.splitlines() if line.strip()] == [
        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]]
    for sub in ("--members", "--state", "--offsets"):
        out = replog(cgcluster, "--describe", "--group", "g-desc-none", sub)
        assert "Error: Consumer group 'g-desc-none' does not exist." in out.stdout
        assert out.returncode == 1  # a script sees that the group is not there


@pytest.mark.parametrize("args,message", [
    (["--describe", "--group", "g", "--members", "--state"],
     "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
    (["--describe", "--group", "g", "--state", "Stable"],
     "Option [describe] does not take a value for [state]"),
    (["--describe", "--members"], "Option [describe] takes one of these options: "
                                  "[all-groups], [group]"),
    (["--list", "--describe"], "Command must include exactly one action: --list, --describe, "
                               "--delete, --reset-offsets, --delete-offsets"),
    (["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--by-duration",
      "PT1H"], "Option [reset-offsets] takes exactly one of these options: [to-earliest], "
               "[to-latest], [to-current], [to-offset], [shift-by], [to-datetime], "
               "[by-duration], [from-file]"),
    (["--reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--dry-run",
      "--execute"], "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
    (["--reset-offsets", "--group", "g", "--to-latest"],
     "Option [reset-offsets] takes one of these options: [all-topics], [topic]"),
    (["--delete", "--group", "g", "--topic", "t"],
     "The consumer does not support topic-specific offset deletion from a consumer group."),
    (["--list", "--members"],
     "Option [members], [offsets] and [verbose] can only be used with [describe]"),
    (["--describe", "--group", "g", "--export"], "can only be used with [reset-offsets]"),
])
def test_bad_input_is_one_line(args, message):
    """Refused before anything is asked of a cluster (the address is never dialled)."""
    out = subprocess.run([sys.executable, "-m", "admin.cli", "consumer-groups",
                          "--bootstrap-server", "127.0.0.1:1", *args],
                         capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert out.returncode == 1 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and message in out.stderr


def test_describe_members_of_a_static_group(cgcluster):
    """A member with group.instance.id (KIP-345) adds Kafka's GROUP-INSTANCE-ID column."""
    topic = "static"
    timed_topic(cgcluster, topic, partitions=1, records=1)
    c = ck_consumer(cgcluster, "g-static", **{"group.instance.id": "instance-1",
                                              "client.id": "static-client"})
    c.subscribe([topic])
    try:
        def assigned():
            c.poll(0.2)
            return len(c.assignment()) == 1
        wait_until(assigned, timeout=60, what="the member's assignment")
        out = replog(cgcluster, "--describe", "--group", "g-static", "--members", "--verbose")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[1].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST",
                                    "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        row = lines[2].split()
        assert (row[0], row[2], row[3], row[4], row[5], row[6]) == \
            ("g-static", "instance-1", "/127.0.0.1", "static-client", "1", f"{topic}(0)")
        assert row[1].startswith("instance-1-")  # the member id is the instance id's
    finally:
        c.close()

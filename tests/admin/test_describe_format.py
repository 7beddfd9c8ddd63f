"""`replog topics describe` prints Kafka's TopicCommand format, byte for byte."""

import pytest

from admin.topics_cmd import (
    describe_lines,
    format_partition_line,
    format_topic_line,
    parse_configs,
    parse_replica_assignment,
)
from client.metadata import PartitionInfo, TopicInfo
from common.errors import ReplogError


def _p(part, leader, replicas, isr, **kw):
    return PartitionInfo("orders", part, leader, 3, tuple(replicas), tuple(isr), **kw)


TOPIC = TopicInfo("orders", "x9KcGq8xRbmjCmaiC_6o6A", (
    _p(0, 1, [1, 2, 3], [1, 2, 3]),
    _p(1, 2, [2, 3, 1], [2, 3]),
    _p(2, -1, [3, 1, 2], [], elr=(3,), last_known_elr=(1,)),
), {"min.insync.replicas": "2", "retention.ms": "1000"})


def test_topic_line():
    assert format_topic_line(TOPIC) == (
        "Topic: orders\tTopicId: x9KcGq8xRbmjCmaiC_6o6A\tPartitionCount: 3\t"
        "ReplicationFactor: 3\tConfigs: min.insync.replicas=2,retention.ms=1000")


def test_topic_line_without_configs_or_id():
    t = TopicInfo("t", "", (_p(0, 1, [1], [1]),), {})
    assert format_topic_line(t) == "Topic: t\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: "


def test_partition_lines():
    assert format_partition_line(TOPIC.partitions[0]) == (
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tElr: "
        "\tLastKnownElr: ")
    assert format_partition_line(TOPIC.partitions[2]) == (
        "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: \tElr: 3"
        "\tLastKnownElr: 1")


def test_reassignment_columns_and_replication_factor():
    moving = PartitionInfo("m", 0, 1, 5, (1, 2, 3, 4), (1, 2, 3), adding_replicas=(4,),
                           removing_replicas=(3,))
    assert format_partition_line(moving) == (
        "\tTopic: m\tPartition: 0\tLeader: 1\tReplicas: 1,2,3,4\tIsr: 1,2,3"
        "\tAdding Replicas: 4\tRemoving Replicas: 3\tElr: \tLastKnownElr: ")
    # Kafka: RS minus the adding replicas while a move is in progress.
    assert "ReplicationFactor: 3" in format_topic_line(TopicInfo("m", "id", (moving,), {}))


def test_full_describe_output():
    lines = describe_lines([TOPIC], {1, 2, 3})
    assert len(lines) == 4 and lines[0].startswith("Topic: orders\t")
    assert [ln.split("\t")[2] for ln in lines[1:]] == ["Partition: 0", "Partition: 1",
                                                        "Partition: 2"]


def test_filters_print_only_matching_partitions_and_no_topic_line():
    def part(lines):
        return [ln.split("\t")[2] for ln in lines]

    assert part(describe_lines([TOPIC], {1, 2, 3}, under_replicated=True)) == \
        ["Partition: 1", "Partition: 2"]
    assert part(describe_lines([TOPIC], {1, 2, 3}, unavailable=True)) == ["Partition: 2"]
    # Leader 2 is not a live broker: unavailable too.
    assert part(describe_lines([TOPIC], {1, 3}, unavailable=True)) == \
        ["Partition: 1", "Partition: 2"]
    assert part(describe_lines([TOPIC], {1, 2, 3}, under_min_isr=True)) == ["Partition: 2"]
    assert part(describe_lines([TOPIC], {1, 2, 3}, at_min_isr=True)) == ["Partition: 1"]
    # KIP-966: only the partition with an ELR or LastKnownELR.
    assert part(describe_lines([TOPIC], {1, 2, 3}, eligible_leader_replicas=True)) == \
        ["Partition: 2"]


def test_replica_assignment_parsing():
    assert parse_replica_assignment("1:2:3,2:3:1") == {0: [1, 2, 3], 1: [2, 3, 1]}
    with pytest.raises(ReplogError, match="duplicate entries: 2"):
        parse_replica_assignment("1:2:2")
    with pytest.raises(ReplogError, match="Partition 1 has different replication factor"):
        parse_replica_assignment("1:2,3")
    with pytest.raises(ReplogError, match="broker ids must be integers"):
        parse_replica_assignment("1:a")


def test_config_parsing():
    assert parse_configs(["min.insync.replicas=2", " retention.ms = 5 "]) == \
        {"min.insync.replicas": "2", "retention.ms": "5"}
    with pytest.raises(ReplogError, match='format "key=val"'):
        parse_configs(["novalue"])


def test_eligible_leader_replicas_option():
    from admin.cli import build_parser
    args = build_parser().parse_args(["topics", "describe", "--bootstrap-server", "h:1",
                                      "--eligible-leader-replicas"])
    assert args.eligible_leader_replicas
    with pytest.raises(SystemExit):  # one partition filter at a time, as Kafka's
        build_parser().parse_args(["topics", "describe", "--bootstrap-server", "h:1",
                                   "--eligible-leader-replicas", "--unavailable-partitions"])

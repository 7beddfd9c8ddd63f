"""Kafka admin APIs a broker forwards to replog's controller over gRPC (as a KRaft broker
forwards them to its controller, KIP-590): CreateTopics, DeleteTopics,
DescribeCluster, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments.
Described from Kafka's message JSON files (see messages.py).

The served ranges are what the clients ask for: librdkafka 2.16 (confluent-kafka) CreateTopics
0-4, DeleteTopics 0-4, ElectLeaders 0-2; aiokafka 0.14 CreateTopics and DeleteTopics 0-3;
kafka-python 3.0.12 CreateTopics 0-7, DeleteTopics 0-6 (by topic id, KIP-516), DescribeCluster
0-2, ElectLeaders 0-2, AlterPartitionReassignments 0-1 (KIP-860's
AllowReplicationFactorChange) and ListPartitionReassignments 0. DescribeCluster v2
(IncludeFencedBrokers, KIP-1073) and AlterPartitionReassignments v1 come from Kafka 4's JSON
files, as kafka-python bundles them.
"""

from __future__ import annotations

from common.kafka_protocol.api import Api, make_api
from common.kafka_protocol.schema import array, f, struct


class AdminApiKey:
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_CLUSTER = 60


# ------------------------------------------------------------------------------ CreateTopics

CREATE_TOPICS_REQUEST = struct(
    f("topics", array(struct(
        f("name", "string"),
        f("num_partitions", "int32"),
        f("replication_factor", "int16"),
        f("assignments", array(struct(
            f("partition_index", "int32"),
            f("broker_ids", array("int32"))))),
        f("configs", array(struct(
            f("name", "string"),
            f("value", "string", nullable="0+"))))))),
    f("timeout_ms", "int32", default=60000),
    f("validate_only", "bool", "1+", default=False),
)
CREATE_TOPICS_RESPONSE = struct(
    f("throttle_time_ms", "int32", "2+"),
    f("topics", array(struct(
        f("name", "string"),
        f("topic_id", "uuid", "7+"),
        f("error_code", "int16"),
        f("error_message", "string", "1+", nullable="0+", default=None),
        f("topic_config_error_code", "int16", "5+", tag=0),
        f("num_partitions", "int32", "5+", default=-1),
        f("replication_factor", "int16", "5+", default=-1),
        f("configs", array(struct(
            f("name", "string", "5+"),
            f("value", "string", "5+", nullable="5+"),
            f("read_only", "bool", "5+"),
            f("config_source", "int8", "5+", default=-1),
            f("is_sensitive", "bool", "5+"))), "5+", nullable="5+")))),
)

# ------------------------------------------------------------------------------ DeleteTopics

DELETE_TOPICS_REQUEST = struct(
    f("topics", array(struct(
        f("name", "string", "6+", nullable="6+", default=None),
        f("topic_id", "uuid", "6+"))), "6+"),
    f("topic_names", array("string"), "0-5"),
    f("timeout_ms", "int32"),
)
DELETE_TOPICS_RESPONSE = struct(
    f("throttle_time_ms", "int32", "1+"),
    f("responses", array(struct(
        f("name", "string", nullable="6+"),
        f("topic_id", "uuid", "6+"),
        f("error_code", "int16"),
        f("error_message", "string", "5+", nullable="5+", default=None)))),
)

# ------------------------------------------------------------------------------ DescribeCluster

DESCRIBE_CLUSTER_REQUEST = struct(
    f("include_cluster_authorized_operations", "bool"),
    f("endpoint_type", "int8", "1+", default=1),
    f("include_fenced_brokers", "bool", "2+"),
)
DESCRIBE_CLUSTER_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("error_message", "string", nullable="0+", default=None),
    f("endpoint_type", "int8", "1+", default=1),
    f("cluster_id", "string"),
    f("controller_id", "int32", default=-1),
    f("brokers", array(struct(
        f("broker_id", "int32"),
        f("host", "string"),
        f("port", "int32"),
        f("rack", "string", nullable="0+", default=None),
        f("is_fenced", "bool", "2+")))),
    f("cluster_authorized_operations", "int32", default=-(2 ** 31)),
)

# ------------------------------------------------------------------------------ ElectLeaders

ELECT_LEADERS_REQUEST = struct(
    f("election_type", "int8", "1+"),
    f("topic_partitions", array(struct(
        f("topic", "string"),
        f("partitions", array("int32")))), nullable="0+"),
    f("timeout_ms", "int32", default=60000),
)
ELECT_LEADERS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("error_code", "int16", "1+"),
    f("replica_election_results", array(struct(
        f("topic", "string"),
        f("partition_result", array(struct(
            f("partition_id", "int32"),
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None))))))),
)

# ------------------------------------------------------------------------------ reassignments

ALTER_PARTITION_REASSIGNMENTS_REQUEST = struct(
    f("timeout_ms", "int32", default=60000),
    f("allow_replication_factor_change", "bool", "1+", default=True),
    f("topics", array(struct(
        f("name", "string"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("replicas", array("int32"), nullable="0+", default=None))))))),
)
ALTER_PARTITION_REASSIGNMENTS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("allow_replication_factor_change", "bool", "1+", default=True),
    f("error_code", "int16"),
    f("error_message", "string", nullable="0+", default=None),
    f("responses", array(struct(
        f("name", "string"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None))))))),
)

LIST_PARTITION_REASSIGNMENTS_REQUEST = struct(
    f("timeout_ms", "int32", default=60000),
    f("topics", array(struct(
        f("name", "string"),
        f("partition_indexes", array("int32")))), nullable="0+", default=None),
)
LIST_PARTITION_REASSIGNMENTS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("error_message", "string", nullable="0+", default=None),
    f("topics", array(struct(
        f("name", "string"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("replicas", array("int32")),
            f("adding_replicas", array("int32")),
            f("removing_replicas", array("int32")))))))),
)


APIS: list[Api] = [
    make_api(AdminApiKey.CREATE_TOPICS, "CreateTopics", "0-7", "5+", CREATE_TOPICS_REQUEST,
             CREATE_TOPICS_RESPONSE),
    make_api(AdminApiKey.DELETE_TOPICS, "DeleteTopics", "0-6", "4+", DELETE_TOPICS_REQUEST,
             DELETE_TOPICS_RESPONSE),
    make_api(AdminApiKey.ELECT_LEADERS, "ElectLeaders", "0-2", "2+", ELECT_LEADERS_REQUEST,
             ELECT_LEADERS_RESPONSE),
    make_api(AdminApiKey.ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", "0-1",
             "0+", ALTER_PARTITION_REASSIGNMENTS_REQUEST, ALTER_PARTITION_REASSIGNMENTS_RESPONSE),
    make_api(AdminApiKey.LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", "0", "0+",
             LIST_PARTITION_REASSIGNMENTS_REQUEST, LIST_PARTITION_REASSIGNMENTS_RESPONSE),
    make_api(AdminApiKey.DESCRIBE_CLUSTER, "DescribeCluster", "0-2", "0+",
             DESCRIBE_CLUSTER_REQUEST, DESCRIBE_CLUSTER_RESPONSE),
]

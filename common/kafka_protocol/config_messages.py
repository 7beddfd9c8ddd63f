"""Kafka APIs a broker answers itself: DescribeConfigs, IncrementalAlterConfigs, AlterConfigs,
DescribeLogDirs, AlterReplicaLogDirs. Described from Kafka's message JSON files (see
messages.py); each is served over its whole Kafka range, which covers what librdkafka
(confluent-kafka), kafka-python and aiokafka ask for."""

from __future__ import annotations

from common.kafka_protocol.api import Api, make_api
from common.kafka_protocol.schema import array, f, struct


class ConfigApiKey:
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33  # the legacy whole-resource replace, which older clients still send
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    INCREMENTAL_ALTER_CONFIGS = 44


# ------------------------------------------------------------------------------ DescribeConfigs

DESCRIBE_CONFIGS_REQUEST = struct(
    f("resources", array(struct(
        f("resource_type", "int8"),
        f("resource_name", "string"),
        f("configuration_keys", array("string"), nullable="0+", default=None)))),
    f("include_synonyms", "bool", "1+"),
    f("include_documentation", "bool", "3+"),
)
DESCRIBE_CONFIGS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("results", array(struct(
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("resource_type", "int8"),
        f("resource_name", "string"),
        f("configs", array(struct(
            f("name", "string"),
            f("value", "string", nullable="0+", default=None),
            f("read_only", "bool"),
            f("is_default", "bool", "0"),
            f("config_source", "int8", "1+", default=-1),
            f("is_sensitive", "bool"),
            f("synonyms", array(struct(
                f("name", "string", "1+"),
                f("value", "string", "1+", nullable="0+", default=None),
                f("source", "int8", "1+"))), "1+"),
            f("config_type", "int8", "3+"),
            f("documentation", "string", "3+", nullable="0+", default=None))))))),
)

# ------------------------------------------------------------------------------ IncrementalAlterConfigs  # noqa: E501

INCREMENTAL_ALTER_CONFIGS_REQUEST = struct(
    f("resources", array(struct(
        f("resource_type", "int8"),
        f("resource_name", "string"),
        f("configs", array(struct(
            f("name", "string"),
            f("config_operation", "int8"),
            f("value", "string", nullable="0+", default=None))))))),
    f("validate_only", "bool"),
)
INCREMENTAL_ALTER_CONFIGS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("responses", array(struct(
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("resource_type", "int8"),
        f("resource_name", "string")))),
)

# ------------------------------------------------------------------------------ DescribeLogDirs

DESCRIBE_LOG_DIRS_REQUEST = struct(
    f("topics", array(struct(
        f("topic", "string"),
        f("partitions", array("int32")))), nullable="0+", default=None),
)
DESCRIBE_LOG_DIRS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("error_code", "int16", "3+"),
    f("results", array(struct(
        f("error_code", "int16"),
        f("log_dir", "string"),
        f("topics", array(struct(
            f("name", "string"),
            f("partitions", array(struct(
                f("partition_index", "int32"),
                f("partition_size", "int64"),
                f("offset_lag", "int64"),
                f("is_future_key", "bool"))))))),
        f("total_bytes", "int64", "4+", default=-1),
        f("usable_bytes", "int64", "4+", default=-1)))),
)

# ------------------------------------------------------------------------------ AlterReplicaLogDirs

ALTER_REPLICA_LOG_DIRS_REQUEST = struct(
    f("dirs", array(struct(
        f("path", "string"),
        f("topics", array(struct(
            f("name", "string"),
            f("partitions", array("int32")))))))),
)
ALTER_REPLICA_LOG_DIRS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("results", array(struct(
        f("topic_name", "string"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("error_code", "int16"))))))),
)

# ------------------------------------------------------------------------------ AlterConfigs

ALTER_CONFIGS_REQUEST = struct(
    f("resources", array(struct(
        f("resource_type", "int8"),
        f("resource_name", "string"),
        f("configs", array(struct(
            f("name", "string"),
            f("value", "string", nullable="0+", default=None))))))),
    f("validate_only", "bool"),
)
# AlterConfigsResponse.json has IncrementalAlterConfigsResponse.json's fields, field for field
ALTER_CONFIGS_RESPONSE = INCREMENTAL_ALTER_CONFIGS_RESPONSE


APIS: list[Api] = [
    # aiokafka asks for v0-v2, kafka-python up to v4; v0 is Kafka's deprecated but served one.
    make_api(ConfigApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", "0-4", "4+",
             DESCRIBE_CONFIGS_REQUEST, DESCRIBE_CONFIGS_RESPONSE),
    make_api(ConfigApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", "0-1", "1+",
             INCREMENTAL_ALTER_CONFIGS_REQUEST, INCREMENTAL_ALTER_CONFIGS_RESPONSE),
    make_api(ConfigApiKey.ALTER_CONFIGS, "AlterConfigs", "0-2", "2+", ALTER_CONFIGS_REQUEST,
             ALTER_CONFIGS_RESPONSE),
    # kafka-python 3 knows DescribeLogDirs v5 (KIP-1066's IsCordoned, newer than the Kafka
    # these files were read from) and steps down to v4.
    make_api(ConfigApiKey.DESCRIBE_LOG_DIRS, "DescribeLogDirs", "0-4", "2+",
             DESCRIBE_LOG_DIRS_REQUEST, DESCRIBE_LOG_DIRS_RESPONSE),
    make_api(ConfigApiKey.ALTER_REPLICA_LOG_DIRS, "AlterReplicaLogDirs", "0-2", "2+",
             ALTER_REPLICA_LOG_DIRS_REQUEST, ALTER_REPLICA_LOG_DIRS_RESPONSE),
]

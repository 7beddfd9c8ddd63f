"""The Kafka messages replog's Kafka listener serves, described from Kafka's message JSON files
(apache/kafka clients/src/main/resources/common/message/<Name>{Request,Response}.json).

Each field is written as in its JSON file (snake_case names; versions, nullableVersions, tag,
default). Fields of versions above the ones replog serves are kept, so that raising a range is
a change of ``served`` only. ``served`` is what the ApiVersions answer lists:
- Produce from v3 and Fetch from v4: older versions carry message format v0/v1 record sets,
  which Kafka converts and replog does not store (it keeps v2 batches only);
- Fetch up to v12: v13 names topics by id (KIP-516), left for a later phase;
- Produce up to v9: v10 adds KIP-951's leader hints, left for a later phase.
"""

from __future__ import annotations

from common.kafka_protocol import (
    acl_messages,
    admin_messages,
    config_messages,
    partition_messages,
    records_messages,
    unserved_messages,
)
from common.kafka_protocol.api import Api
from common.kafka_protocol.api import make_api as _api
from common.kafka_protocol.schema import array, f, struct


class ApiKey:
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_FOR_LEADER_EPOCH = 23
    API_VERSIONS = 18


# ------------------------------------------------------------------------------ ApiVersions

API_VERSIONS_REQUEST = struct(
    f("client_software_name", "string", "3+"),
    f("client_software_version", "string", "3+"),
)
API_VERSIONS_RESPONSE = struct(
    f("error_code", "int16"),
    f("api_keys", array(struct(
        f("api_key", "int16"), f("min_version", "int16"), f("max_version", "int16")))),
    f("throttle_time_ms", "int32", "1+"),
    f("supported_features", array(struct(
        f("name", "string", "3+"), f("min_version", "int16", "3+"),
        f("max_version", "int16", "3+"))), "3+", tag=0),
    f("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    f("finalized_features", array(struct(
        f("name", "string", "3+"), f("max_version_level", "int16", "3+"),
        f("min_version_level", "int16", "3+"))), "3+", tag=2),
    f("zk_migration_ready", "bool", "3+", tag=3, default=False),
)

# ------------------------------------------------------------------------------ Metadata

METADATA_REQUEST = struct(
    f("topics", array(struct(
        f("topic_id", "uuid", "10+"),
        f("name", "string", nullable="10+"))), nullable="1+"),
    f("allow_auto_topic_creation", "bool", "4+", default=True),
    f("include_cluster_authorized_operations", "bool", "8-10"),
    f("include_topic_authorized_operations", "bool", "8+"),
)
METADATA_RESPONSE = struct(
    f("throttle_time_ms", "int32", "3+"),
    f("brokers", array(struct(
        f("node_id", "int32"), f("host", "string"), f("port", "int32"),
        f("rack", "string", "1+", nullable="1+", default=None)))),
    f("cluster_id", "string", "2+", nullable="2+", default=None),
    f("controller_id", "int32", "1+", default=-1),
    f("topics", array(struct(
        f("error_code", "int16"),
        f("name", "string", nullable="12+"),
        f("topic_id", "uuid", "10+"),
        f("is_internal", "bool", "1+"),
        f("partitions", array(struct(
            f("error_code", "int16"),
            f("partition_index", "int32"),
            f("leader_id", "int32"),
            f("leader_epoch", "int32", "7+", default=-1),
            f("replica_nodes", array("int32")),
            f("isr_nodes", array("int32")),
            f("offline_replicas", array("int32"), "5+")))),
        f("topic_authorized_operations", "int32", "8+", default=-(2 ** 31))))),
    f("cluster_authorized_operations", "int32", "8-10", default=-(2 ** 31)),
)

# ------------------------------------------------------------------------------ Produce

PRODUCE_REQUEST = struct(
    f("transactional_id", "string", "3+", nullable="3+", default=None),
    f("acks", "int16"),
    f("timeout_ms", "int32"),
    f("topic_data", array(struct(
        f("name", "string"),
        f("partition_data", array(struct(
            f("index", "int32"),
            f("records", "records", nullable="0+"))))))),
)
_LEADER_ID_AND_EPOCH = struct(f("leader_id", "int32", default=-1),
                              f("leader_epoch", "int32", default=-1))
_NODE_ENDPOINT = struct(f("node_id", "int32"), f("host", "string"), f("port", "int32"),
                        f("rack", "string", nullable="0+", default=None))
PRODUCE_RESPONSE = struct(
    f("responses", array(struct(
        f("name", "string"),
        f("partition_responses", array(struct(
            f("index", "int32"),
            f("error_code", "int16"),
            f("base_offset", "int64"),
            f("log_append_time_ms", "int64", "2+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f("record_errors", array(struct(
                f("batch_index", "int32", "8+"),
                f("batch_index_error_message", "string", "8+", nullable="8+",
                  default=None))), "8+"),
            f("error_message", "string", "8+", nullable="8+", default=None),
            f("current_leader", _LEADER_ID_AND_EPOCH, "10+", tag=0))))))),
    f("throttle_time_ms", "int32", "1+"),
    f("node_endpoints", array(_NODE_ENDPOINT), "10+", tag=0),
)

# ------------------------------------------------------------------------------ Fetch

FETCH_REQUEST = struct(
    f("cluster_id", "string", "12+", nullable="12+", tag=0, default=None),
    f("replica_id", "int32", "0-14", default=-1),
    f("replica_state", struct(f("replica_id", "int32", "15+", default=-1),
                              f("replica_epoch", "int64", "15+", default=-1)), "15+", tag=1),
    f("max_wait_ms", "int32"),
    f("min_bytes", "int32"),
    f("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    f("isolation_level", "int8", "4+"),
    f("session_id", "int32", "7+"),
    f("session_epoch", "int32", "7+", default=-1),
    f("topics", array(struct(
        f("topic", "string", "0-12"),
        f("topic_id", "uuid", "13+"),
        f("partitions", array(struct(
            f("partition", "int32"),
            f("current_leader_epoch", "int32", "9+", default=-1),
            f("fetch_offset", "int64"),
            f("last_fetched_epoch", "int32", "12+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f("partition_max_bytes", "int32"),
            f("replica_directory_id", "uuid", "17+", tag=0))))))),
    f("forgotten_topics_data", array(struct(
        f("topic", "string", "7-12"),
        f("topic_id", "uuid", "13+"),
        f("partitions", array("int32"), "7+"))), "7+"),
    f("rack_id", "string", "11+"),
)
FETCH_RESPONSE = struct(
    f("throttle_time_ms", "int32", "1+"),
    f("error_code", "int16", "7+"),
    f("session_id", "int32", "7+"),
    f("responses", array(struct(
        f("topic", "string", "0-12"),
        f("topic_id", "uuid", "13+"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("error_code", "int16"),
            f("high_watermark", "int64"),
            f("last_stable_offset", "int64", "4+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f("diverging_epoch", struct(f("epoch", "int32", "12+", default=-1),
                                        f("end_offset", "int64", "12+", default=-1)),
              "12+", tag=0),
            f("current_leader", _LEADER_ID_AND_EPOCH, "12+", tag=1),
            f("snapshot_id", struct(f("end_offset", "int64", default=-1),
                                    f("epoch", "int32", default=-1)), "12+", tag=2),
            f("aborted_transactions", array(struct(
                f("producer_id", "int64", "4+"), f("first_offset", "int64", "4+"))),
              "4+", nullable="4+"),
            f("preferred_read_replica", "int32", "11+", default=-1),
            f("records", "records", nullable="0+"))))))),
    f("node_endpoints", array(_NODE_ENDPOINT), "16+", tag=0),
)

# ------------------------------------------------------------------------------ ListOffsets

LIST_OFFSETS_REQUEST = struct(
    f("replica_id", "int32"),
    f("isolation_level", "int8", "2+"),
    f("topics", array(struct(
        f("name", "string"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("current_leader_epoch", "int32", "4+", default=-1),
            f("timestamp", "int64"),
            f("max_num_offsets", "int32", "0", default=1))))))),
    f("timeout_ms", "int32", "10+"),
)
LIST_OFFSETS_RESPONSE = struct(
    f("throttle_time_ms", "int32", "2+"),
    f("topics", array(struct(
        f("name", "string"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("error_code", "int16"),
            f("old_style_offsets", array("int64"), "0"),
            f("timestamp", "int64", "1+", default=-1),
            f("offset", "int64", "1+", default=-1),
            f("leader_epoch", "int32", "4+", default=-1))))))),
)

# ------------------------------------------------------------------------------ OffsetForLeaderEpoch  # noqa: E501

OFFSET_FOR_LEADER_EPOCH_REQUEST = struct(
    f("replica_id", "int32", "3+", default=-2),
    f("topics", array(struct(
        f("topic", "string"),
        f("partitions", array(struct(
            f("partition", "int32"),
            f("current_leader_epoch", "int32", "2+", default=-1),
            f("leader_epoch", "int32"))))))),
)
OFFSET_FOR_LEADER_EPOCH_RESPONSE = struct(
    f("throttle_time_ms", "int32", "2+"),
    f("topics", array(struct(
        f("topic", "string"),
        f("partitions", array(struct(
            f("error_code", "int16"),
            f("partition", "int32"),
            f("leader_epoch", "int32", "1+", default=-1),
            f("end_offset", "int64", default=-1))))))),
)


APIS: dict[int, Api] = {a.key: a for a in [
    _api(ApiKey.PRODUCE, "Produce", "3-9", "9+", PRODUCE_REQUEST, PRODUCE_RESPONSE),
    _api(ApiKey.FETCH, "Fetch", "4-12", "12+", FETCH_REQUEST, FETCH_RESPONSE),
    _api(ApiKey.LIST_OFFSETS, "ListOffsets", "0-7", "6+", LIST_OFFSETS_REQUEST,
         LIST_OFFSETS_RESPONSE),
    _api(ApiKey.METADATA, "Metadata", "0-12", "9+", METADATA_REQUEST, METADATA_RESPONSE),
    _api(ApiKey.API_VERSIONS, "ApiVersions", "0-4", "3+", API_VERSIONS_REQUEST,
         API_VERSIONS_RESPONSE),
    _api(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", "0-4", "4+",
         OFFSET_FOR_LEADER_EPOCH_REQUEST, OFFSET_FOR_LEADER_EPOCH_RESPONSE),
    # Forwarded to the controller: topics, elections, reassignments, DescribeCluster.
    *admin_messages.APIS,
    *partition_messages.APIS,
    # Served by this broker: configs and log dirs, ACLs (through its authorizer).
    *config_messages.APIS,
    *records_messages.APIS,  # DeleteRecords, on each partition's leader
    *acl_messages.APIS,
    # Features replog does not have, answered with a Kafka broker's error for them.
    *unserved_messages.APIS,
]}

"""Kafka APIs for features replog does not have (the group coordinator, transactions, SASL):
each is listed in ApiVersions and answered with the exact error a Kafka broker gives when the
feature is unavailable (broker/kafka_unserved.py), so clients fail clearly or fall back instead
of losing their connection. Described from Kafka's message JSON files (see messages.py); the
served ranges are the files' validVersions, so every client version can be answered.

InitProducerId (22) is deliberately absent: a broker that does not list it is what every client
recognises as "idempotence not supported" (librdkafka's fatal ``__UNSUPPORTED_FEATURE``,
kafka-python's and aiokafka's IncompatibleBrokerVersion), while any error code a listed
InitProducerId could carry either makes the producer retry forever (the coordinator errors) or
names a cause that is not true (the authorization errors).
"""

from __future__ import annotations

from common.kafka_protocol.api import Api, make_api
from common.kafka_protocol.schema import array, f, struct


class UnservedApiKey:
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    SASL_AUTHENTICATE = 36
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47


K = UnservedApiKey

# ------------------------------------------------------------------------------ FindCoordinator

FIND_COORDINATOR_REQUEST = struct(
    f("key", "string", "0-3"),
    f("key_type", "int8", "1+"),
    f("coordinator_keys", array("string"), "4+"),  # KIP-699: batched lookups
)
FIND_COORDINATOR_RESPONSE = struct(
    f("throttle_time_ms", "int32", "1+"),
    f("error_code", "int16", "0-3"),
    f("error_message", "string", "1-3", nullable="1-3", default=None),
    f("node_id", "int32", "0-3"),
    f("host", "string", "0-3"),
    f("port", "int32", "0-3"),
    f("coordinators", array(struct(
        f("key", "string", "4+"),
        f("node_id", "int32", "4+"),
        f("host", "string", "4+"),
        f("port", "int32", "4+"),
        f("error_code", "int16", "4+"),
        f("error_message", "string", "4+", nullable="4+", default=None))), "4+"),
)

# ------------------------------------------------------------------------------ group membership

JOIN_GROUP_REQUEST = struct(
    f("group_id", "string"),
    f("session_timeout_ms", "int32"),
    f("rebalance_timeout_ms", "int32", "1+", default=-1),
    f("member_id", "string"),
    f("group_instance_id", "string", "5+", nullable="5+", default=None),
    f("protocol_type", "string"),
    f("protocols", array(struct(f("name", "string"), f("metadata", "bytes")))),
    f("reason", "string", "8+", nullable="8+", default=None),
)
JOIN_GROUP_RESPONSE = struct(
    f("throttle_time_ms", "int32", "2+"),
    f("error_code", "int16"),
    f("generation_id", "int32", default=-1),
    f("protocol_type", "string", "7+", nullable="7+", default=None),
    f("protocol_name", "string", nullable="7+"),
    f("leader", "string"),
    f("skip_assignment", "bool", "9+"),
    f("member_id", "string"),
    f("members", array(struct(
        f("member_id", "string"),
        f("group_instance_id", "string", "5+", nullable="5+", default=None),
        f("metadata", "bytes")))),
)

HEARTBEAT_REQUEST = struct(
    f("group_id", "string"),
    f("generation_id", "int32"),
    f("member_id", "string"),
    f("group_instance_id", "string", "3+", nullable="3+", default=None),
)
HEARTBEAT_RESPONSE = struct(
    f("throttle_time_ms", "int32", "1+"),
    f("error_code", "int16"),
)

LEAVE_GROUP_REQUEST = struct(
    f("group_id", "string"),
    f("member_id", "string", "0-2"),
    f("members", array(struct(
        f("member_id", "string", "3+"),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
        f("reason", "string", "5+", nullable="5+", default=None))), "3+"),
)
LEAVE_GROUP_RESPONSE = struct(
    f("throttle_time_ms", "int32", "1+"),
    f("error_code", "int16"),
    f("members", array(struct(
        f("member_id", "string", "3+"),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
        f("error_code", "int16", "3+"))), "3+"),
)

SYNC_GROUP_REQUEST = struct(
    f("group_id", "string"),
    f("generation_id", "int32"),
    f("member_id", "string"),
    f("group_instance_id", "string", "3+", nullable="3+", default=None),
    f("protocol_type", "string", "5+", nullable="5+", default=None),
    f("protocol_name", "string", "5+", nullable="5+", default=None),
    f("assignments", array(struct(f("member_id", "string"), f("assignment", "bytes")))),
)
SYNC_GROUP_RESPONSE = struct(
    f("throttle_time_ms", "int32", "1+"),
    f("error_code", "int16"),
    f("protocol_type", "string", "5+", nullable="5+", default=None),
    f("protocol_name", "string", "5+", nullable="5+", default=None),
    f("assignment", "bytes"),
)

# ------------------------------------------------------------------------------ group admin

DESCRIBE_GROUPS_REQUEST = struct(
    f("groups", array("string")),
    f("include_authorized_operations", "bool", "3+"),
)
DESCRIBE_GROUPS_RESPONSE = struct(
    f("throttle_time_ms", "int32", "1+"),
    f("groups", array(struct(
        f("error_code", "int16"),
        f("group_id", "string"),
        f("group_state", "string"),
        f("protocol_type", "string"),
        f("protocol_data", "string"),
        f("members", array(struct(
            f("member_id", "string"),
            f("group_instance_id", "string", "4+", nullable="4+", default=None),
            f("client_id", "string"),
            f("client_host", "string"),
            f("member_metadata", "bytes"),
            f("member_assignment", "bytes")))),
        f("authorized_operations", "int32", "3+", default=-(2 ** 31))))),
)

LIST_GROUPS_REQUEST = struct(
    f("states_filter", array("string"), "4+"),
    f("types_filter", array("string"), "5+"),
)
LIST_GROUPS_RESPONSE = struct(
    f("throttle_time_ms", "int32", "1+"),
    f("error_code", "int16"),
    f("groups", array(struct(
        f("group_id", "string"),
        f("protocol_type", "string"),
        f("group_state", "string", "4+"),
        f("group_type", "string", "5+")))),
)

DELETE_GROUPS_REQUEST = struct(
    f("groups_names", array("string")),
)
DELETE_GROUPS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("results", array(struct(f("group_id", "string"), f("error_code", "int16")))),
)

# ------------------------------------------------------------------------------ committed offsets

OFFSET_COMMIT_REQUEST = struct(
    f("group_id", "string"),
    f("generation_id_or_member_epoch", "int32", "1+", default=-1),
    f("member_id", "string", "1+"),
    f("group_instance_id", "string", "7+", nullable="7+", default=None),
    f("retention_time_ms", "int64", "2-4", default=-1),
    f("topics", array(struct(
        f("name", "string"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("committed_offset", "int64"),
            f("committed_leader_epoch", "int32", "6+", default=-1),
            f("commit_timestamp", "int64", "1", default=-1),
            f("committed_metadata", "string", nullable="0+"))))))),
)
_PARTITION_ERRORS = struct(
    f("name", "string"),
    f("partitions", array(struct(f("partition_index", "int32"), f("error_code", "int16")))))
OFFSET_COMMIT_RESPONSE = struct(
    f("throttle_time_ms", "int32", "3+"),
    f("topics", array(_PARTITION_ERRORS)),
)

OFFSET_FETCH_REQUEST = struct(
    f("group_id", "string", "0-7"),
    f("topics", array(struct(
        f("name", "string", "0-7"),
        f("partition_indexes", array("int32"), "0-7"))), "0-7", nullable="2-7"),
    f("groups", array(struct(
        f("group_id", "string", "8+"),
        f("member_id", "string", "9+", nullable="9+", default=None),
        f("member_epoch", "int32", "9+", default=-1),
        f("topics", array(struct(
            f("name", "string", "8+"),
            f("partition_indexes", array("int32"), "8+"))), "8+", nullable="8+"))), "8+"),
    f("require_stable", "bool", "7+"),
)
OFFSET_FETCH_RESPONSE = struct(
    f("throttle_time_ms", "int32", "3+"),
    f("topics", array(struct(
        f("name", "string", "0-7"),
        f("partitions", array(struct(
            f("partition_index", "int32", "0-7"),
            f("committed_offset", "int64", "0-7"),
            f("committed_leader_epoch", "int32", "5-7", default=-1),
            f("metadata", "string", "0-7", nullable="0-7"),
            f("error_code", "int16", "0-7"))), "0-7"))), "0-7"),
    f("error_code", "int16", "2-7"),
    f("groups", array(struct(
        f("group_id", "string", "8+"),
        f("topics", array(struct(
            f("name", "string", "8+"),
            f("partitions", array(struct(
                f("partition_index", "int32", "8+"),
                f("committed_offset", "int64", "8+"),
                f("committed_leader_epoch", "int32", "8+", default=-1),
                f("metadata", "string", "8+", nullable="8+"),
                f("error_code", "int16", "8+"))), "8+"))), "8+"),
        f("error_code", "int16", "8+"))), "8+"),
)

OFFSET_DELETE_REQUEST = struct(
    f("group_id", "string"),
    f("topics", array(struct(
        f("name", "string"),
        f("partitions", array(struct(f("partition_index", "int32"))))))),
)
OFFSET_DELETE_RESPONSE = struct(
    f("error_code", "int16"),
    f("throttle_time_ms", "int32"),
    f("topics", array(_PARTITION_ERRORS)),
)

# ------------------------------------------------------------------------------ transactions

_TXN_TOPIC = struct(f("name", "string"), f("partitions", array("int32")))
_TXN_TOPIC_RESULT = struct(
    f("name", "string"),
    f("results_by_partition", array(struct(
        f("partition_index", "int32"), f("partition_error_code", "int16")))))
ADD_PARTITIONS_TO_TXN_REQUEST = struct(
    # KIP-890: v4+ batches transactions (sent by brokers); v3 and below are the clients'.
    f("transactions", array(struct(
        f("transactional_id", "string", "4+"),
        f("producer_id", "int64", "4+"),
        f("producer_epoch", "int16", "4+"),
        f("verify_only", "bool", "4+"),
        f("topics", array(_TXN_TOPIC), "4+"))), "4+"),
    f("v3_and_below_transactional_id", "string", "0-3"),
    f("v3_and_below_producer_id", "int64", "0-3"),
    f("v3_and_below_producer_epoch", "int16", "0-3"),
    f("v3_and_below_topics", array(_TXN_TOPIC), "0-3"),
)
ADD_PARTITIONS_TO_TXN_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("error_code", "int16", "4+"),
    f("results_by_transaction", array(struct(
        f("transactional_id", "string", "4+"),
        f("topic_results", array(_TXN_TOPIC_RESULT), "4+"))), "4+"),
    f("results_by_topic_v3_and_below", array(_TXN_TOPIC_RESULT), "0-3"),
)

ADD_OFFSETS_TO_TXN_REQUEST = struct(
    f("transactional_id", "string"),
    f("producer_id", "int64"),
    f("producer_epoch", "int16"),
    f("group_id", "string"),
)
ADD_OFFSETS_TO_TXN_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
)

END_TXN_REQUEST = struct(
    f("transactional_id", "string"),
    f("producer_id", "int64"),
    f("producer_epoch", "int16"),
    f("committed", "bool"),
)
END_TXN_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("producer_id", "int64", "5+", default=-1),
    f("producer_epoch", "int16", "5+", default=-1),
)

TXN_OFFSET_COMMIT_REQUEST = struct(
    f("transactional_id", "string"),
    f("group_id", "string"),
    f("producer_id", "int64"),
    f("producer_epoch", "int16"),
    f("generation_id", "int32", "3+", default=-1),
    f("member_id", "string", "3+"),
    f("group_instance_id", "string", "3+", nullable="3+", default=None),
    f("topics", array(struct(
        f("name", "string"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("committed_offset", "int64"),
            f("committed_leader_epoch", "int32", "2+", default=-1),
            f("committed_metadata", "string", nullable="0+"))))))),
)
TXN_OFFSET_COMMIT_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("topics", array(_PARTITION_ERRORS)),
)

# ------------------------------------------------------------------------------ SASL

SASL_HANDSHAKE_REQUEST = struct(f("mechanism", "string"))
SASL_HANDSHAKE_RESPONSE = struct(f("error_code", "int16"), f("mechanisms", array("string")))

SASL_AUTHENTICATE_REQUEST = struct(f("auth_bytes", "bytes"))
SASL_AUTHENTICATE_RESPONSE = struct(
    f("error_code", "int16"),
    f("error_message", "string", nullable="0+", default=None),
    f("auth_bytes", "bytes"),
    f("session_lifetime_ms", "int64", "1+"),
)


APIS: list[Api] = [
    make_api(K.OFFSET_COMMIT, "OffsetCommit", "0-9", "8+", OFFSET_COMMIT_REQUEST,
             OFFSET_COMMIT_RESPONSE),
    make_api(K.OFFSET_FETCH, "OffsetFetch", "0-9", "6+", OFFSET_FETCH_REQUEST,
             OFFSET_FETCH_RESPONSE),
    make_api(K.FIND_COORDINATOR, "FindCoordinator", "0-6", "3+", FIND_COORDINATOR_REQUEST,
             FIND_COORDINATOR_RESPONSE),
    make_api(K.JOIN_GROUP, "JoinGroup", "0-9", "6+", JOIN_GROUP_REQUEST, JOIN_GROUP_RESPONSE),
    make_api(K.HEARTBEAT, "Heartbeat", "0-4", "4+", HEARTBEAT_REQUEST, HEARTBEAT_RESPONSE),
    make_api(K.LEAVE_GROUP, "LeaveGroup", "0-5", "4+", LEAVE_GROUP_REQUEST,
             LEAVE_GROUP_RESPONSE),
    make_api(K.SYNC_GROUP, "SyncGroup", "0-5", "4+", SYNC_GROUP_REQUEST, SYNC_GROUP_RESPONSE),
    make_api(K.DESCRIBE_GROUPS, "DescribeGroups", "0-5", "5+", DESCRIBE_GROUPS_REQUEST,
             DESCRIBE_GROUPS_RESPONSE),
    make_api(K.LIST_GROUPS, "ListGroups", "0-5", "3+", LIST_GROUPS_REQUEST,
             LIST_GROUPS_RESPONSE),
    make_api(K.SASL_HANDSHAKE, "SaslHandshake", "0-1", "none", SASL_HANDSHAKE_REQUEST,
             SASL_HANDSHAKE_RESPONSE),
    make_api(K.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", "0-5", "3+",
             ADD_PARTITIONS_TO_TXN_REQUEST, ADD_PARTITIONS_TO_TXN_RESPONSE),
    make_api(K.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", "0-4", "3+", ADD_OFFSETS_TO_TXN_REQUEST,
             ADD_OFFSETS_TO_TXN_RESPONSE),
    make_api(K.END_TXN, "EndTxn", "0-5", "3+", END_TXN_REQUEST, END_TXN_RESPONSE),
    make_api(K.TXN_OFFSET_COMMIT, "TxnOffsetCommit", "0-4", "3+", TXN_OFFSET_COMMIT_REQUEST,
             TXN_OFFSET_COMMIT_RESPONSE),
    make_api(K.SASL_AUTHENTICATE, "SaslAuthenticate", "0-2", "2+", SASL_AUTHENTICATE_REQUEST,
             SASL_AUTHENTICATE_RESPONSE),
    make_api(K.DELETE_GROUPS, "DeleteGroups", "0-2", "2+", DELETE_GROUPS_REQUEST,
             DELETE_GROUPS_RESPONSE),
    make_api(K.OFFSET_DELETE, "OffsetDelete", "0", "none", OFFSET_DELETE_REQUEST,
             OFFSET_DELETE_RESPONSE),
]

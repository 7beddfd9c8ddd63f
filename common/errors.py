"""Kafka's error codes and the exceptions replog raises for them.

Per-partition outcomes on the wire carry these numeric codes (org.apache.kafka.common.protocol.
Errors); whole-request failures use gRPC status codes. An exception that maps to a code has an
``error_code`` attribute so a servicer can translate it without knowing its type.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Kafka's numeric error codes (the subset replog uses; numbers as in Kafka's Errors)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14  # loading its __consumer_offsets partition
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16  # not the leader of the group's __consumer_offsets partition
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29  # the principal lacks the ACL the topic operation needs
    GROUP_AUTHORIZATION_FAILED = 30  # the principal lacks the group ACL the operation needs
    CLUSTER_AUTHORIZATION_FAILED = 31  # ... the cluster operation needs (ClusterAction, Alter)
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44  # DeleteRecords on a topic whose cleanup.policy has no delete
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45  # KIP-98: a sequence gap, or older than the last five
    INVALID_PRODUCER_EPOCH = 47  # KIP-98 (KIP-588's name): an older epoch of a producer id
    SECURITY_DISABLED = 54  # ACL requests to a broker without an authorizer
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    REASSIGNMENT_IN_PROGRESS = 60
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70  # KIP-227
    INVALID_FETCH_SESSION_EPOCH = 71  # KIP-227
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79  # KIP-394
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82  # KIP-345: replaced by a newer static member
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    INCONSISTENT_TOPIC_ID = 103
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108


class ReplogError(Exception):
    """Base of replog's own errors; ``error_code`` is the Kafka code a client sees."""

    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR


class RequestError(ReplogError):
    """A whole-request failure (a stale controller or broker epoch, an invalid request, no
    ZooKeeper connection): the Kafka code and message a caller sees, and the gRPC status it
    travels with (proto convention 1; None: the servicer maps the code to one)."""

    def __init__(self, error_code: ErrorCode, message: str, status: object = None):
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.status = status  # a grpc.StatusCode; common does not import grpc here


class CorruptRecordError(ReplogError, ValueError):
    """A record batch fails its structural or CRC checks (Kafka's CorruptRecordException)."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidTopicError(ReplogError, ValueError):
    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class OffsetOutOfRangeError(ReplogError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class ConfigError(ReplogError, ValueError):
    """A configuration key is unknown or its value is invalid; the message names the key."""

    error_code = ErrorCode.INVALID_CONFIG

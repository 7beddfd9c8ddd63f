"""The gRPC wire contract (proto/replog/v1/replog.proto), checked through the generated stubs.

These tests pin what other code and other processes rely on: every RPC of SPEC.md "Contracts"
-> "gRPC" on the right service with the right request/response types, the key fields of the
messages with their numbers and types (a renumbered or retyped field breaks the wire between
processes of different builds), Kafka's numeric error codes, and proto3 presence where a
default of 0 would silently change behaviour. A real grpc.aio round trip checks the generated
service glue.
"""

from __future__ import annotations

import importlib.util
import pathlib

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto" / "replog" / "v1" / "replog.proto"
GENERATED = ROOT / "common" / "rpc" / "replog_pb2.py"


def _ensure_stubs() -> None:
    """Regenerate the (gitignored) stubs when missing or older than the .proto file."""
    if GENERATED.exists() and GENERATED.stat().st_mtime >= PROTO.stat().st_mtime:
        return
    spec = importlib.util.spec_from_file_location("_gen_stubs", ROOT / "tools" / "gen_stubs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.main() == 0, "tools/gen_stubs.py failed"


_ensure_stubs()

from common.rpc import replog_pb2 as pb  # noqa: E402
from common.rpc import replog_pb2_grpc as pb_grpc  # noqa: E402

# ------------------------------------------------------------------------------------------
# Services
# ------------------------------------------------------------------------------------------

BROKER_RPCS = {
    "Produce": ("ProduceRequest", "ProduceResponse"),
    "ProduceStream": ("ProduceStreamRequest", "ProduceStreamResponse"),
    "Fetch": ("FetchRequest", "FetchResponse"),
    "FetchStream": ("FetchRequest", "FetchResponse"),
    "ListOffsets": ("ListOffsetsRequest", "ListOffsetsResponse"),
    "Metadata": ("MetadataRequest", "MetadataResponse"),
    "OffsetForLeaderEpoch": ("OffsetForLeaderEpochRequest", "OffsetForLeaderEpochResponse"),
    "GetReplicaLogInfo": ("GetReplicaLogInfoRequest", "GetReplicaLogInfoResponse"),
    "DescribeLogDirs": ("DescribeLogDirsRequest", "DescribeLogDirsResponse"),
    "AlterReplicaLogDirs": ("AlterReplicaLogDirsRequest", "AlterReplicaLogDirsResponse"),
    "DeleteRecords": ("DeleteRecordsRequest", "DeleteRecordsResponse"),
    "LeaderAndIsr": ("LeaderAndIsrRequest", "LeaderAndIsrResponse"),
    "StopReplica": ("StopReplicaRequest", "StopReplicaResponse"),
    "UpdateMetadata": ("UpdateMetadataRequest", "UpdateMetadataResponse"),
    "DescribeConfigs": ("DescribeConfigsRequest", "DescribeConfigsResponse"),
    "IncrementalAlterConfigs": ("IncrementalAlterConfigsRequest",
                                "IncrementalAlterConfigsResponse"),
    "CreateAcls": ("CreateAclsRequest", "CreateAclsResponse"),
    "DescribeAcls": ("DescribeAclsRequest", "DescribeAclsResponse"),
    "DeleteAcls": ("DeleteAclsRequest", "DeleteAclsResponse"),
}

CONTROLLER_RPCS = {
    "CreateTopics": ("CreateTopicsRequest", "CreateTopicsResponse"),
    "CreatePartitions": ("CreatePartitionsRequest", "CreatePartitionsResponse"),
    "DeleteTopics": ("DeleteTopicsRequest", "DeleteTopicsResponse"),
    "AlterPartition": ("AlterPartitionRequest", "AlterPartitionResponse"),
    "ControlledShutdown": ("ControlledShutdownRequest", "ControlledShutdownResponse"),
    "ElectLeaders": ("ElectLeadersRequest", "ElectLeadersResponse"),
    "AlterPartitionReassignments": (
        "AlterPartitionReassignmentsRequest", "AlterPartitionReassignmentsResponse"),
    "ListPartitionReassignments": (
        "ListPartitionReassignmentsRequest", "ListPartitionReassignmentsResponse"),
    "DescribeCluster": ("DescribeClusterRequest", "DescribeClusterResponse"),
}


def test_package_is_versioned():
    assert pb.DESCRIPTOR.package == "replog.v1"
    assert set(pb.DESCRIPTOR.services_by_name) == {"Broker", "Controller"}


STREAMING_RPCS = {"FetchStream", "ProduceStream"}


@pytest.mark.parametrize("service,rpcs", [("Broker", BROKER_RPCS), ("Controller", CONTROLLER_RPCS)])
def test_service_rpcs(service, rpcs):
    svc = pb.DESCRIPTOR.services_by_name[service]
    assert set(svc.methods_by_name) == set(rpcs), f"{service} RPC set changed"
    for name, (req, resp) in rpcs.items():
        method = svc.methods_by_name[name]
        assert method.input_type.full_name == f"replog.v1.{req}", name
        assert method.output_type.full_name == f"replog.v1.{resp}", name
        # Every RPC is unary (Fetch long-polls inside one call) but the follower's fetch
        # stream and the producer's produce stream, which carry Fetch's and Produce's
        # messages both ways.
        streams = name in STREAMING_RPCS
        assert (method.client_streaming, method.server_streaming) == (streams, streams), name


@pytest.mark.parametrize("service,rpcs", [("Broker", BROKER_RPCS), ("Controller", CONTROLLER_RPCS)])
def test_generated_grpc_glue(service, rpcs):
    stub_cls = getattr(pb_grpc, f"{service}Stub")
    servicer_cls = getattr(pb_grpc, f"{service}Servicer")
    stub = stub_cls(grpc.insecure_channel("localhost:1"))
    for name in rpcs:
        assert callable(getattr(stub, name)), name
        assert callable(getattr(servicer_cls, name)), name
    assert callable(getattr(pb_grpc, f"add_{service}Servicer_to_server"))


# ------------------------------------------------------------------------------------------
# Error codes: Kafka's numbers (org.apache.kafka.common.protocol.Errors)
# ------------------------------------------------------------------------------------------

KAFKA_ERRORS = {
    "UNKNOWN_SERVER_ERROR": -1,
    "NONE": 0,
    "OFFSET_OUT_OF_RANGE": 1,
    "CORRUPT_MESSAGE": 2,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "LEADER_NOT_AVAILABLE": 5,
    "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "BROKER_NOT_AVAILABLE": 8,
    "REPLICA_NOT_AVAILABLE": 9,
    "MESSAGE_TOO_LARGE": 10,
    "STALE_CONTROLLER_EPOCH": 11,
    "OFFSET_METADATA_TOO_LARGE": 12,
    "COORDINATOR_LOAD_IN_PROGRESS": 14,
    "COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR": 16,
    "INVALID_TOPIC_EXCEPTION": 17,
    "RECORD_LIST_TOO_LARGE": 18,
    "NOT_ENOUGH_REPLICAS": 19,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 20,
    "INVALID_REQUIRED_ACKS": 21,
    "ILLEGAL_GENERATION": 22,
    "INCONSISTENT_GROUP_PROTOCOL": 23,
    "INVALID_GROUP_ID": 24,
    "UNKNOWN_MEMBER_ID": 25,
    "INVALID_SESSION_TIMEOUT": 26,
    "REBALANCE_IN_PROGRESS": 27,
    "INVALID_COMMIT_OFFSET_SIZE": 28,
    "TOPIC_AUTHORIZATION_FAILED": 29,
    "GROUP_AUTHORIZATION_FAILED": 30,
    "CLUSTER_AUTHORIZATION_FAILED": 31,
    "TOPIC_ALREADY_EXISTS": 36,
    "INVALID_PARTITIONS": 37,
    "INVALID_REPLICATION_FACTOR": 38,
    "INVALID_REPLICA_ASSIGNMENT": 39,
    "INVALID_CONFIG": 40,
    "NOT_CONTROLLER": 41,
    "INVALID_REQUEST": 42,
    "POLICY_VIOLATION": 44,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 45,
    "INVALID_PRODUCER_EPOCH": 47,
    "SECURITY_DISABLED": 54,
    "KAFKA_STORAGE_ERROR": 56,
    "LOG_DIR_NOT_FOUND": 57,
    "REASSIGNMENT_IN_PROGRESS": 60,
    "NON_EMPTY_GROUP": 68,
    "GROUP_ID_NOT_FOUND": 69,
    "FETCH_SESSION_ID_NOT_FOUND": 70,
    "INVALID_FETCH_SESSION_EPOCH": 71,
    "FENCED_LEADER_EPOCH": 74,
    "UNKNOWN_LEADER_EPOCH": 75,
    "STALE_BROKER_EPOCH": 77,
    "OFFSET_NOT_AVAILABLE": 78,
    "MEMBER_ID_REQUIRED": 79,
    "PREFERRED_LEADER_NOT_AVAILABLE": 80,
    "GROUP_MAX_SIZE_REACHED": 81,
    "FENCED_INSTANCE_ID": 82,
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": 83,
    "ELECTION_NOT_NEEDED": 84,
    "NO_REASSIGNMENT_IN_PROGRESS": 85,
    "GROUP_SUBSCRIBED_TO_TOPIC": 86,
    "INVALID_RECORD": 87,
    "UNSTABLE_OFFSET_COMMIT": 88,
    "INVALID_UPDATE_VERSION": 95,
    "UNKNOWN_TOPIC_ID": 100,
    "INCONSISTENT_TOPIC_ID": 103,
    "INELIGIBLE_REPLICA": 107,
    "NEW_LEADER_ELECTED": 108,
}


def test_error_codes_are_kafkas():
    declared = {v.name: v.number for v in pb.ErrorCode.DESCRIPTOR.values}
    assert declared == KAFKA_ERRORS
    # Names round-trip, so logs can print Kafka's name for a numeric code.
    assert pb.ErrorCode.Name(6) == "NOT_LEADER_OR_FOLLOWER"
    assert pb.ErrorCode.Value("FENCED_LEADER_EPOCH") == 74


def test_other_enums_use_kafkas_numbers():
    assert {v.name: v.number for v in pb.ElectionType.DESCRIPTOR.values} == {
        "PREFERRED": 0, "UNCLEAN": 1}
    assert {v.name: v.number for v in pb.LeaderRecoveryState.DESCRIPTOR.values} == {
        "RECOVERED": 0, "RECOVERING": 1}


def test_error_codes_are_int32_fields():
    """Every error_code is a plain int32, so an unknown code still decodes to its number."""
    seen = 0
    for msg in pb.DESCRIPTOR.message_types_by_name.values():
        field = msg.fields_by_name.get("error_code")
        if field is not None:
            seen += 1
            assert field.type == FieldDescriptor.TYPE_INT32, msg.full_name
    assert seen >= 10


# ------------------------------------------------------------------------------------------
# Key fields: (message, field) -> (number, type, repeated, presence)
# Numbers are the wire contract: changing one breaks mixed-version clusters.
# ------------------------------------------------------------------------------------------

I32, I64, BOOL, STR, BYTES = "int32", "int64", "bool", "string", "bytes"

KEY_FIELDS = {
    # shared
    ("TopicPartition", "topic"): (1, STR),
    ("TopicPartition", "partition"): (2, I32),
    ("BrokerEndpoint", "broker_id"): (1, I32),
    ("BrokerEndpoint", "host"): (2, STR),
    ("BrokerEndpoint", "port"): (3, I32),
    ("BrokerEndpoint", "rack"): (4, STR, "optional"),
    ("LeaderAndEpoch", "leader_id"): (1, I32),
    ("LeaderAndEpoch", "leader_epoch"): (2, I32),
    ("EpochEndOffset", "epoch"): (1, I32),
    ("EpochEndOffset", "end_offset"): (2, I64),
    ("BrokerState", "broker_id"): (1, I32),
    ("BrokerState", "broker_epoch"): (2, I64),
    ("PartitionResult", "error_code"): (3, I32),
    # Produce
    ("ProduceRequest", "acks"): (1, I32),
    ("ProduceRequest", "timeout_ms"): (2, I32),
    ("ProducePartitionData", "records"): (2, BYTES),
    ("ProducePartitionResponse", "error_code"): (2, I32),
    ("ProducePartitionResponse", "error_message"): (3, STR),
    ("ProducePartitionResponse", "base_offset"): (4, I64),
    ("ProducePartitionResponse", "log_append_time_ms"): (5, I64),
    ("ProducePartitionResponse", "log_start_offset"): (6, I64),
    # Fetch
    ("FetchRequest", "replica_state"): (1, "replog.v1.BrokerState", "message"),
    ("FetchRequest", "max_wait_ms"): (2, I32),
    ("FetchRequest", "min_bytes"): (3, I32),
    ("FetchRequest", "max_bytes"): (4, I32),
    # KIP-227: an absent session epoch is a sessionless fetch (consumers), 0 asks for a session
    ("FetchRequest", "session_id"): (6, I32),
    ("FetchRequest", "session_epoch"): (7, I32, "optional"),
    ("FetchRequest", "forgotten_topics_data"): (8, "replog.v1.ForgottenTopic", "repeated"),
    ("FetchResponse", "error_code"): (3, I32),
    ("FetchResponse", "session_id"): (4, I32),
    ("FetchPartition", "partition"): (1, I32),
    ("FetchPartition", "current_leader_epoch"): (2, I32, "optional"),
    ("FetchPartition", "fetch_offset"): (3, I64),
    ("FetchPartition", "last_fetched_epoch"): (4, I32, "optional"),
    ("FetchPartition", "log_start_offset"): (5, I64, "optional"),
    ("FetchPartition", "partition_max_bytes"): (6, I32),
    ("FetchPartitionResponse", "error_code"): (2, I32),
    ("FetchPartitionResponse", "high_watermark"): (3, I64),
    ("FetchPartitionResponse", "last_stable_offset"): (4, I64),
    ("FetchPartitionResponse", "log_start_offset"): (5, I64),
    ("FetchPartitionResponse", "diverging_epoch"): (6, "replog.v1.EpochEndOffset", "message"),
    ("FetchPartitionResponse", "current_leader"): (7, "replog.v1.LeaderAndEpoch", "message"),
    ("FetchPartitionResponse", "records"): (8, BYTES),
    # ListOffsets
    ("ListOffsetsPartition", "timestamp"): (3, I64),
    ("ListOffsetsPartitionResponse", "offset"): (4, I64),
    # Metadata
    ("MetadataResponse", "brokers"): (1, "replog.v1.BrokerEndpoint", "repeated"),
    ("MetadataResponse", "controller_id"): (3, I32),
    ("MetadataResponse", "controller"): (4, "replog.v1.BrokerEndpoint", "message"),
    ("MetadataPartition", "error_code"): (1, I32),
    ("MetadataPartition", "leader_id"): (3, I32),
    ("MetadataPartition", "leader_epoch"): (4, I32),
    ("MetadataPartition", "replicas"): (5, I32, "repeated"),
    ("MetadataPartition", "isr"): (6, I32, "repeated"),
    ("MetadataPartition", "elr"): (7, I32, "repeated"),
    ("MetadataPartition", "last_known_elr"): (8, I32, "repeated"),
    ("MetadataPartition", "offline_replicas"): (9, I32, "repeated"),
    # OffsetForLeaderEpoch
    ("OffsetForLeaderPartition", "current_leader_epoch"): (2, I32, "optional"),
    ("OffsetForLeaderPartition", "leader_epoch"): (3, I32),
    ("OffsetForLeaderPartitionResult", "error_code"): (2, I32),
    ("OffsetForLeaderPartitionResult", "leader_epoch"): (3, I32),
    ("OffsetForLeaderPartitionResult", "end_offset"): (4, I64),
    # GetReplicaLogInfo (design.md#kip-966)
    ("GetReplicaLogInfoRequest", "broker_id"): (1, I32),
    ("GetReplicaLogInfoRequest", "broker_epoch"): (2, I64),
    ("PartitionLogInfo", "partition"): (1, I32),
    ("PartitionLogInfo", "last_written_leader_epoch"): (2, I32),
    ("PartitionLogInfo", "current_leader_epoch"): (3, I32),
    ("PartitionLogInfo", "log_end_offset"): (4, I64),
    ("PartitionLogInfo", "error_code"): (5, I32),
    # DescribeLogDirs / AlterReplicaLogDirs (KIP-113, design.md#jbod)
    ("DescribeLogDirsResult", "error_code"): (1, I32),
    ("DescribeLogDirsResult", "log_dir"): (2, STR),
    ("DescribeLogDirsResult", "directory_id"): (3, STR),
    ("DescribeLogDirsResult", "offline"): (4, BOOL),
    ("DescribeLogDirsPartition", "size"): (2, I64),
    ("DescribeLogDirsPartition", "offset_lag"): (3, I64),
    ("DescribeLogDirsPartition", "is_future"): (4, BOOL),
    ("AlterReplicaLogDir", "path"): (1, STR),
    # DeleteRecords (KIP-107)
    ("DeleteRecordsRequest", "timeout_ms"): (2, I32),
    ("DeleteRecordsPartition", "offset"): (2, I64),
    ("DeleteRecordsPartitionResult", "error_code"): (3, I32),
    ("DeleteRecordsPartitionResult", "low_watermark"): (5, I64),
    # controller -> broker
    ("LeaderAndIsrRequest", "controller_id"): (1, I32),
    ("LeaderAndIsrRequest", "controller_epoch"): (2, I32),
    ("LeaderAndIsrRequest", "broker_epoch"): (3, I64),
    ("LeaderAndIsrRequest", "live_leaders"): (6, "replog.v1.BrokerEndpoint", "repeated"),
    ("LeaderAndIsrPartitionState", "topic"): (1, STR),
    ("LeaderAndIsrPartitionState", "partition"): (2, I32),
    ("LeaderAndIsrPartitionState", "controller_epoch"): (3, I32),
    ("LeaderAndIsrPartitionState", "leader"): (4, I32),
    ("LeaderAndIsrPartitionState", "leader_epoch"): (5, I32),
    ("LeaderAndIsrPartitionState", "isr"): (6, I32, "repeated"),
    ("LeaderAndIsrPartitionState", "partition_epoch"): (7, I32),
    ("LeaderAndIsrPartitionState", "replicas"): (8, I32, "repeated"),
    ("LeaderAndIsrPartitionState", "adding_replicas"): (9, I32, "repeated"),
    ("LeaderAndIsrPartitionState", "removing_replicas"): (10, I32, "repeated"),
    ("LeaderAndIsrPartitionState", "is_new"): (11, BOOL),
    ("LeaderAndIsrPartitionState", "leader_recovery_state"): (
        12, "replog.v1.LeaderRecoveryState", "enum"),
    ("LeaderAndIsrPartitionState", "elr"): (13, I32, "repeated"),
    ("LeaderAndIsrPartitionState", "last_known_elr"): (14, I32, "repeated"),
    ("StopReplicaRequest", "controller_epoch"): (2, I32),
    ("StopReplicaRequest", "broker_epoch"): (3, I64),
    ("StopReplicaPartitionState", "leader_epoch"): (3, I32, "optional"),
    ("StopReplicaPartitionState", "delete_partition"): (4, BOOL),
    ("UpdateMetadataRequest", "controller_id"): (1, I32),
    ("UpdateMetadataRequest", "controller_epoch"): (2, I32),
    ("UpdateMetadataRequest", "broker_epoch"): (3, I64),
    ("UpdateMetadataRequest", "live_brokers"): (5, "replog.v1.BrokerEndpoint", "repeated"),
    ("UpdateMetadataPartitionState", "elr"): (10, I32, "repeated"),
    ("UpdateMetadataPartitionState", "last_known_elr"): (11, I32, "repeated"),
    ("LeaderAndIsrResponse", "partition_errors"): (1, "replog.v1.PartitionResult", "repeated"),
    ("StopReplicaResponse", "partition_errors"): (1, "replog.v1.PartitionResult", "repeated"),
    ("UpdateMetadataResponse", "partition_errors"): (1, "replog.v1.PartitionResult", "repeated"),
    # Controller service
    ("CreatableTopic", "name"): (1, STR),
    ("CreatableTopic", "num_partitions"): (2, I32, "optional"),
    ("CreatableTopic", "replication_factor"): (3, I32, "optional"),
    ("CreatableTopic", "assignments"): (
        4, "replog.v1.CreatableReplicaAssignment", "repeated"),
    ("CreatableTopic", "configs"): (5, "map"),
    ("CreateTopicsRequest", "validate_only"): (3, BOOL),
    ("CreatePartitionsRequest", "topics"): (1, "replog.v1.CreatePartitionsTopic", "repeated"),
    ("CreatePartitionsRequest", "timeout_ms"): (2, I32),
    ("CreatePartitionsRequest", "validate_only"): (3, BOOL),
    ("CreatePartitionsTopic", "name"): (1, STR),
    ("CreatePartitionsTopic", "count"): (2, I32),
    ("CreatePartitionsTopic", "assignments"): (
        3, "replog.v1.CreatePartitionsAssignment", "repeated"),
    ("CreatePartitionsTopic", "has_assignments"): (4, BOOL),
    ("CreatePartitionsAssignment", "broker_ids"): (1, I32, "repeated"),
    ("CreatePartitionsTopicResult", "error_code"): (2, I32),
    ("CreatePartitionsTopicResult", "error_message"): (3, STR, "optional"),
    ("AlterPartitionRequest", "broker_id"): (1, I32),
    ("AlterPartitionRequest", "broker_epoch"): (2, I64),
    ("AlterPartitionPartition", "leader_epoch"): (2, I32),
    ("AlterPartitionPartition", "new_isr_with_epochs"): (3, "replog.v1.BrokerState", "repeated"),
    ("AlterPartitionPartition", "leader_recovery_state"): (
        4, "replog.v1.LeaderRecoveryState", "enum"),
    ("AlterPartitionPartition", "partition_epoch"): (5, I32),
    ("AlterPartitionPartition", "relinquish_leadership"): (6, BOOL),
    ("AlterPartitionPartitionResult", "error_code"): (2, I32),
    ("AlterPartitionPartitionResult", "leader_id"): (3, I32),
    ("AlterPartitionPartitionResult", "leader_epoch"): (4, I32),
    ("AlterPartitionPartitionResult", "isr"): (5, I32, "repeated"),
    ("AlterPartitionPartitionResult", "partition_epoch"): (7, I32),
    ("ControlledShutdownRequest", "broker_id"): (1, I32),
    ("ControlledShutdownRequest", "broker_epoch"): (2, I64),
    ("ControlledShutdownResponse", "remaining_partitions"): (
        1, "replog.v1.TopicPartition", "repeated"),
    ("ElectLeadersRequest", "election_type"): (1, "replog.v1.ElectionType", "enum"),
    ("ElectLeadersRequest", "topic_partitions"): (2, "replog.v1.TopicPartitions", "repeated"),
    ("ElectLeadersResponse", "replica_election_results"): (
        1, "replog.v1.PartitionResult", "repeated"),
    ("ReassignablePartition", "replicas"): (2, I32, "repeated"),
    ("ReassignablePartition", "cancel"): (3, BOOL),
    ("OngoingPartitionReassignment", "replicas"): (2, I32, "repeated"),
    ("OngoingPartitionReassignment", "adding_replicas"): (3, I32, "repeated"),
    ("OngoingPartitionReassignment", "removing_replicas"): (4, I32, "repeated"),
    ("DescribeClusterResponse", "cluster_id"): (1, STR),
    ("DescribeClusterResponse", "controller_id"): (2, I32),
    ("DescribeClusterResponse", "brokers"): (4, "replog.v1.BrokerEndpoint", "repeated"),
}

_SCALAR_NAMES = {
    FieldDescriptor.TYPE_INT32: I32, FieldDescriptor.TYPE_INT64: I64,
    FieldDescriptor.TYPE_BOOL: BOOL, FieldDescriptor.TYPE_STRING: STR,
    FieldDescriptor.TYPE_BYTES: BYTES,
}


def _is_repeated(field) -> bool:
    # protobuf >= 5 has `is_repeated`; `label` is gone in protobuf 7.
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == FieldDescriptor.LABEL_REPEATED


def _describe(field) -> tuple:
    """A field as (number, type[, shape]) in KEY_FIELDS's notation."""
    repeated = _is_repeated(field)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return (field.number, "map")
    if field.message_type is not None:
        return (field.number, field.message_type.full_name, "repeated" if repeated else "message")
    if field.enum_type is not None:
        return (field.number, field.enum_type.full_name, "enum")
    kind = _SCALAR_NAMES[field.type]
    if repeated:
        return (field.number, kind, "repeated")
    # proto3 `optional` is a synthetic oneof: explicit presence.
    if field.containing_oneof is not None:
        return (field.number, kind, "optional")
    return (field.number, kind)


@pytest.mark.parametrize("key", sorted(KEY_FIELDS), ids=lambda k: f"{k[0]}.{k[1]}")
def test_key_field(key):
    message, name = key
    assert message in pb.DESCRIPTOR.message_types_by_name, f"message {message} missing"
    fields = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name
    assert name in fields, f"{message}.{name} missing"
    assert _describe(fields[name]) == KEY_FIELDS[key]


def test_field_numbers_unique_and_snake_case():
    for msg in pb.DESCRIPTOR.message_types_by_name.values():
        numbers = [f.number for f in msg.fields]
        assert len(numbers) == len(set(numbers)), msg.full_name
        for f in msg.fields:
            assert f.name == f.name.lower(), f"{msg.full_name}.{f.name} is not snake_case"


# ------------------------------------------------------------------------------------------
# Round trips through the wire encoding
# ------------------------------------------------------------------------------------------


def _roundtrip(message):
    data = message.SerializeToString()
    copy = type(message).FromString(data)
    assert copy == message
    return copy


def test_fetch_roundtrip_with_diverging_epoch():
    records = bytes(range(256)) * 4  # opaque v2 batches
    req = pb.FetchRequest(
        replica_state=pb.BrokerState(broker_id=2, broker_epoch=4294967312),
        max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
        topics=[pb.FetchTopic(topic="events", topic_id="AAAAAAAAAAAAAAAAAAAAAA", partitions=[
            pb.FetchPartition(partition=0, current_leader_epoch=5, fetch_offset=1002,
                              last_fetched_epoch=0, log_start_offset=0,
                              partition_max_bytes=1 << 20)])])
    got = _roundtrip(req)
    part = got.topics[0].partitions[0]
    # Presence survives the wire: an explicit 0 is not "absent" (convention 2).
    assert part.HasField("last_fetched_epoch") and part.last_fetched_epoch == 0
    assert got.HasField("replica_state") and got.replica_state.broker_id == 2

    consumer = _roundtrip(pb.FetchRequest(topics=[pb.FetchTopic(topic="events", partitions=[
        pb.FetchPartition(partition=0, fetch_offset=7)])]))
    assert not consumer.HasField("replica_state")
    cpart = consumer.topics[0].partitions[0]
    assert not cpart.HasField("last_fetched_epoch")
    assert not cpart.HasField("current_leader_epoch")

    resp = pb.FetchResponse(
        responses=[pb.FetchTopicResponse(topic="events", partitions=[
            pb.FetchPartitionResponse(
                partition=0, error_code=pb.NONE, high_watermark=1100, last_stable_offset=1100,
                log_start_offset=0, diverging_epoch=pb.EpochEndOffset(epoch=4, end_offset=990),
                current_leader=pb.LeaderAndEpoch(leader_id=1, leader_epoch=5),
                records=records)])],
        node_endpoints=[pb.BrokerEndpoint(broker_id=1, host="b1", port=9092, rack="r1")])
    got = _roundtrip(resp)
    p = got.responses[0].partitions[0]
    assert p.HasField("diverging_epoch")
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (4, 990)
    assert p.records == records
    assert not pb.FetchPartitionResponse(partition=1).HasField("diverging_epoch")


def test_leader_and_isr_roundtrip():
    req = pb.LeaderAndIsrRequest(
        controller_id=100, controller_epoch=7, broker_epoch=4294967312,
        partition_states=[pb.LeaderAndIsrPartitionState(
            topic="events", partition=0, controller_epoch=7, leader=1, leader_epoch=12,
            isr=[1, 2], partition_epoch=33, replicas=[1, 2, 3, 4], adding_replicas=[4],
            removing_replicas=[3], is_new=False, leader_recovery_state=pb.RECOVERING,
            elr=[3], last_known_elr=[])],
        topic_ids={"events": "AAAAAAAAAAAAAAAAAAAAAA"},
        live_leaders=[pb.BrokerEndpoint(broker_id=1, host="b1", port=9092)])
    got = _roundtrip(req)
    state = got.partition_states[0]
    assert list(state.replicas) == [1, 2, 3, 4] and list(state.elr) == [3]
    assert state.leader_recovery_state == pb.RECOVERING
    assert got.topic_ids["events"] == "AAAAAAAAAAAAAAAAAAAAAA"


def test_alter_partition_relinquish_roundtrip():
    req = pb.AlterPartitionRequest(broker_id=1, broker_epoch=10, topics=[
        pb.AlterPartitionTopic(topic="events", partitions=[pb.AlterPartitionPartition(
            partition=0, leader_epoch=12, partition_epoch=33, relinquish_leadership=True,
            new_isr_with_epochs=[pb.BrokerState(broker_id=2, broker_epoch=20),
                                 pb.BrokerState(broker_id=3, broker_epoch=-1),
                                 pb.BrokerState(broker_id=1, broker_epoch=10)])])])
    got = _roundtrip(req)
    part = got.topics[0].partitions[0]
    assert part.relinquish_leadership
    assert [b.broker_id for b in part.new_isr_with_epochs] == [2, 3, 1]  # leader moved last
    resp = _roundtrip(pb.AlterPartitionResponse(topics=[pb.AlterPartitionTopicResult(
        topic="events", partitions=[pb.AlterPartitionPartitionResult(
            partition=0, error_code=pb.NEW_LEADER_ELECTED, leader_id=2, leader_epoch=13,
            isr=[2, 3, 1], partition_epoch=34)])]))
    assert resp.topics[0].partitions[0].error_code == 108


def test_get_replica_log_info_roundtrip():
    resp = pb.GetReplicaLogInfoResponse(broker_epoch=99, topic_partition_log_info=[
        pb.TopicPartitionLogInfo(topic="events", partition_log_info=[
            pb.PartitionLogInfo(partition=0, last_written_leader_epoch=11,
                                current_leader_epoch=12, log_end_offset=5000,
                                error_code=pb.NONE),
            pb.PartitionLogInfo(partition=1, last_written_leader_epoch=-1,
                                current_leader_epoch=-1, log_end_offset=-1,
                                error_code=pb.KAFKA_STORAGE_ERROR)])])
    got = _roundtrip(resp)
    infos = got.topic_partition_log_info[0].partition_log_info
    assert infos[1].error_code == 56 and infos[1].log_end_offset == -1


def test_reassignment_cancel_and_create_topic_defaults():
    req = _roundtrip(pb.AlterPartitionReassignmentsRequest(topics=[pb.ReassignableTopic(
        topic="foo", partitions=[pb.ReassignablePartition(partition=1, replicas=[1, 2, 3]),
                                 pb.ReassignablePartition(partition=2, cancel=True)])]))
    assert req.topics[0].partitions[1].cancel and not req.topics[0].partitions[1].replicas
    assert not req.HasField("throttle_bytes_per_sec")
    topic = pb.CreatableTopic(name="t", configs={"min.insync.replicas": "2"})
    assert not topic.HasField("num_partitions")  # absent = num.partitions
    assert not topic.HasField("replication_factor")  # absent = default.replication.factor
    assert _roundtrip(topic).configs["min.insync.replicas"] == "2"


# ------------------------------------------------------------------------------------------
# A real grpc.aio call through the generated glue
# ------------------------------------------------------------------------------------------


class _Broker(pb_grpc.BrokerServicer):
    async def GetReplicaLogInfo(self, request, context):
        if request.broker_epoch != 42:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "stale broker epoch",
                                trailing_metadata=(("replog-error-code", "77"),))
        return pb.GetReplicaLogInfoResponse(broker_epoch=42, topic_partition_log_info=[
            pb.TopicPartitionLogInfo(topic=t.topic, partition_log_info=[
                pb.PartitionLogInfo(partition=p, last_written_leader_epoch=3,
                                    current_leader_epoch=3, log_end_offset=100 + p)
                for p in t.partitions])
            for t in request.topic_partitions])


class _Controller(pb_grpc.ControllerServicer):
    async def ControlledShutdown(self, request, context):
        return pb.ControlledShutdownResponse(remaining_partitions=[
            pb.TopicPartition(topic="events", partition=request.broker_id)])


@pytest.mark.asyncio
async def test_grpc_aio_roundtrip():
    server = grpc.aio.server()
    pb_grpc.add_BrokerServicer_to_server(_Broker(), server)
    pb_grpc.add_ControllerServicer_to_server(_Controller(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            broker = pb_grpc.BrokerStub(channel)
            resp = await broker.GetReplicaLogInfo(pb.GetReplicaLogInfoRequest(
                broker_id=1, broker_epoch=42, topic_partitions=[
                    pb.GetReplicaLogInfoTopic(topic="events", partitions=[0, 2])]))
            assert [i.log_end_offset for i in resp.topic_partition_log_info[0].partition_log_info] \
                == [100, 102]

            # Whole-request failure: gRPC status + Kafka code in trailing metadata.
            call = broker.GetReplicaLogInfo(pb.GetReplicaLogInfoRequest(broker_id=1,
                                                                       broker_epoch=41))
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert dict(err.value.trailing_metadata())["replog-error-code"] == "77"

            # An RPC the servicer does not implement is UNIMPLEMENTED, not a crash.
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await broker.Fetch(pb.FetchRequest())
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED

            controller = pb_grpc.ControllerStub(channel)
            shut = await controller.ControlledShutdown(
                pb.ControlledShutdownRequest(broker_id=3, broker_epoch=9))
            assert shut.remaining_partitions[0] == pb.TopicPartition(topic="events", partition=3)
    finally:
        await server.stop(None)


def test_python_error_codes_match_the_wire_enum():
    """common.errors.ErrorCode (used where stubs are not imported) and the proto enum agree."""
    from common.errors import ErrorCode as PyErrorCode
    from common.rpc import replog_pb2

    wire = {v.name: v.number for v in replog_pb2.ErrorCode.DESCRIPTOR.values}
    assert {e.name: e.value for e in PyErrorCode} == wire

"""Answers to the Kafka APIs for features replog does not have: transactions and SASL, and the
group coordinator's on a listener built without one (a broker's listeners have one: the group
APIs are then broker/group/kafka_apis.py's, which replace these). Each gets the answer a Kafka
broker gives when the feature is not available to it, so a client fails clearly, retries as it
would against Kafka, or carries on without the feature (an assign-mode consumer with a group.id
still reads):

- FindCoordinator: COORDINATOR_NOT_AVAILABLE for every key, as KafkaApis.getCoordinator
  answers while __consumer_offsets / __transaction_state has no leader (replog never has one);
  an unknown or share (KIP-932) key type is INVALID_REQUEST, as on a broker without a share
  coordinator;
- group and transaction requests sent anyway get NOT_COORDINATOR, GroupCoordinator's
  validateGroupStatus and TransactionCoordinator's answer on a broker that owns none of the
  coordinator partitions, after the same group-id / transactional-id validity checks;
- ListGroups: no groups and no error, what an active coordinator with no groups loaded lists
  (admin clients send it to every broker and would fail on an error);
- SaslHandshake / SaslAuthenticate: ILLEGAL_SASL_STATE, KafkaApis' answer on a listener that
  is not SASL (a SASL client pointed at a PLAINTEXT port fails its authentication clearly).

The error bodies follow each request class's ``getErrorResponse`` in Kafka's clients.
InitProducerId is not listed at all (see common/kafka_protocol/unserved_messages.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker.kafka_api_context import KafkaApiContext
from common.errors import ErrorCode
from common.kafka_protocol.api import ApiKey as K

Handler = Callable[[dict, int], Awaitable[dict | None]]

# Kafka's Errors codes of the coordinator and SASL features.
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_GROUP_ID = 24
ILLEGAL_SASL_STATE = 34
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
_COORDINATOR_NOT_AVAILABLE_MESSAGE = "The coordinator is not available."  # Errors.message()
_GROUP_KEY, _TRANSACTION_KEY = 0, 1  # FindCoordinatorRequest.CoordinatorType
_NO_NODE = {"node_id": -1, "host": "", "port": -1}  # Kafka's Node.noNode()


def handlers(listener: KafkaApiContext) -> dict[int, Handler]:
    """API key -> handler(request, version) -> response body."""
    del listener  # the answers depend on the request alone
    return {
        K.FIND_COORDINATOR: _find_coordinator,
        K.JOIN_GROUP: _join_group,
        K.HEARTBEAT: _heartbeat,
        K.LEAVE_GROUP: _leave_group,
        K.SYNC_GROUP: _sync_group,
        K.DESCRIBE_GROUPS: _describe_groups,
        K.LIST_GROUPS: _list_groups,
        K.DELETE_GROUPS: _delete_groups,
        K.OFFSET_COMMIT: _offset_commit,
        K.OFFSET_FETCH: _offset_fetch,
        K.OFFSET_DELETE: _offset_delete,
        K.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
        K.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
        K.END_TXN: _end_txn,
        K.TXN_OFFSET_COMMIT: _txn_offset_commit,
        K.SASL_HANDSHAKE: _sasl_handshake,
        K.SASL_AUTHENTICATE: _sasl_authenticate,
    }


def group_error(group_id: str, empty_allowed: bool = False) -> int:
    """GroupCoordinator.validateGroupStatus: an empty group id is INVALID_GROUP_ID except for
    the offset and describe/delete APIs (isValidGroupId); any other group is owned by a
    __consumer_offsets partition this broker does not lead, so NOT_COORDINATOR."""
    return INVALID_GROUP_ID if not group_id and not empty_allowed else NOT_COORDINATOR


def txn_error(transactional_id: str) -> int:
    """TransactionCoordinator: an empty transactional id is INVALID_REQUEST, any other is owned
    by a __transaction_state partition this broker does not lead."""
    return INVALID_REQUEST if not transactional_id else NOT_COORDINATOR


def _partition_errors(topics: list[dict], error: int) -> list[dict]:
    return [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "error_code": error}
        for p in t["partitions"]]} for t in topics]


# ---------------------------------------------------------------------------- FindCoordinator

def _coordinator_error(key_type: int) -> int:
    # CoordinatorType.forId: GROUP and TRANSACTION exist; SHARE needs a share coordinator.
    return COORDINATOR_NOT_AVAILABLE if key_type in (_GROUP_KEY, _TRANSACTION_KEY) \
        else INVALID_REQUEST


async def _find_coordinator(req: dict, version: int) -> dict:
    error = _coordinator_error(req["key_type"])
    message = _COORDINATOR_NOT_AVAILABLE_MESSAGE if error == COORDINATOR_NOT_AVAILABLE \
        else f"coordinator key type {req['key_type']} is not supported"
    if version < 4:  # one key, answered in the top-level fields
        return {"throttle_time_ms": 0, "error_code": error, "error_message": message,
                **_NO_NODE}
    # KIP-699: every key of the batch gets its own answer.
    return {"throttle_time_ms": 0, "coordinators": [
        {"key": key, "error_code": error, "error_message": message, **_NO_NODE}
        for key in req["coordinator_keys"]]}


# ---------------------------------------------------------------------------- group membership

async def _join_group(req: dict, version: int) -> dict:
    # JoinGroupRequest.getErrorResponse: unknown generation, member and protocol.
    return {"throttle_time_ms": 0, "error_code": group_error(req["group_id"]),
            "generation_id": -1, "protocol_name": None if version >= 7 else "",
            "leader": "", "member_id": "", "members": []}


async def _heartbeat(req: dict, _version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": group_error(req["group_id"])}


async def _leave_group(req: dict, _version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": group_error(req["group_id"]), "members": []}


async def _sync_group(req: dict, _version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": group_error(req["group_id"]),
            "assignment": b""}


# ---------------------------------------------------------------------------- group admin

async def _describe_groups(req: dict, _version: int) -> dict:
    # DescribeGroupsResponse.groupError: unknown state, protocol type and protocol.
    return {"throttle_time_ms": 0, "groups": [
        {"error_code": group_error(g, empty_allowed=True), "group_id": g, "group_state": "",
         "protocol_type": "", "protocol_data": "", "members": []} for g in req["groups"]]}


async def _list_groups(_req: dict, _version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "groups": []}


async def _delete_groups(req: dict, _version: int) -> dict:
    return {"throttle_time_ms": 0, "results": [
        {"group_id": g, "error_code": group_error(g, empty_allowed=True)}
        for g in req["groups_names"]]}


# ---------------------------------------------------------------------------- committed offsets

async def _offset_commit(req: dict, _version: int) -> dict:
    # OffsetCommitRequest.getErrorResponse: the error on every partition of the request.
    error = group_error(req["group_id"], empty_allowed=True)
    return {"throttle_time_ms": 0, "topics": _partition_errors(req["topics"], error)}


async def _offset_fetch(req: dict, version: int) -> dict:
    if version >= 8:  # KIP-709: one answer per group
        return {"throttle_time_ms": 0, "groups": [
            {"group_id": g["group_id"], "topics": [],
             "error_code": group_error(g["group_id"], empty_allowed=True)}
            for g in req["groups"]]}
    error = group_error(req["group_id"], empty_allowed=True)
    if version >= 2:
        return {"throttle_time_ms": 0, "error_code": error, "topics": []}
    # OffsetFetchRequest.getErrorResponse: before v2 there is no top-level error, so every
    # requested partition carries it, with no offset.
    return {"topics": [{"name": t["name"], "partitions": [
        {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": error}
        for p in t["partition_indexes"]]} for t in req["topics"] or []]}


async def _offset_delete(req: dict, _version: int) -> dict:
    return {"error_code": group_error(req["group_id"]), "throttle_time_ms": 0, "topics": []}


# ---------------------------------------------------------------------------- transactions

def _txn_partition_results(topics: list[dict], error: int) -> list[dict]:
    return [{"name": t["name"], "results_by_partition": [
        {"partition_index": p, "partition_error_code": error} for p in t["partitions"]]}
        for t in topics]


async def _add_partitions_to_txn(req: dict, version: int) -> dict:
    if version < 4:
        error = txn_error(req["v3_and_below_transactional_id"])
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below":
                _txn_partition_results(req["v3_and_below_topics"], error)}
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": [
        {"transactional_id": t["transactional_id"], "topic_results": _txn_partition_results(
            t["topics"], txn_error(t["transactional_id"]))} for t in req["transactions"]]}


async def _add_offsets_to_txn(req: dict, _version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": txn_error(req["transactional_id"])}


async def _end_txn(req: dict, _version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": txn_error(req["transactional_id"]),
            "producer_id": -1, "producer_epoch": -1}


async def _txn_offset_commit(req: dict, _version: int) -> dict:
    # Sent to the group coordinator: GroupCoordinator.handleTxnCommitOffsets.
    error = group_error(req["group_id"])
    return {"throttle_time_ms": 0, "topics": _partition_errors(req["topics"], error)}


# ---------------------------------------------------------------------------- SASL

async def _sasl_handshake(_req: dict, _version: int) -> dict:
    return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []}


async def _sasl_authenticate(_req: dict, _version: int) -> dict:
    return {"error_code": ILLEGAL_SASL_STATE, "auth_bytes": b"", "session_lifetime_ms": 0,
            "error_message": "SASL is not enabled on this listener"}

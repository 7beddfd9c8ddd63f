"""The Kafka admin APIs a broker forwards to the active controller over gRPC (as a KRaft broker
forwards them, KIP-590): CreateTopics, DeleteTopics, ElectLeaders, AlterPartitionReassignments
and ListPartitionReassignments. DescribeCluster is answered from this broker's metadata cache,
as Kafka's KafkaApis.handleDescribeCluster does (it is not a forwarded API). Translation only:
every decision is the controller's.

Forwarding follows Kafka's ForwardingManager and NodeToControllerChannelManager: a request that
meets no controller (none known, NOT_CONTROLLER, or an unreachable one) is sent again when the
controller changes, for as long as the request's own timeout allows (at most the forwarding
channel's 60 s retry timeout); then every item is answered NOT_CONTROLLER, a retriable error
that makes the client refresh its metadata. Kafka answers REQUEST_TIMED_OUT there instead, but
librdkafka hides REQUEST_TIMED_OUT from CreateTopics/DeleteTopics callers whose operation
timeout is 0 (its default: "the operation is in progress"), which would report success for a
topic that was never created. A forwarded call that gets no answer in time is
REQUEST_TIMED_OUT (ForwardingManager's onTimeout): the controller may still apply it.

Whole-request failures become per-item errors in Kafka's response shape, as each request's
getErrorResponse does: every topic or partition carries the error, and the APIs with a
top-level error code carry it there too.

Authorization is checked here, before forwarding (the broker forwards under its own principal;
a KRaft broker sends the client's in an envelope instead): CreateTopics needs Create on the
cluster or the topic, DeleteTopics Delete on the topic (TOPIC_AUTHORIZATION_FAILED, existing or
not), ElectLeaders and AlterPartitionReassignments Alter on the cluster and
ListPartitionReassignments Describe (CLUSTER_AUTHORIZATION_FAILED for the whole request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import grpc

from broker.apis import admin as apis_admin
from broker.controller_client import ControllerUnavailable
from broker.kafka_api_context import KafkaApiContext
from common import dynamic_config as dc
from common.errors import ErrorCode
from common.kafka_protocol.api import ApiKey
from common.kafka_protocol.primitives import ZERO_UUID, uuid_bytes
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from common.rpc_status import error_code_of
from common.security.acl import AclOperation

Handler = Callable[[dict, int], Awaitable[dict | None]]

# Kafka's BrokerServer gives its forwarding channel a 60 s retry timeout.
FORWARD_RETRY_MS = 60_000
# The gRPC deadline goes past the timeout the controller itself waits for, so its own answer
# arrives before the transport gives up (as replog's AdminClient does).
_DEADLINE_MARGIN_S = 5.0
# DescribeCluster's EndpointType (KIP-919): 1 = brokers, 2 = controllers.
_BROKERS_ENDPOINT = 1
_CONTROLLERS_ENDPOINT = 2
MISMATCHED_ENDPOINT_TYPE = 114  # Kafka's Errors, not in replog's ErrorCode
UNSUPPORTED_ENDPOINT_TYPE = 115
INT32_MIN = -(2 ** 31)


class _Failed(Exception):
    """The whole request failed: every item gets ``code``."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = int(code)
        self.message = message


def handlers(listener: KafkaApiContext) -> dict[int, Handler]:
    """API key -> handler(request, version) -> response body."""
    a = _AdminApis(listener)
    return {
        ApiKey.CREATE_TOPICS: a.create_topics,
        ApiKey.DELETE_TOPICS: a.delete_topics,
        ApiKey.ELECT_LEADERS: a.elect_leaders,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: a.alter_partition_reassignments,
        ApiKey.LIST_PARTITION_REASSIGNMENTS: a.list_partition_reassignments,
        ApiKey.DESCRIBE_CLUSTER: a.describe_cluster,
    }


class _AdminApis:
    def __init__(self, listener: KafkaApiContext):
        self.listener = listener

    # ------------------------------------------------------------------ forwarding

    async def _forward(self, rpc: str, request: Any, timeout_ms: int) -> Any:
        """``request`` answered by the active controller, following it across failovers;
        raises _Failed with the Kafka code for the whole request."""
        controller = self.listener.controller
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(timeout_ms, 0), FORWARD_RETRY_MS) / 1000
        call_timeout_s = max(timeout_ms, 0) / 1000 + _DEADLINE_MARGIN_S
        backoff = 0.05
        while True:
            if controller is None:
                raise _Failed(ErrorCode.NOT_CONTROLLER, "this broker forwards to no controller")
            try:
                return await getattr(controller.stub(), rpc)(request, timeout=call_timeout_s)
            except ControllerUnavailable as e:
                last = _Failed(ErrorCode.NOT_CONTROLLER, str(e))
            except grpc.aio.AioRpcError as e:
                code = error_code_of(e)
                if code == ErrorCode.NOT_CONTROLLER or (
                        code is None and e.code() == grpc.StatusCode.UNAVAILABLE):
                    last = _Failed(ErrorCode.NOT_CONTROLLER,
                                   f"the controller did not answer: {e.details()}")
                elif code is not None:
                    raise _Failed(code, e.details() or "") from None
                elif e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise _Failed(ErrorCode.REQUEST_TIMED_OUT,
                                  f"the controller did not answer within "
                                  f"{call_timeout_s:.0f} s") from None
                else:
                    raise _Failed(ErrorCode.UNKNOWN_SERVER_ERROR,
                                  f"forwarding to the controller failed: {e.code().name} "
                                  f"{e.details()}") from None
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise last
            await controller.wait_for_change(min(remaining, backoff))
            backoff = min(backoff * 2, 1.0)

    # ------------------------------------------------------------------ authorization

    def _cluster_refusal(self, operation: AclOperation) -> tuple[int, str] | None:
        return apis_admin.cluster_refusal(self.listener.api_context(), operation)

    def _require_cluster(self, operation: AclOperation) -> None:
        refused = self._cluster_refusal(operation)
        if refused is not None:
            raise _Failed(*refused)

    # ------------------------------------------------------------------ CreateTopics

    async def create_topics(self, req: dict, version: int) -> dict:
        topics = req["topics"]
        results: list[dict | None] = [None] * len(topics)
        sent: list[tuple[int, pb.CreatableTopic]] = []
        denied = apis_admin.create_topics_denied(self.listener.api_context(),
                                                 (t["name"] for t in topics))
        for i, t in enumerate(topics):
            if (t["name"] or "") in denied:
                results[i] = _topic_error(t["name"], ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                          "Authorization failed.")
                continue
            refused = _refuse_new_topic(t)
            if refused is not None:
                results[i] = _topic_error(t["name"], *refused)
                continue
            ct = pb.CreatableTopic(name=t["name"], num_partitions=t["num_partitions"],
                                   replication_factor=t["replication_factor"])
            for a in t["assignments"]:
                ct.assignments.add(partition=a["partition_index"], broker_ids=a["broker_ids"])
            ct.configs.update({c["name"]: c["value"] for c in t["configs"]})
            sent.append((i, ct))
        if sent:
            timeout_ms = req["timeout_ms"]
            try:
                resp = await self._forward("CreateTopics", pb.CreateTopicsRequest(
                    topics=[ct for _, ct in sent], timeout_ms=timeout_ms,
                    validate_only=req["validate_only"]), timeout_ms)
                answers = list(resp.topics)
                if [r.name for r in answers] != [ct.name for _, ct in sent]:
                    raise _Failed(ErrorCode.UNKNOWN_SERVER_ERROR,
                                  "the controller's answer does not match the request")
                # KIP-525: the new topic's configs (and its partition count and replication
                # factor) only with DescribeConfigs on it, else TOPIC_AUTHORIZATION_FAILED on
                # topic_config_error_code (KafkaApis.handleCreateTopicsRequest)
                no_configs = apis_admin.created_configs_hidden(self.listener.api_context(),
                                                               [r.name for r in answers])
                for (i, _), r in zip(sent, answers):
                    results[i] = self._created(r, r.name not in no_configs)
            except _Failed as e:
                for i, ct in sent:
                    results[i] = _topic_error(ct.name, e.code, e.message)
        return {"throttle_time_ms": 0, "topics": results}

    def _created(self, r: pb.CreatableTopicResult, configs_authorized: bool = True) -> dict:
        if r.error_code != ErrorCode.NONE:
            return _topic_error(r.name, r.error_code, r.error_message)
        if not configs_authorized:
            return {"name": r.name, "topic_id": uuid_bytes(r.topic_id), "error_code": 0,
                    "error_message": None, "num_partitions": -1, "replication_factor": -1,
                    "configs": [],
                    "topic_config_error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
        return {"name": r.name, "topic_id": uuid_bytes(r.topic_id), "error_code": 0,
                "error_message": None, "num_partitions": r.num_partitions,
                "replication_factor": r.replication_factor,
                "configs": self._topic_configs(dict(r.configs))}

    def _topic_configs(self, overrides: dict[str, str]) -> list[dict]:
        """Every config of the new topic as this broker would describe it (Kafka's
        CreateTopics v5+ lists them all, with their sources: KIP-525)."""
        cm = self.listener.configs
        if cm is None:
            entries = dc.describe_topic(overrides, {}, {}, self.listener.rm.config)
        else:
            entries = dc.describe_topic(overrides, cm.per_broker or {}, cm.default or {},
                                        cm.config)
        return [{"name": e.name, "value": e.value, "read_only": e.read_only,
                 "config_source": int(e.source), "is_sensitive": e.sensitive} for e in entries]

    # ------------------------------------------------------------------ DeleteTopics

    async def delete_topics(self, req: dict, version: int) -> dict:
        """Names and (v6, KIP-516) ids are checked as Kafka's ControllerApis.deleteTopics
        checks them: a name or id given twice, or an entry with both or neither, is
        INVALID_REQUEST; an id this broker does not know is UNKNOWN_TOPIC_ID."""
        out: list[dict] = []
        given: list[tuple[str, bytes]] = []  # (name, id as given; zero when by name)
        if version < 6:
            given = [(n, ZERO_UUID) for n in req["topic_names"]]
        else:
            by_id = {uuid_bytes(tid): name
                     for name, tid in self.listener.rm.metadata.topic_ids.items()}
            for t in req["topics"]:
                name, tid = t["name"], t["topic_id"]
                if name is None and tid == ZERO_UUID:
                    out.append(_deletion(None, ZERO_UUID, ErrorCode.INVALID_REQUEST,
                                         "Neither topic name nor id were specified."))
                elif name is not None and tid != ZERO_UUID:
                    out.append(_deletion(name, tid, ErrorCode.INVALID_REQUEST,
                                         "You may not specify both topic name and topic id."))
                elif name is None and tid not in by_id:
                    out.append(_deletion(None, tid, ErrorCode.UNKNOWN_TOPIC_ID,
                                         "This server does not host this topic ID."))
                else:
                    given.append((name if name is not None else by_id[tid], tid))
        names = [n for n, _ in given]
        denied = apis_admin.delete_topics_denied(self.listener.api_context(), names)
        wanted: list[tuple[str, bytes]] = []
        for name, tid in dict.fromkeys(given):
            if name in denied:
                out.append(_deletion(name, tid, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                     "Authorization failed."))
            elif names.count(name) > 1:
                out.append(_deletion(name, tid, ErrorCode.INVALID_REQUEST,
                                     "Duplicate topic id." if tid != ZERO_UUID
                                     else "Duplicate topic name."))
            else:
                wanted.append((name, tid))
        if wanted:
            timeout_ms = req["timeout_ms"]
            try:
                resp = await self._forward("DeleteTopics", pb.DeleteTopicsRequest(
                    topic_names=[n for n, _ in wanted], timeout_ms=timeout_ms), timeout_ms)
                done = {r.name: r for r in resp.responses}
                for name, tid in wanted:
                    r = done.get(name)
                    out.append(
                        _deletion(name, tid, ErrorCode.UNKNOWN_SERVER_ERROR,
                                  "the controller did not answer for this topic") if r is None
                        else _deletion(name, uuid_bytes(r.topic_id) if tid == ZERO_UUID
                                       else tid, r.error_code, r.error_message))
            except _Failed as e:
                out += [_deletion(name, tid, e.code, e.message) for name, tid in wanted]
        return {"throttle_time_ms": 0, "responses": out}

    # ------------------------------------------------------------------ ElectLeaders

    async def elect_leaders(self, req: dict, version: int) -> dict:
        election_type = req["election_type"] if version >= 1 else 0  # v0: preferred only
        wanted = req["topic_partitions"]
        requested = None if wanted is None else [
            TopicPartition(t["topic"], p) for t in wanted for p in t["partitions"]]
        results: dict[TopicPartition, tuple[int, str]] = {}
        try:
            self._require_cluster(AclOperation.ALTER)
            if election_type not in (pb.PREFERRED, pb.UNCLEAN):
                # ReplicationControlManager.electionType: an unknown type fails the request.
                raise _Failed(ErrorCode.INVALID_REQUEST,
                              f"Unknown election type {election_type}")
            fwd = pb.ElectLeadersRequest(election_type=election_type,
                                         timeout_ms=req["timeout_ms"],
                                         all_topic_partitions=requested is None)
            by_topic: dict[str, list[int]] = {}
            for tp in requested or ():
                if tp.partition < 0:  # not a partition of any topic
                    results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   f"Partition {tp} does not exist.")
                else:
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
            for topic, ps in by_topic.items():
                fwd.topic_partitions.add(topic=topic, partitions=list(dict.fromkeys(ps)))
            if requested is None or by_topic:
                resp = await self._forward("ElectLeaders", fwd, req["timeout_ms"])
                for r in resp.replica_election_results:
                    results[TopicPartition(r.topic, r.partition)] = (r.error_code,
                                                                     r.error_message)
        except _Failed as e:
            failed = _partition_result(e.code, e.message)
            return {"throttle_time_ms": 0, "error_code": e.code,
                    "replica_election_results": _by_topic(
                        requested or (), lambda _: dict(failed),
                        "partition_id", "partition_result", "topic")}
        order = results if requested is None else requested
        return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": _by_topic(
            order, lambda tp: _partition_result(*results.get(tp, (
                ErrorCode.UNKNOWN_SERVER_ERROR, "the controller did not answer for it"))),
            "partition_id", "partition_result", "topic")}

    # ------------------------------------------------------------------ reassignments

    async def alter_partition_reassignments(self, req: dict, version: int) -> dict:
        """KIP-455: each partition stands alone, as in Kafka. replog's controller refuses a
        request with any invalid partition whole (replog's reassignment tool wants that), so
        the valid rest is sent again on its own."""
        items: list[tuple[TopicPartition, list[int] | None]] = [
            (TopicPartition(t["name"], p["partition_index"]), p["replicas"])
            for t in req["topics"] for p in t["partitions"]]
        allow_rf_change = req["allow_replication_factor_change"] if version >= 1 else True
        results: dict[TopicPartition, tuple[int, str]] = {}
        todo: dict[TopicPartition, list[int] | None] = {}
        cluster_refusal = self._cluster_refusal(AclOperation.ALTER)
        for tp, replicas in items:
            refused = cluster_refusal or self._refuse_move(tp, replicas, allow_rf_change)
            if refused is not None:
                results[tp] = refused
            else:
                todo[tp] = replicas
        answer = {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change,
                  "error_code": cluster_refusal[0] if cluster_refusal else 0,
                  "error_message": cluster_refusal[1] if cluster_refusal else None}
        try:
            while todo:
                resp = await self._forward("AlterPartitionReassignments",
                                           _reassign_request(todo, req["timeout_ms"]),
                                           req["timeout_ms"])
                got = {TopicPartition(r.topic, r.partition): (_kafka_move_error(r.error_code),
                                                              r.error_message)
                       for r in resp.responses}
                # The partitions the controller did not start because of the others are
                # INVALID_REQUEST (decisions/reassignment.py: NOT_STARTED); no partition is
                # refused with that code for itself.
                refused = {tp: r for tp, r in got.items()
                           if r[0] not in (ErrorCode.NONE, ErrorCode.INVALID_REQUEST)}
                if not refused:
                    results.update(got)
                    break
                results.update(refused)
                todo = {tp: r for tp, r in todo.items() if tp not in refused}
        except _Failed as e:
            answer.update(error_code=e.code, error_message=e.message)
            results.update({tp: (e.code, e.message) for tp in todo})
        answer["responses"] = _by_topic(
            [tp for tp, _ in items], lambda tp: _partition_result(
                *results.get(tp, (ErrorCode.UNKNOWN_SERVER_ERROR,
                                  "the controller did not answer for it"))),
            "partition_index", "partitions", "name")
        return answer

    def _refuse_move(self, tp: TopicPartition, replicas: list[int] | None,
                     allow_rf_change: bool) -> tuple[int, str] | None:
        """What the controller's request-wide checks would refuse for everyone, answered
        for this partition alone, and KIP-860's replication factor rule."""
        if tp.partition < 0:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Partition {tp} does not exist."
        if replicas is None:
            return None
        if any(b < 0 for b in replicas):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Invalid broker id in the replica list {replicas}")
        info = self.listener.rm.metadata.partitions.get(tp)
        if not allow_rf_change and info is not None:
            # KIP-860: compared with the replicas the partition has outside any move in
            # progress (ReplicationControlManager compares with the original replicas).
            current = [b for b in info.replicas if b not in info.adding_replicas]
            if len(set(replicas)) != len(current):
                return (ErrorCode.INVALID_REPLICATION_FACTOR,
                        f"The replication factor is changed from {len(current)} to "
                        + str(len(set(replicas))))
        return None

    async def list_partition_reassignments(self, req: dict, version: int) -> dict:
        wanted = req["topics"]
        fwd = pb.ListPartitionReassignmentsRequest(timeout_ms=req["timeout_ms"])
        for t in wanted or ():
            if t["partition_indexes"]:
                fwd.topics.add(topic=t["name"], partitions=t["partition_indexes"])
        out = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []}
        refused = self._cluster_refusal(AclOperation.DESCRIBE)
        if refused is not None:
            return {**out, "error_code": refused[0], "error_message": refused[1]}
        if wanted is not None and not fwd.topics:
            return out  # nothing asked for (an empty list in gRPC would mean every partition)
        try:
            resp = await self._forward("ListPartitionReassignments", fwd, req["timeout_ms"])
        except _Failed as e:
            return {**out, "error_code": e.code, "error_message": e.message}
        out["topics"] = [{"name": t.topic, "partitions": [
            {"partition_index": p.partition, "replicas": list(p.replicas),
             "adding_replicas": list(p.adding_replicas),
             "removing_replicas": list(p.removing_replicas)} for p in t.partitions]}
            for t in resp.topics]
        return out

    # ------------------------------------------------------------------ DescribeCluster

    async def describe_cluster(self, req: dict, version: int) -> dict:
        """Kafka's KafkaApis.handleDescribeCluster with AuthHelper's endpoint type checks.
        ``controller_id`` is this broker, for the reason Metadata gives: replog's controller
        is not a broker, and a client sends admin requests to the id it is given."""
        endpoint_type = req["endpoint_type"]
        if endpoint_type not in (_BROKERS_ENDPOINT, _CONTROLLERS_ENDPOINT):
            return _cluster_error(ErrorCode.INVALID_REQUEST if version == 0
                                  else UNSUPPORTED_ENDPOINT_TYPE,
                                  f"Unsupported endpoint type {endpoint_type}")
        if endpoint_type == _CONTROLLERS_ENDPOINT:
            return _cluster_error(ErrorCode.INVALID_REQUEST if version == 0
                                  else MISMATCHED_ENDPOINT_TYPE,
                                  "The request was sent to an endpoint of type BROKER, but we "
                                  "wanted an endpoint of type CONTROLLER")
        c = apis_admin.describe_cluster(self.listener.api_context(),
                                        req["include_cluster_authorized_operations"])
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "endpoint_type": _BROKERS_ENDPOINT, "cluster_id": c.cluster_id,
                "controller_id": c.controller_id,
                "brokers": [{"broker_id": b.broker_id, "host": b.host, "port": b.port,
                             "rack": b.rack, "is_fenced": False} for b in c.brokers],
                # INT32_MIN: "not provided", only when not asked
                "cluster_authorized_operations": INT32_MIN if c.authorized_operations is None
                else c.authorized_operations}


# ---------------------------------------------------------------------- helpers

def _refuse_new_topic(t: dict) -> tuple[int, str] | None:
    """What gRPC cannot carry, or the controller would refuse for the whole request, answered
    for this topic alone, with Kafka's errors for it."""
    nulls = [c["name"] for c in t["configs"] if c["value"] is None]
    if nulls:  # ZkAdminManager.createTopics
        return (ErrorCode.INVALID_CONFIG,
                f"Null value not supported for topic configs: {','.join(nulls)}")
    seen: set[int] = set()
    for a in t["assignments"]:
        p = a["partition_index"]
        if p in seen:  # ReplicationControlManager.createTopic
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Found multiple manual partition assignments for partition {p}")
        seen.add(p)
        if p < 0 or any(b < 0 for b in a["broker_ids"]):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Invalid partition {p} or broker ids {a['broker_ids']} in the manual "
                    + "partition assignment")
    return None


def _topic_error(name: str, code: int, message: str) -> dict:
    return {"name": name, "topic_id": ZERO_UUID, "error_code": int(code),
            "error_message": message or None, "num_partitions": -1, "replication_factor": -1,
            "configs": []}


def _deletion(name: str | None, tid: bytes, code: int, message: str) -> dict:
    return {"name": name, "topic_id": tid, "error_code": int(code),
            "error_message": message if code != ErrorCode.NONE and message else None}


def _partition_result(code: int, message: str) -> dict:
    return {"error_code": int(code),
            "error_message": message if code != ErrorCode.NONE and message else None}


def _by_topic(tps: Iterable[TopicPartition], result: Callable[[TopicPartition], dict],
              partition_key: str, partitions_key: str, topic_key: str) -> list[dict]:
    """Per-partition results grouped by topic, topics and partitions in first-seen order."""
    grouped: dict[str, dict[int, dict]] = {}
    for tp in tps:
        r = result(tp)
        r[partition_key] = tp.partition
        grouped.setdefault(tp.topic, {})[tp.partition] = r
    return [{topic_key: t, partitions_key: list(ps.values())} for t, ps in grouped.items()]


def _kafka_move_error(code: int) -> int:
    """replog's controller answers a target replica on a broker that is not registered with
    BROKER_NOT_AVAILABLE; Kafka's (KafkaController.validateReassignment, and KRaft's
    ReplicationControlManager) with INVALID_REPLICA_ASSIGNMENT. Kafka clients retry
    BROKER_NOT_AVAILABLE as stale metadata, so the wire gets Kafka's code."""
    return ErrorCode.INVALID_REPLICA_ASSIGNMENT if code == ErrorCode.BROKER_NOT_AVAILABLE \
        else code


def _reassign_request(todo: dict[TopicPartition, list[int] | None], timeout_ms: int
                      ) -> pb.AlterPartitionReassignmentsRequest:
    req = pb.AlterPartitionReassignmentsRequest(timeout_ms=timeout_ms)
    topics: dict[str, pb.ReassignableTopic] = {}
    for tp, replicas in todo.items():
        rt = topics.get(tp.topic)
        if rt is None:
            rt = topics[tp.topic] = req.topics.add(topic=tp.topic)
        if replicas is None:
            rt.partitions.add(partition=tp.partition, cancel=True)
        else:
            rt.partitions.add(partition=tp.partition, replicas=replicas)
    return req


def _cluster_error(code: int, message: str) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message,
            "endpoint_type": _BROKERS_ENDPOINT, "cluster_id": "", "controller_id": -1,
            "brokers": [], "cluster_authorized_operations": INT32_MIN}

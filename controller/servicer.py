"""The gRPC Controller service: protobuf <-> the Controller's plain values (events.py). No
decisions here: this is where protobuf stops on the way in and starts on the way out.

Whole-request errors follow the proto's convention 1: a gRPC status with the Kafka code in the
trailing metadata key `replog-error-code`. A candidate that is not the active controller fails
every RPC with FAILED_PRECONDITION + 41 (NOT_CONTROLLER); clients re-resolve the controller
through /controller or broker Metadata. Input is checked before it reaches the event queue
(design.md#c11: bounded sizes, sane numbers) and refused with INVALID_ARGUMENT + 42
(INVALID_REQUEST).

Authorization is KafkaApis' against the configured authorizer (common/security/authorizer.py;
None allows everything): CreateTopics needs Create on the cluster or on the topic,
CreatePartitions Alter and DeleteTopics Delete on the topic (an unauthorized topic answers
TOPIC_AUTHORIZATION_FAILED, existing or not, and is not passed on); ElectLeaders and
AlterPartitionReassignments need Alter on the cluster, ListPartitionReassignments Describe;
AlterPartition and ControlledShutdown, which only brokers send, ClusterAction. A refused
cluster operation fails the whole request with PERMISSION_DENIED + 31
(CLUSTER_AUTHORIZATION_FAILED) before it reaches the event queue. Brokers register through
ZooKeeper (/brokers/ids), not an RPC: ZooKeeper's ACLs guard that path.

AlterPartitionReassignments' `throttle_bytes_per_sec` is refused (INVALID_REQUEST): throttles
are dynamic configs, set through IncrementalAlterConfigs as Kafka's reassignment tool does
(`replog reassign --throttle`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import grpc

from common import rpc_status
from common.errors import ErrorCode, RequestError
from common.listeners import PLAINTEXT
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.security.acl import CLUSTER_RESOURCE, AclOperation
from common.security.acl import topic as topic_resource
from common.security.authorizer import ALLOW_ALL, Requester, grpc_requester
from common.security.principal import PrincipalBuilder
from controller import decisions, events
from controller.controller import Controller, NotControllerError
from controller.request_pb import controller_endpoint, endpoint_on_listener

MAX_TOPICS_PER_REQUEST = 10_000
MAX_PARTITIONS_PER_REQUEST = 1_000_000
MAX_PARTITIONS_PER_TOPIC = 1_000_000
MAX_REPLICATION_FACTOR = 1_000


_abort = rpc_status.abort


class _Invalid(Exception):
    pass


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise _Invalid(message)


def _validate_create(req: pb.CreateTopicsRequest) -> None:
    _check(len(req.topics) <= MAX_TOPICS_PER_REQUEST,
           f"too many topics in one request (at most {MAX_TOPICS_PER_REQUEST})")
    for t in req.topics:
        if t.HasField("num_partitions"):
            _check(t.num_partitions <= MAX_PARTITIONS_PER_TOPIC,
                   f"num_partitions {t.num_partitions} is too large")
        if t.HasField("replication_factor"):
            _check(t.replication_factor <= MAX_REPLICATION_FACTOR,
                   f"replication_factor {t.replication_factor} is too large")
        _check(len(t.assignments) <= MAX_PARTITIONS_PER_TOPIC, "too many assignments")
        for a in t.assignments:
            _check(a.partition >= 0 and all(b >= 0 for b in a.broker_ids),
                   "partition and broker ids must not be negative")
        _check(len(t.configs) <= 1000, "too many configs")


def _validate_create_partitions(req: pb.CreatePartitionsRequest) -> None:
    _check(len(req.topics) <= MAX_TOPICS_PER_REQUEST,
           f"too many topics in one request (at most {MAX_TOPICS_PER_REQUEST})")
    for t in req.topics:
        _check(t.count <= MAX_PARTITIONS_PER_TOPIC, f"count {t.count} is too large")
        _check(len(t.assignments) <= MAX_PARTITIONS_PER_TOPIC, "too many assignments")
        for a in t.assignments:
            _check(len(a.broker_ids) <= MAX_REPLICATION_FACTOR, "too many replicas")
            _check(all(b >= 0 for b in a.broker_ids), "broker ids must not be negative")


def _validate_alter(req: pb.AlterPartitionRequest) -> None:
    n = sum(len(t.partitions) for t in req.topics)
    _check(n <= MAX_PARTITIONS_PER_REQUEST, "too many partitions in one request")
    for t in req.topics:
        for p in t.partitions:
            _check(p.partition >= 0, f"negative partition {p.partition}")
            _check(len(p.new_isr_with_epochs) <= MAX_REPLICATION_FACTOR, "ISR too large")


def _validate_elect(req: pb.ElectLeadersRequest) -> None:
    _check(req.election_type in (pb.PREFERRED, pb.UNCLEAN),
           f"unknown election type {req.election_type}")
    n = sum(len(t.partitions) for t in req.topic_partitions)
    _check(n <= MAX_PARTITIONS_PER_REQUEST, "too many partitions in one request")
    for t in req.topic_partitions:
        _check(all(p >= 0 for p in t.partitions), "negative partition")


def _validate_delete(req: pb.DeleteTopicsRequest) -> None:
    _check(len(req.topic_names) <= MAX_TOPICS_PER_REQUEST, "too many topics in one request")


# ---- protobuf <-> the controller's plain values (events.py) ----------------------------------

def _create_args(req: pb.CreateTopicsRequest) -> tuple:
    topics = tuple(events.NewTopic(
        name=t.name,
        num_partitions=t.num_partitions if t.HasField("num_partitions") else None,
        replication_factor=t.replication_factor if t.HasField("replication_factor") else None,
        assignments={a.partition: list(a.broker_ids) for a in t.assignments} or None,
        configs=dict(t.configs)) for t in req.topics)
    return topics, req.validate_only, req.timeout_ms


def _create_response(results: list[events.TopicResult]) -> pb.CreateTopicsResponse:
    out = pb.CreateTopicsResponse()
    for r in results:
        t = out.topics.add(name=r.name, error_code=r.error_code, topic_id=r.topic_id,
                           num_partitions=r.num_partitions,
                           replication_factor=r.replication_factor)
        if r.error_message:
            t.error_message = r.error_message
        t.configs.update(r.configs)
    return out


def _create_partitions_args(req: pb.CreatePartitionsRequest) -> tuple:
    topics = tuple(events.NewPartitions(
        name=t.name, count=t.count,
        assignments=tuple(tuple(a.broker_ids) for a in t.assignments)
        if t.has_assignments or t.assignments else None)
        for t in req.topics)
    return topics, req.validate_only, req.timeout_ms


def _create_partitions_response(results: list[events.PartitionsResult]
                                ) -> pb.CreatePartitionsResponse:
    out = pb.CreatePartitionsResponse()
    for r in results:
        t = out.results.add(name=r.name, error_code=r.error_code)
        if r.error_message:
            t.error_message = r.error_message
    return out


def _delete_response(results: list[events.DeletionResult]) -> pb.DeleteTopicsResponse:
    out = pb.DeleteTopicsResponse()
    for r in results:
        d = out.responses.add(name=r.name, topic_id=r.topic_id, error_code=r.error_code)
        if r.error_message:
            d.error_message = r.error_message
    return out


def _alter_args(req: pb.AlterPartitionRequest) -> tuple:
    items = tuple(
        decisions.AlterPartitionItem(
            TopicPartition(t.topic, p.partition), p.leader_epoch,
            tuple((s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs),
            p.partition_epoch, int(p.leader_recovery_state), t.topic_id,
            p.relinquish_leadership)
        for t in req.topics for p in t.partitions)
    return req.broker_id, req.broker_epoch, items


def _alter_response(answers: list[events.PartitionAnswer]) -> pb.AlterPartitionResponse:
    """Grouped by topic in the request's order, as Kafka's AlterPartitionResponse is."""
    resp = pb.AlterPartitionResponse()
    topics: dict[tuple[str, str], Any] = {}
    for a in answers:
        key = (a.tp.topic, a.topic_id)
        tr = topics.get(key)
        if tr is None:
            tr = topics[key] = resp.topics.add(topic=a.tp.topic, topic_id=a.topic_id)
        r = tr.partitions.add(partition=a.tp.partition, error_code=a.error_code,
                              leader_id=a.leader, leader_epoch=a.leader_epoch,
                              partition_epoch=a.partition_epoch,
                              leader_recovery_state=a.leader_recovery_state)
        r.isr.extend(a.isr)
        r.elr.extend(a.elr)
    return resp


def _elect_args(req: pb.ElectLeadersRequest) -> tuple:
    tps = None if req.all_topic_partitions else tuple(
        TopicPartition(t.topic, p) for t in req.topic_partitions for p in t.partitions)
    return int(req.election_type), tps, req.timeout_ms


def _validate_reassign(req: pb.AlterPartitionReassignmentsRequest) -> None:
    _check(not req.HasField("throttle_bytes_per_sec"),
           "throttle_bytes_per_sec is not supported: set leader/follower.replication."
           "throttled.rate and *.replication.throttled.replicas with IncrementalAlterConfigs")
    n = sum(len(t.partitions) for t in req.topics)
    _check(n <= MAX_PARTITIONS_PER_REQUEST, "too many partitions in one request")
    for t in req.topics:
        for p in t.partitions:
            _check(p.partition >= 0, f"negative partition {p.partition}")
            _check(len(p.replicas) <= MAX_REPLICATION_FACTOR, "too many replicas")
            _check(all(b >= 0 for b in p.replicas), "negative broker id")
            _check(not (p.cancel and p.replicas),
                   f"{t.topic}-{p.partition}: cancel with replicas (cancel takes none)")


def _reassign_args(req: pb.AlterPartitionReassignmentsRequest) -> tuple:
    items = tuple((TopicPartition(t.topic, p.partition),
                   None if p.cancel else tuple(p.replicas))
                  for t in req.topics for p in t.partitions)
    return items, req.timeout_ms


def _reassign_response(results: list[events.ReassignmentResult]
                       ) -> pb.AlterPartitionReassignmentsResponse:
    return pb.AlterPartitionReassignmentsResponse(responses=[
        pb.PartitionResult(topic=r.tp.topic, partition=r.tp.partition, error_code=r.error_code,
                           error_message=r.error_message) for r in results])


def _list_response(ongoing: list[events.OngoingReassignment]
                   ) -> pb.ListPartitionReassignmentsResponse:
    resp = pb.ListPartitionReassignmentsResponse()
    topics: dict[str, Any] = {}
    for o in sorted(ongoing, key=lambda o: o.tp):
        t = topics.get(o.tp.topic)
        if t is None:
            t = topics[o.tp.topic] = resp.topics.add(topic=o.tp.topic)
        t.partitions.add(partition=o.tp.partition, replicas=o.replicas,
                         adding_replicas=o.adding, removing_replicas=o.removing)
    return resp


def _elect_response(results: list[events.ElectionResult]) -> pb.ElectLeadersResponse:
    return pb.ElectLeadersResponse(replica_election_results=[
        pb.PartitionResult(topic=r.tp.topic, partition=r.tp.partition, error_code=r.error_code,
                           error_message=r.error_message) for r in results])


class ControllerServicer(replog_pb2_grpc.ControllerServicer):
    """One instance per listener (controller/server.py binds one gRPC server per listener):
    DescribeCluster answers with the endpoints of the listener it arrived on (KIP-103)."""

    def __init__(self, controller: Controller, listener: str = PLAINTEXT,
                 principal_builder: PrincipalBuilder | None = None, authorizer=None):
        self.controller = controller
        self.listener = listener
        self.principal_builder = principal_builder or PrincipalBuilder()
        self.authorizer = authorizer or ALLOW_ALL

    def _denied(self, who: Requester, operation: AclOperation, names,
                cluster_too: bool = False) -> frozenset[str]:
        """Names of topics ``who`` may not ``operation``; ``cluster_too``: the operation on
        the cluster covers every topic (CreateTopics' Create)."""
        if self.authorizer is ALLOW_ALL or (cluster_too and self.authorizer.authorize(
                who, operation, CLUSTER_RESOURCE)):
            return frozenset()
        return frozenset(n for n in set(names) if not n or not self.authorizer.authorize(
            who, operation, topic_resource(n)))

    async def _call(self, context, fn, request, validate=None,
                    cluster: AclOperation | None = None):
        """``fn(request)`` with its errors as statuses; ``cluster``: the operation the
        principal needs on the cluster, or the request is refused whole."""
        try:
            if validate is not None:
                validate(request)
            if cluster is not None:
                who = grpc_requester(self.principal_builder, context)
                if not self.authorizer.authorize(who, cluster, CLUSTER_RESOURCE):
                    await _abort(context, grpc.StatusCode.PERMISSION_DENIED,
                                 ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                 f"{who.principal} is not authorized to {cluster.value} on "
                                 "the cluster")
            return await fn(request)
        except _Invalid as e:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, ErrorCode.INVALID_REQUEST,
                         str(e))
        except NotControllerError as e:
            await _abort(context, grpc.StatusCode.FAILED_PRECONDITION, ErrorCode.NOT_CONTROLLER,
                         str(e))
        except RequestError as e:
            await _abort(context, e.status, e.error_code, e.message)

    async def _per_topic(self, who: Requester, operation: AclOperation, names: list[str],
                         run, refused, cluster_too: bool = False) -> list:
        """KafkaApis' per-topic filter: ``run(keep)`` serves the topics ``keep(name)`` admits
        and returns their results (each with ``name``); a topic ``who`` may not ``operation``
        is not passed on and answers ``refused(...)`` with TOPIC_AUTHORIZATION_FAILED, in the
        request's order."""
        denied = self._denied(who, operation, names, cluster_too)
        if not denied:
            return await run(lambda name: True)
        done = await run(lambda name: name not in denied) \
            if any(n not in denied for n in names) else []
        by_name = {r.name: r for r in done}
        return [refused(name=n, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                        error_message=f"{who.principal} is not authorized to "
                                      f"{operation.value} topic {n!r}")
                if n in denied else by_name[n] for n in names]

    async def CreateTopics(self, request, context):
        who = grpc_requester(self.principal_builder, context)

        async def create(req):
            async def run(keep):
                topics, validate_only, timeout_ms = _create_args(req)
                return list(_create_response(await self.controller.create_topics(
                    tuple(t for t in topics if keep(t.name)), validate_only,
                    timeout_ms)).topics)
            return pb.CreateTopicsResponse(topics=await self._per_topic(
                who, AclOperation.CREATE, [t.name for t in req.topics], run,
                partial(pb.CreatableTopicResult, num_partitions=-1, replication_factor=-1),
                cluster_too=True))
        return await self._call(context, create, request, _validate_create)

    async def CreatePartitions(self, request, context):
        who = grpc_requester(self.principal_builder, context)

        async def create(req):
            async def run(keep):
                topics, validate_only, timeout_ms = _create_partitions_args(req)
                return list(_create_partitions_response(
                    await self.controller.create_partitions(
                        tuple(t for t in topics if keep(t.name)), validate_only,
                        timeout_ms)).results)
            return pb.CreatePartitionsResponse(results=await self._per_topic(
                who, AclOperation.ALTER, [t.name for t in req.topics], run,
                pb.CreatePartitionsTopicResult))
        return await self._call(context, create, request, _validate_create_partitions)

    async def DeleteTopics(self, request, context):
        who = grpc_requester(self.principal_builder, context)

        async def delete(req):
            async def run(keep):
                return list(_delete_response(await self.controller.delete_topics(
                    tuple(n for n in req.topic_names if keep(n)), req.timeout_ms)).responses)
            return pb.DeleteTopicsResponse(responses=await self._per_topic(
                who, AclOperation.DELETE, list(req.topic_names), run, pb.DeletableTopicResult))
        return await self._call(context, delete, request, _validate_delete)

    async def AlterPartition(self, request, context):
        async def alter(req):
            return _alter_response(await self.controller.alter_partition(*_alter_args(req)))
        return await self._call(context, alter, request, _validate_alter,
                                cluster=AclOperation.CLUSTER_ACTION)

    async def ControlledShutdown(self, request, context):
        async def shutdown(req):
            remaining = await self.controller.controlled_shutdown(req.broker_id,
                                                                  req.broker_epoch)
            return pb.ControlledShutdownResponse(remaining_partitions=[
                pb.TopicPartition(topic=tp.topic, partition=tp.partition) for tp in remaining])
        return await self._call(context, shutdown, request, cluster=AclOperation.CLUSTER_ACTION)

    async def ElectLeaders(self, request, context):
        async def elect(req):
            return _elect_response(await self.controller.elect_leaders(*_elect_args(req)))
        return await self._call(context, elect, request, _validate_elect,
                                cluster=AclOperation.ALTER)

    async def DescribeCluster(self, request, context):
        async def describe(_req):
            cluster_id, ctx = self.controller.cluster_view()
            info = self.controller.info
            # KIP-103: endpoints on this request's listener; a broker without it is left out.
            brokers = [endpoint_on_listener(b, r.listener_endpoints, self.listener, r.rack)
                       for b, r in sorted(ctx.live_brokers.items())]
            resp = pb.DescribeClusterResponse(
                cluster_id=cluster_id, controller_id=self.controller.controller_id,
                controller_epoch=ctx.epoch, brokers=[b for b in brokers if b is not None])
            controller = controller_endpoint(info) if not info.endpoints else \
                endpoint_on_listener(info.controller_id, info.endpoints, self.listener)
            if controller is not None:
                resp.controller.CopyFrom(controller)
            return resp
        return await self._call(context, describe, request)

    async def AlterPartitionReassignments(self, request, context):
        async def reassign(req):
            return _reassign_response(await self.controller.alter_partition_reassignments(
                *_reassign_args(req)))
        return await self._call(context, reassign, request, _validate_reassign,
                                cluster=AclOperation.ALTER)

    async def ListPartitionReassignments(self, request, context):
        async def list_(req):
            tps = tuple(TopicPartition(t.topic, p) for t in req.topics
                        for p in t.partitions) or None
            return _list_response(await self.controller.list_partition_reassignments(tps))
        return await self._call(context, list_, request, cluster=AclOperation.DESCRIBE)

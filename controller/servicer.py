"""The gRPC Controller service: wire <-> the Controller's coroutines. No decisions here.

Whole-request errors follow the proto's convention 1: a gRPC status with the Kafka code in the
trailing metadata key `replog-error-code`. A candidate that is not the active controller fails
every RPC with FAILED_PRECONDITION + 41 (NOT_CONTROLLER); clients re-resolve the controller
through /controller or broker Metadata. Input is checked before it reaches the event queue
(C11: bounded sizes, sane numbers) and refused with INVALID_ARGUMENT + 42 (INVALID_REQUEST).

AlterPartitionReassignments and ListPartitionReassignments answer UNIMPLEMENTED until C6
(reassignment, seed 004) builds them.
"""

from __future__ import annotations

import grpc

from common import rpc_status
from common.errors import ErrorCode
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from controller.controller import Controller, NotControllerError, RequestError

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


class ControllerServicer(replog_pb2_grpc.ControllerServicer):
    def __init__(self, controller: Controller):
        self.controller = controller

    async def _call(self, context, fn, request, validate=None):
        try:
            if validate is not None:
                validate(request)
            return await fn(request)
        except _Invalid as e:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, ErrorCode.INVALID_REQUEST,
                         str(e))
        except NotControllerError as e:
            await _abort(context, grpc.StatusCode.FAILED_PRECONDITION, ErrorCode.NOT_CONTROLLER,
                         str(e))
        except RequestError as e:
            await _abort(context, e.status, e.error_code, e.message)

    async def CreateTopics(self, request, context):
        return await self._call(context, self.controller.create_topics, request,
                                _validate_create)

    async def DeleteTopics(self, request, context):
        return await self._call(context, self.controller.delete_topics, request,
                                _validate_delete)

    async def AlterPartition(self, request, context):
        return await self._call(context, self.controller.alter_partition, request,
                                _validate_alter)

    async def ControlledShutdown(self, request, context):
        return await self._call(context, self.controller.controlled_shutdown, request)

    async def ElectLeaders(self, request, context):
        return await self._call(context, self.controller.elect_leaders, request,
                                _validate_elect)

    async def DescribeCluster(self, request, context):
        async def describe(_req):
            return self.controller.describe_cluster()
        return await self._call(context, describe, request)

    async def AlterPartitionReassignments(self, request, context):
        await self._unimplemented(context, "AlterPartitionReassignments")

    async def ListPartitionReassignments(self, request, context):
        await self._unimplemented(context, "ListPartitionReassignments")

    async def _unimplemented(self, context, name: str):
        if not self.controller.is_active:
            await _abort(context, grpc.StatusCode.FAILED_PRECONDITION, ErrorCode.NOT_CONTROLLER,
                         self.controller._not_controller_message())
        await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                            f"{name} is not implemented yet (reassignment, C6)")

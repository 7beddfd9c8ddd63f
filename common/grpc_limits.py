"""Bounds on what one gRPC request may make a broker or controller walk (issue 42, defect 2).

The gRPC servicers, like the Kafka codec, loop over a request's repeated fields on the event
loop, and protobuf parses a 100 MiB message of empty elements in C in a moment; the loop that
follows does not. This server interceptor refuses, before the servicer sees it:
- a non-data request larger than ``MAX_CONTROL_MESSAGE_BYTES`` (8 MiB): only Produce carries
  records, and the controller's LeaderAndIsr/UpdateMetadata a cluster's partitions; the
  others are small by nature (RESOURCE_EXHAUSTED, as gRPC's own receive limit answers);
- a request with more elements, summed over its repeated fields at every depth, than its
  method's budget: 10,000, 100,000 for the methods listing partitions or replicas, 1,000,000
  for the controller's LeaderAndIsr/UpdateMetadata/StopReplica (INVALID_ARGUMENT, one line).
Counting stops at the budget, so the check itself costs at most that many steps. The budgets
are Kafka's RequestContext's idea (common/kafka_protocol/limits.py) on the gRPC side.

Unary requests only: a stream's messages (ProduceStream, FetchStream) are each one partition's
batch or fetch, bounded by socket.request.max.bytes per message.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc
import grpc.aio

from common.kafka_protocol.limits import DEFAULT_ELEMENT_BUDGET, PARTITION_LIST_ELEMENT_BUDGET

MAX_CONTROL_MESSAGE_BYTES = 8 * 1024 * 1024
CONTROLLER_REQUEST_ELEMENT_BUDGET = 1_000_000

# method name -> (byte bound or None, element budget)
_DATA = {"Produce": (None, PARTITION_LIST_ELEMENT_BUDGET)}
_CONTROLLER_TO_BROKER = {m: (None, CONTROLLER_REQUEST_ELEMENT_BUDGET)
                         for m in ("LeaderAndIsr", "UpdateMetadata", "StopReplica")}
_PARTITION_LISTS = {m: (MAX_CONTROL_MESSAGE_BYTES, PARTITION_LIST_ELEMENT_BUDGET) for m in (
    "Fetch", "ListOffsets", "OffsetForLeaderEpoch", "GetReplicaLogInfo", "DescribeLogDirs",
    "AlterReplicaLogDirs", "DeleteRecords", "CreateTopics", "CreatePartitions", "DeleteTopics",
    "AlterPartition", "ElectLeaders", "AlterPartitionReassignments",
    "ListPartitionReassignments", "ControlledShutdown")}
METHOD_LIMITS: dict[str, tuple[int | None, int]] = {
    **_DATA, **_CONTROLLER_TO_BROKER, **_PARTITION_LISTS}
DEFAULT_LIMITS = (MAX_CONTROL_MESSAGE_BYTES, DEFAULT_ELEMENT_BUDGET)


def limits_for(full_method: str) -> tuple[int | None, int]:
    """``/replog.v1.Broker/Metadata`` -> (byte bound or None, element budget)."""
    return METHOD_LIMITS.get(full_method.rsplit("/", 1)[-1], DEFAULT_LIMITS)


def _repeated(fd) -> bool:
    # protobuf 5.28+ has is_repeated, and later releases drop label
    r = getattr(fd, "is_repeated", None)
    return r if r is not None else fd.label == fd.LABEL_REPEATED


def count_elements(message, budget: int) -> int:
    """The elements of every repeated (and map) field of ``message``, at every depth; stops
    as soon as the count passes ``budget`` (then returns that count)."""
    total = 0
    stack = [message]
    while stack:
        m = stack.pop()
        for fd, value in m.ListFields():
            mt = fd.message_type
            if _repeated(fd):
                total += len(value)
                if total > budget:
                    return total
                if mt is None:
                    continue
                if mt.GetOptions().map_entry:
                    if mt.fields_by_name["value"].message_type is not None:
                        stack.extend(value.values())
                else:
                    stack.extend(value)
            elif mt is not None:
                stack.append(value)
    return total


def check(full_method: str, request) -> tuple[grpc.StatusCode, str] | None:
    """Why ``request`` is refused, or None."""
    max_bytes, budget = limits_for(full_method)
    is_message = hasattr(request, "ListFields")  # a raw-bytes handler has no deserializer
    if max_bytes is not None:
        size = request.ByteSize() if is_message else len(request)
        if size > max_bytes:
            return grpc.StatusCode.RESOURCE_EXHAUSTED, (
                f"{full_method} request of {size} bytes is larger than {max_bytes}")
    if not is_message:
        return None
    n = count_elements(request, budget)
    if n > budget:
        return grpc.StatusCode.INVALID_ARGUMENT, (
            f"{full_method} request holds more than {budget} elements")
    return None


class RequestLimitsInterceptor(grpc.aio.ServerInterceptor):
    async def intercept_service(self, continuation: Callable, details):
        handler = await continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = details.method
        inner = handler.unary_unary

        async def bounded(request, context):
            refused = check(method, request)
            if refused is not None:
                await context.abort(*refused)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            bounded, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    return [RequestLimitsInterceptor()]

"""CreatePartitions on the Kafka listener, forwarded to the active controller over gRPC (as a
KRaft broker forwards it, KIP-590). Translation only: every check and decision is the
controller's (controller/create_partitions.py).

Kafka's answer is a map by topic name (KafkaApis.handleCreatePartitionsRequest), so a topic
listed twice gets one result, INVALID_REQUEST "Duplicate topic in request.", as the controller
answers each of its entries. A request that meets no controller (none known, a candidate that
is not active, or one that does not answer) gets NOT_CONTROLLER for every topic - what a ZK-mode
broker that is not the controller answers - so the client finds the controller again and
retries; a forwarded request whose answer does not come in time gets REQUEST_TIMED_OUT (the
controller may still apply it). Other whole-request refusals (the controller's input bounds)
put their code on every topic, as CreatePartitionsRequest.getErrorResponse does.

Authorization is checked before forwarding (the broker forwards under its own principal): a
topic the requester may not Alter answers TOPIC_AUTHORIZATION_FAILED and is not forwarded
(KafkaApis.handleCreatePartitionsRequest).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc

from broker.apis import admin as apis_admin
from broker.controller_client import ControllerUnavailable
from broker.kafka_api_context import KafkaApiContext
from common.errors import ErrorCode
from common.kafka_protocol.api import ApiKey
from common.rpc import replog_pb2 as pb
from common.rpc_status import error_code_of

Handler = Callable[[dict, int], Awaitable[dict | None]]

# The gRPC deadline goes past the time the controller itself waits for the brokers, so its own
# answer arrives before the transport gives up (as replog's AdminClient does).
_DEADLINE_MARGIN_S = 5.0


def handlers(listener: KafkaApiContext) -> dict[int, Handler]:
    """API key -> handler(request, version) -> response body."""

    async def create_partitions(req: dict, version: int) -> dict:
        return await _create_partitions(listener, req)
    return {ApiKey.CREATE_PARTITIONS: create_partitions}


def to_grpc(req: dict) -> pb.CreatePartitionsRequest:
    out = pb.CreatePartitionsRequest(timeout_ms=req["timeout_ms"],
                                     validate_only=req["validate_only"])
    for t in req["topics"]:
        assignments = t["assignments"]
        pt = out.topics.add(name=t["name"], count=t["count"],
                            has_assignments=assignments is not None)
        for a in assignments or ():
            pt.assignments.add(broker_ids=a["broker_ids"])
    return out


def _results(names: list[str], code: int, message: str | None) -> list[dict]:
    return [{"name": n, "error_code": int(code), "error_message": message}
            for n in dict.fromkeys(names)]


async def _forward(listener: KafkaApiContext, req: dict) -> list[dict]:
    names = [t["name"] for t in req["topics"]]
    controller = listener.controller
    if controller is None:
        return _results(names, ErrorCode.NOT_CONTROLLER, None)
    try:
        resp = await controller.stub().CreatePartitions(
            to_grpc(req), timeout=max(req["timeout_ms"], 0) / 1000 + _DEADLINE_MARGIN_S)
    except ControllerUnavailable:
        return _results(names, ErrorCode.NOT_CONTROLLER, None)
    except grpc.aio.AioRpcError as e:
        code = error_code_of(e)
        if code == ErrorCode.NOT_CONTROLLER or (
                code is None and e.code() == grpc.StatusCode.UNAVAILABLE):
            return _results(names, ErrorCode.NOT_CONTROLLER, None)
        if code is None and e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return _results(names, ErrorCode.REQUEST_TIMED_OUT, None)
        return _results(names, code if code is not None else ErrorCode.UNKNOWN_SERVER_ERROR,
                        e.details() or None)
    seen: dict[str, dict] = {}
    for r in resp.results:
        seen.setdefault(r.name, {"name": r.name, "error_code": r.error_code,
                                 "error_message": r.error_message
                                 if r.HasField("error_message") else None})
    return list(seen.values())


async def _create_partitions(listener: KafkaApiContext, req: dict) -> dict:
    denied = apis_admin.create_partitions_denied(listener.api_context(),
                                                 (t["name"] for t in req["topics"]))
    if not denied:
        return {"throttle_time_ms": 0, "results": await _forward(listener, req)}
    allowed = [t for t in req["topics"] if (t["name"] or "") not in denied]
    forwarded = await _forward(listener, {**req, "topics": allowed}) if allowed else []
    return {"throttle_time_ms": 0, "results": forwarded + _results(
        [t["name"] for t in req["topics"] if (t["name"] or "") in denied],
        ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")}

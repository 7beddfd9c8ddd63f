"""Produce, once for both front-ends (Kafka's KafkaApis.handleProduceRequest): Write on each
topic, the input checks, the request metric, the append (the replica manager's) and the
leader hint.

A topic the requester may not Write is answered TOPIC_AUTHORIZATION_FAILED and nothing of it
is appended. Bad input is answered as each wire's contract says, from the same checks:
- ``refuse_whole`` (gRPC, design.md#c11): an invalid topic name, a negative partition or a
  negative timeout refuses the whole request (RequestError INVALID_REQUEST) before anything
  is appended, and so does a refused ``acks`` (INVALID_REQUIRED_ACKS);
- otherwise (Kafka): per partition, INVALID_TOPIC_EXCEPTION, CORRUPT_MESSAGE for null
  records, UNKNOWN_TOPIC_OR_PARTITION for a negative partition, and a refused ``acks`` on
  every partition, as Kafka answers them.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.apis.context import ApiContext
from broker.replica_types import ProduceResult
from common.errors import ErrorCode, InvalidTopicError, RequestError
from common.names import TopicPartition, validate_topic
from common.security.acl import AclOperation


@dataclass
class ProduceRequest:
    acks: int
    timeout_ms: int
    entries: list[tuple[TopicPartition, bytes | None]]  # records: one batch per partition
    refuse_whole: bool = False


@dataclass
class ProducePartitionAnswer:
    tp: TopicPartition
    result: ProduceResult
    current_leader: tuple[int, int] | None = None  # (leader, epoch) after NOT_LEADER


def _refusals(tp: TopicPartition, records: bytes | None) -> list[tuple[ErrorCode, str]]:
    """The errors a partition's entry is refused with before any append, in the order they
    are checked (gRPC answers the first, Kafka the last, as each did before this layer)."""
    out = []
    try:
        validate_topic(tp.topic)
    except InvalidTopicError as e:
        out.append((ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)))
    if records is None:
        out.append((ErrorCode.CORRUPT_MESSAGE, f"null records for {tp}"))
    elif tp.partition < 0:
        out.append((ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"partition {tp.partition} of {tp.topic} is negative"))
    return out


async def produce(ctx: ApiContext, req: ProduceRequest) -> list[ProducePartitionAnswer]:
    """One answer per entry, in the request's order."""
    rm = ctx.rm
    rm.metrics.produce_api_requests.inc()
    denied = ctx.denied_topics(AclOperation.WRITE, (tp.topic for tp, _ in req.entries))
    refused: dict[int, ErrorCode] = {}  # entry index -> error found before the append
    for i, (tp, records) in enumerate(req.entries):
        why = _refusals(tp, records)
        if req.refuse_whole and why:
            raise RequestError(ErrorCode.INVALID_REQUEST, why[0][1])
        if tp.topic in denied:
            refused[i] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif why:
            refused[i] = why[-1][0]
    if req.refuse_whole and req.timeout_ms < 0:
        raise RequestError(ErrorCode.INVALID_REQUEST, "timeout_ms is negative")
    to_append = [e for i, e in enumerate(req.entries) if i not in refused]
    try:
        # an empty request still has its acks checked, except on gRPC (nothing to refuse)
        call = to_append or (not refused and not req.refuse_whole)
        appended = iter(await rm.produce(req.acks, max(req.timeout_ms, 0), to_append)
                        if call else ())
        results = [ProduceResult(refused[i]) if i in refused else next(appended)
                   for i in range(len(req.entries))]
    except RequestError as e:
        if req.refuse_whole:
            raise
        results = [ProduceResult(e.error_code, str(e)) for _ in req.entries]
    out = []
    for (tp, _), r in zip(req.entries, results):
        a = ProducePartitionAnswer(tp, r)
        if r.error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            info = rm.metadata.partitions.get(tp)
            if info is not None:
                a.current_leader = (info.leader, info.leader_epoch)
        out.append(a)
    return out

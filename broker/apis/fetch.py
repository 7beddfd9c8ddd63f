"""Fetch, for consumers (both front-ends) and followers (gRPC): authorization, the session
(KIP-227), the read and the metrics, once (Kafka's KafkaApis.handleFetchRequest).

- A follower's fetch (replica id >= 0) is replication traffic that only brokers send: it needs
  ClusterAction on the cluster and is refused whole, before a fetch session or a follower's
  fetch state is touched (Kafka answers it per partition with TOPIC_AUTHORIZATION_FAILED).
- A consumer's session may hold topics it is no longer allowed to Read: every partition the
  session serves is checked on each fetch, and a refused one is answered
  TOPIC_AUTHORIZATION_FAILED with nothing read.
- Metrics: a follower's fetch is replication bytes out, a consumer's bytes out (KafkaApis).
- Zero-copy: with ``zero_copy`` the records of each result are file regions of the segments,
  passed through untouched; the front-end sends them (sendfile) or reads them in (TLS).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.apis.context import ApiContext
from broker.replica_types import FetchPartitionRequest, FetchResult
from common.errors import ErrorCode, RequestError
from common.names import TopicPartition
from common.security.acl import AclOperation

MAX_WAIT_MS = 60_000
MAX_FETCH_BYTES = 64 << 20  # one answer is held in memory (its records, without zero-copy)
_LEADER_HINT_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


def partition_max_bytes(n: int) -> int:
    return max(0, min(n, MAX_FETCH_BYTES))


@dataclass
class FetchRequest:
    parts: list[FetchPartitionRequest]  # max_bytes bounded with partition_max_bytes
    max_wait_ms: int = 0
    min_bytes: int = 0
    max_bytes: int = 50 << 20
    replica_id: int = -1  # >= 0: a follower
    broker_epoch: int = -1
    session_id: int = 0
    session_epoch: int | None = None  # None: sessionless (Fetch before v7)
    forgotten: list[TopicPartition] = field(default_factory=list)
    zero_copy: bool = False
    # a wire bound the front-end found broken (gRPC: a negative offset or partition,
    # design.md#c11): refused INVALID_REQUEST, after the authorization check
    invalid: str | None = None


@dataclass
class FetchPartitionAnswer:
    tp: TopicPartition
    result: FetchResult
    current_leader: tuple[int, int] | None = None  # (leader, epoch) after a leadership error


@dataclass
class FetchAnswer:
    error: ErrorCode  # the whole request's (a fetch session's error)
    session_id: int
    partitions: list[FetchPartitionAnswer]


async def fetch(ctx: ApiContext, req: FetchRequest) -> FetchAnswer:
    """Raises RequestError for a request refused whole (CLUSTER_AUTHORIZATION_FAILED,
    INVALID_REQUEST)."""
    follower = req.replica_id >= 0
    if follower and not ctx.authorized_on_cluster(AclOperation.CLUSTER_ACTION):
        raise RequestError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                           f"{ctx.principal} is not authorized to "
                           f"{AclOperation.CLUSTER_ACTION.value} on the cluster (a follower "
                           f"Fetch as replica {req.replica_id})")
    if req.max_wait_ms < 0 or req.max_wait_ms > MAX_WAIT_MS:
        raise RequestError(ErrorCode.INVALID_REQUEST, f"max_wait_ms must be 0..{MAX_WAIT_MS}")
    if req.invalid is not None:
        raise RequestError(ErrorCode.INVALID_REQUEST, req.invalid)
    rm = ctx.rm
    session = rm.fetch_sessions.new_context(req.replica_id, req.session_id, req.session_epoch,
                                            req.parts, req.forgotten)
    if isinstance(session, tuple):
        return FetchAnswer(session[0], req.session_id, [])
    denied = ctx.denied_topics(AclOperation.READ, (fp.tp.topic for fp in session.parts)) \
        if not follower else frozenset()
    serve = [fp for fp in session.parts if fp.tp.topic not in denied]
    served = await rm.fetch(req.replica_id, req.broker_epoch, req.max_wait_ms,
                            max(req.min_bytes, 0), max(1, min(req.max_bytes, MAX_FETCH_BYTES)),
                            serve, zero_copy=req.zero_copy) \
        if serve or not session.parts else []
    if denied:
        it = iter(served)
        results = [FetchResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                   if fp.tp.topic in denied else next(it) for fp in session.parts]
    else:
        results = served
    m = rm.metrics
    (m.fetch_follower_requests if follower else m.fetch_consumer_requests).inc()
    (m.replication_bytes_out if follower else m.bytes_out).inc(
        sum(len(r.records) for r in results))
    out = []
    for fp, r in session.answer(results):
        a = FetchPartitionAnswer(fp.tp, r)
        if r.error in _LEADER_HINT_ERRORS:
            info = rm.metadata.partitions.get(fp.tp)
            if info is not None:
                a.current_leader = (info.leader, info.leader_epoch)
        out.append(a)
    return FetchAnswer(ErrorCode.NONE, session.session_id, out)

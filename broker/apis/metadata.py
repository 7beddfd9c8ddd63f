"""Metadata, assembled once for both front-ends (Kafka's KafkaApis.handleTopicMetadataRequest
over its MetadataCache).

- All topics: those the requester may not Describe are left out, silently. Named topics (or
  topic ids, KIP-516): an unauthorized one is TOPIC_AUTHORIZATION_FAILED whether or not it
  exists; one asked for by id is then named null, so its id does not disclose its name; an
  unknown id is UNKNOWN_TOPIC_ID, named null.
- An invalid name is INVALID_TOPIC_EXCEPTION; an unknown one UNKNOWN_TOPIC_OR_PARTITION, or
  what its auto-creation answers (broker/auto_topic_creation.py: Create on the cluster, or
  else on the topic).
- KIP-103: every endpoint is the one of the listener the request came in on; a broker without
  it is left out, and a partition it leads is LEADER_NOT_AVAILABLE (Kafka's answer to clients
  that predate LISTENER_NOT_FOUND), so the client retries.
- A topic's configs (replog's gRPC extension) need DescribeConfigs on it, as DescribeConfigs
  does; without it the topic is answered with no configs.
- KIP-430's authorized operations, when asked, for every topic answered by name and for the
  cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.apis.context import ApiContext
from broker.auto_topic_creation import wants_creation
from broker.metadata_cache import offline_replicas, partition_error
from common.controller_requests import BrokerNode
from common.errors import ErrorCode, InvalidTopicError
from common.kafka_protocol.primitives import uuid_bytes
from common.names import validate_topic
from common.security.acl import CLUSTER_RESOURCE, AclOperation
from common.security.acl import topic as topic_resource


@dataclass
class MetadataRequest:
    topics: list[str] | None = None  # None: every topic
    topic_ids: list[bytes] = field(default_factory=list)  # KIP-516 (Kafka's wire form)
    allow_auto_topic_creation: bool = False
    include_topic_configs: bool = False
    include_topic_authorized_operations: bool = False
    include_cluster_authorized_operations: bool = False


@dataclass
class PartitionMetadata:
    partition: int
    error: ErrorCode
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    elr: list[int]
    last_known_elr: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


@dataclass
class TopicMetadata:
    name: str | None  # None: asked for by an id that may not be disclosed or is unknown
    error: ErrorCode
    topic_id: str = ""  # the cache's form; "" for none
    asked_id: bytes | None = None  # the id the topic was asked for by (Kafka's wire form)
    partitions: list[PartitionMetadata] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)
    authorized_operations: int | None = None  # None: not asked


@dataclass
class MetadataResult:
    brokers: list[BrokerNode]  # each one's endpoint of the request's listener
    controller: BrokerNode | None  # the controller's endpoint of that listener, if it has one
    controller_id: int
    cluster_id: str
    topics: list[TopicMetadata]
    cluster_authorized_operations: int | None = None  # None: not asked


async def metadata(ctx: ApiContext, req: MetadataRequest) -> MetadataResult:
    md = ctx.rm.metadata
    denied: frozenset[str] = frozenset()
    by_id_asked: dict[str, bytes] = {}  # topics asked for by id: their ids
    unknown_ids: list[bytes] = []
    if req.topics is None:
        everything = md.topics()
        hidden = ctx.denied_topics(AclOperation.DESCRIBE, everything)
        names = [t for t in everything if t not in hidden]
    else:
        asked = list(req.topics)
        if req.topic_ids:
            by_id = {uuid_bytes(tid): t for t, tid in md.topic_ids.items()}
            for tid in req.topic_ids:
                if tid in by_id:
                    by_id_asked.setdefault(by_id[tid], tid)
                    asked.append(by_id[tid])
                elif tid not in unknown_ids:
                    unknown_ids.append(tid)
        names = list(dict.fromkeys(asked))
        denied = ctx.denied_topics(AclOperation.DESCRIBE, names)
    reachable = {b: e for b, e in ((b, e.for_listener(ctx.listener))
                                   for b, e in sorted(md.brokers.items())) if e is not None}
    live = set(md.brokers)
    no_configs = ctx.denied_topics(AclOperation.DESCRIBE_CONFIGS, names) \
        if req.include_topic_configs else frozenset()
    topics: list[TopicMetadata] = []
    unknown: list[TopicMetadata] = []  # the topics this broker does not know
    for name in names:
        if name in denied:
            topics.append(TopicMetadata(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                        asked_id=by_id_asked[name]) if name in by_id_asked
                          else TopicMetadata(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        try:
            validate_topic(name)
        except InvalidTopicError:
            topics.append(TopicMetadata(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
            continue
        parts = md.partitions_of(name)
        if not parts:  # filled in below: created, or unknown
            topics.append(TopicMetadata(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            unknown.append(topics[-1])
            continue
        t = TopicMetadata(name, ErrorCode.NONE, topic_id=md.topic_ids.get(name, ""))
        if req.include_topic_configs and name not in no_configs:
            t.configs = dict(ctx.rm.topic_configs.get(name, {}))
        for pid, info in sorted(parts.items()):
            error = ErrorCode.LEADER_NOT_AVAILABLE \
                if info.leader in live and info.leader not in reachable \
                else partition_error(info.leader)
            t.partitions.append(PartitionMetadata(
                pid, error, info.leader, info.leader_epoch, list(info.replicas),
                list(info.isr), offline_replicas(info.replicas, live, info.offline_replicas),
                list(info.elr), list(info.last_known_elr), list(info.adding_replicas),
                list(info.removing_replicas)))
        topics.append(t)
    topics += [TopicMetadata(None, ErrorCode.UNKNOWN_TOPIC_ID, asked_id=tid)
               for tid in unknown_ids]
    if unknown and wants_creation(ctx.rm.config, req.allow_auto_topic_creation,
                                  req.topics is None):
        await _auto_create(ctx, unknown)
    if req.include_topic_authorized_operations:
        for t in topics:  # KafkaApis fills them in for every topic it answers by name
            if t.name:
                t.authorized_operations = ctx.authorized_operations(topic_resource(t.name))
    return MetadataResult(
        brokers=list(reachable.values()),
        controller=md.controller.for_listener(ctx.listener) if md.controller else None,
        controller_id=md.controller_id, cluster_id=md.cluster_id, topics=topics,
        cluster_authorized_operations=ctx.authorized_operations(CLUSTER_RESOURCE)
        if req.include_cluster_authorized_operations else None)


async def _auto_create(ctx: ApiContext, entries: list[TopicMetadata]) -> None:
    """auto.create.topics.enable: each unknown topic's entry gets its creation's error."""
    if ctx.auto_topics is None:
        return
    errors = await ctx.auto_topics.metadata_errors(
        [e.name for e in entries], ctx.authorized_on_cluster(AclOperation.CREATE),
        lambda names: ctx.denied_topics(AclOperation.CREATE, names))
    for e in entries:
        e.error = ErrorCode(errors[e.name])

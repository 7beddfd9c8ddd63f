"""AdminClient: topic and cluster administration (Kafka's Admin API, over replog's gRPC).

Reads (topics, partitions, configs, live brokers) come from any broker's Metadata. Changes go
to the active controller, whose address is in every Metadata response (controllers are separate
processes in replog, so it is not one of the brokers). A controller candidate that is not active
answers NOT_CONTROLLER, and a controller that just died does not answer at all; either way the
client re-reads Metadata and retries until its ``default_api_timeout_ms`` runs out, as Kafka's
AdminClient does. Configs (DescribeConfigs, IncrementalAlterConfigs) go to a broker, as in
Kafka's ZooKeeper mode: a broker's own configs to that broker, the rest to any broker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from client.errors import KafkaError, KafkaTimeoutError, TransportError, UnknownTopicError
from client.metadata import BrokerInfo, ClusterMetadata, MetadataCache, TopicInfo
from client.transport import ChannelPool, call, parse_bootstrap_servers
from common.errors import ErrorCode
from common.rpc import replog_pb2 as pb

# gRPC deadline beyond the server-side timeout carried in the request, so the server's own
# timeout answer (with its error code) arrives before the transport gives up.
_DEADLINE_MARGIN_S = 5.0


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the controller's num.partitions
    replication_factor: int = -1  # -1: the controller's default.replication.factor
    replica_assignment: Mapping[int, list[int]] | None = None  # partition -> brokers
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NewPartitions:
    """Kafka's NewPartitions.increaseTo(total_count, new_assignments): raise a topic's
    partition count; ``new_assignments`` holds one replica list (preferred leader first) per
    *new* partition, or None to let the controller place them."""

    total_count: int
    new_assignments: list[list[int]] | None = None


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    topic_id: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int
    controller_epoch: int
    brokers: tuple[BrokerInfo, ...]
    controller: BrokerInfo | None


@dataclass(frozen=True)
class PartitionReassignment:
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


ELECTION_TYPES = {"preferred": pb.PREFERRED, "unclean": pb.UNCLEAN}

# Kafka's ConfigResource types, by the CLI's entity-type names.
CONFIG_RESOURCE_TYPES = {"topics": pb.TOPIC, "brokers": pb.BROKER}
ALTER_OPS = {"set": pb.SET, "delete": pb.DELETE, "append": pb.APPEND, "subtract": pb.SUBTRACT}


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: str  # Kafka's ConfigSource name, e.g. "DYNAMIC_TOPIC_CONFIG"


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]


@dataclass(frozen=True)
class AlterConfigOp:
    name: str
    op: str = "set"  # set | delete | append | subtract
    value: str | None = None


def _config_entry(e) -> ConfigEntry:
    return ConfigEntry(e.name, e.value if e.HasField("value") else None,
                       pb.ConfigSource.Name(e.config_source), e.read_only, e.is_sensitive,
                       tuple(ConfigSynonym(s.name, s.value if s.HasField("value") else None,
                                           pb.ConfigSource.Name(s.source))
                             for s in e.synonyms))


def _partitions_by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        by_topic.setdefault(topic, []).append(p)
    return by_topic


def _error_or_none(code: int, message: str, **ctx) -> KafkaError | None:
    return None if code == ErrorCode.NONE else KafkaError(code, message, **ctx)


class AdminClient:
    """``async with AdminClient("127.0.0.1:9092") as admin: await admin.create_topic(...)``."""

    def __init__(self, bootstrap_servers: str | list[str], *, request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, default_api_timeout_ms: int = 60000,
                 pool: ChannelPool | None = None, metadata: MetadataCache | None = None):
        self._own_pool = pool is None
        self.pool = pool or ChannelPool()
        self.metadata = metadata or MetadataCache(
            self.pool, parse_bootstrap_servers(bootstrap_servers),
            request_timeout_ms=request_timeout_ms, retry_backoff_ms=retry_backoff_ms)
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.default_api_timeout_ms = default_api_timeout_ms

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self.metadata.close()
        if self._own_pool:
            await self.pool.close()

    # ------------------------------------------------------------------ reads (any broker)

    async def describe_cluster_metadata(self, topics: list[str] | None = None, *,
                                        all_topics: bool = False,
                                        include_configs: bool = False) -> ClusterMetadata:
        """A raw Metadata answer from one broker (brokers, controller, the asked topics)."""
        return await self._with_retries(
            lambda: self.metadata.fetch(topics, all_topics=all_topics,
                                        include_configs=include_configs), "Metadata")

    async def list_topics(self) -> list[str]:
        md = await self.describe_cluster_metadata(all_topics=True)
        return sorted(name for name, t in md.topics.items() if t.error_code == ErrorCode.NONE)

    async def describe_topics(self, names: Iterable[str] | None = None, *,
                              include_configs: bool = True) -> dict[str, TopicInfo]:
        """Topics by name (all topics when ``names`` is None). A missing topic raises
        UnknownTopicError; other per-topic errors raise KafkaError."""
        wanted = None if names is None else list(names)
        md = await self.describe_cluster_metadata(wanted, all_topics=wanted is None,
                                                  include_configs=include_configs)
        out: dict[str, TopicInfo] = {}
        for name in (wanted if wanted is not None else sorted(md.topics)):
            t = md.topics.get(name)
            if t is None or t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise UnknownTopicError(name, f"Topic '{name}' does not exist")
            if t.error_code != ErrorCode.NONE:
                raise KafkaError(t.error_code, f"topic '{name}'", topic=name)
            out[name] = t
        return out

    async def live_brokers(self) -> dict[int, BrokerInfo]:
        """The brokers of a Metadata answer. One that lists none (a broker of a cluster still
        starting, not yet sent the controller's UpdateMetadata) is asked again until
        default.api.timeout.ms, as Kafka's AdminClient waits for a node assignment; only then
        is the empty map returned (the callers' "no live broker")."""
        deadline = time.monotonic() + self.default_api_timeout_ms / 1000
        while True:
            brokers = (await self.describe_cluster_metadata()).brokers
            if brokers or time.monotonic() >= deadline:
                return brokers
            await asyncio.sleep(self.retry_backoff_s)

    # ------------------------------------------------------------------ controller RPCs

    async def describe_cluster(self) -> ClusterDescription:
        resp = await self._controller_call("DescribeCluster", pb.DescribeClusterRequest())
        controller = (BrokerInfo.from_pb(resp.controller) if resp.HasField("controller")
                      and resp.controller.port else None)
        return ClusterDescription(resp.cluster_id, resp.controller_id, resp.controller_epoch,
                                  tuple(BrokerInfo.from_pb(b) for b in resp.brokers), controller)

    async def create_topics(self, topics: Iterable[NewTopic], *, timeout_ms: int = 30000,
                            validate_only: bool = False
                            ) -> dict[str, CreatedTopic | KafkaError]:
        req = pb.CreateTopicsRequest(timeout_ms=timeout_ms, validate_only=validate_only)
        for t in topics:
            ct = req.topics.add(name=t.name, configs=dict(t.configs))
            if t.replica_assignment:
                for p, brokers in sorted(t.replica_assignment.items()):
                    ct.assignments.add(partition=p, broker_ids=list(brokers))
            else:
                ct.num_partitions = t.num_partitions
                ct.replication_factor = t.replication_factor
        resp = await self._controller_call("CreateTopics", req, timeout_ms)
        out: dict[str, CreatedTopic | KafkaError] = {}
        for r in resp.topics:
            err = _error_or_none(r.error_code, r.error_message, topic=r.name)
            out[r.name] = err or CreatedTopic(r.name, r.topic_id, r.num_partitions,
                                              r.replication_factor, dict(r.configs))
        return out

    async def create_topic(self, name: str, num_partitions: int | None = None,
                           replication_factor: int | None = None, *,
                           configs: Mapping[str, str] | None = None,
                           replica_assignment: Mapping[int, list[int]] | None = None,
                           timeout_ms: int = 30000, validate_only: bool = False) -> CreatedTopic:
        t = NewTopic(name, -1 if num_partitions is None else num_partitions,
                     -1 if replication_factor is None else replication_factor,
                     replica_assignment, dict(configs or {}))
        result = (await self.create_topics([t], timeout_ms=timeout_ms,
                                           validate_only=validate_only)).get(name)
        if result is None:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"the controller did not answer for topic {name}")
        if isinstance(result, KafkaError):
            raise result
        return result

    async def create_partitions(self, new_partitions: Mapping[str, NewPartitions | int], *,
                                timeout_ms: int = 30000, validate_only: bool = False
                                ) -> dict[str, KafkaError | None]:
        """Kafka's createPartitions: per topic, None once its new partitions exist (and, with
        timeout_ms > 0, the live brokers know of them), or the KafkaError the controller gave
        (INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION,
        REASSIGNMENT_IN_PROGRESS, ...). An int is a total count without an assignment."""
        req = pb.CreatePartitionsRequest(timeout_ms=timeout_ms, validate_only=validate_only)
        for name, np in new_partitions.items():
            np = NewPartitions(np) if isinstance(np, int) else np
            t = req.topics.add(name=name, count=np.total_count,
                               has_assignments=np.new_assignments is not None)
            for replicas in np.new_assignments or ():
                t.assignments.add(broker_ids=list(replicas))
        resp = await self._controller_call("CreatePartitions", req, timeout_ms)
        return {r.name: _error_or_none(r.error_code, r.error_message, topic=r.name)
                for r in resp.results}

    async def delete_topics(self, names: Iterable[str], *, timeout_ms: int = 30000
                            ) -> dict[str, KafkaError | None]:
        req = pb.DeleteTopicsRequest(topic_names=list(names), timeout_ms=timeout_ms)
        resp = await self._controller_call("DeleteTopics", req, timeout_ms)
        return {r.name: _error_or_none(r.error_code, r.error_message, topic=r.name)
                for r in resp.responses}

    async def delete_topic(self, name: str, *, timeout_ms: int = 30000) -> None:
        err = (await self.delete_topics([name], timeout_ms=timeout_ms)).get(name)
        if err is not None:
            raise err

    async def elect_leaders(self, election_type: str | int,
                            partitions: Iterable[tuple[str, int]] | None = None, *,
                            timeout_ms: int = 30000
                            ) -> dict[tuple[str, int], KafkaError | None]:
        """Preferred or unclean election; ``partitions=None`` means every partition."""
        et = ELECTION_TYPES[election_type.lower()] if isinstance(election_type, str) \
            else election_type
        req = pb.ElectLeadersRequest(election_type=et, timeout_ms=timeout_ms,
                                     all_topic_partitions=partitions is None)
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, p in partitions:
                by_topic.setdefault(topic, []).append(p)
            for topic, ps in by_topic.items():
                req.topic_partitions.add(topic=topic, partitions=ps)
        resp = await self._controller_call("ElectLeaders", req, timeout_ms)
        return {(r.topic, r.partition): _error_or_none(r.error_code, r.error_message,
                                                       topic=r.topic, partition=r.partition)
                for r in resp.replica_election_results}

    async def alter_partition_reassignments(
            self, reassignments: Mapping[tuple[str, int], list[int] | None], *,
            throttle_bytes_per_sec: int | None = None, timeout_ms: int = 30000
    ) -> dict[tuple[str, int], KafkaError | None]:
        """Start (target replicas) or cancel (None) reassignments (KIP-455)."""
        req = pb.AlterPartitionReassignmentsRequest(timeout_ms=timeout_ms)
        if throttle_bytes_per_sec is not None:
            req.throttle_bytes_per_sec = throttle_bytes_per_sec
        by_topic: dict[str, pb.ReassignableTopic] = {}
        for (topic, p), replicas in reassignments.items():
            rt = by_topic.get(topic)
            if rt is None:
                rt = by_topic[topic] = req.topics.add(topic=topic)
            if replicas is None:
                rt.partitions.add(partition=p, cancel=True)
            else:
                rt.partitions.add(partition=p, replicas=list(replicas))
        resp = await self._controller_call("AlterPartitionReassignments", req, timeout_ms)
        return {(r.topic, r.partition): _error_or_none(r.error_code, r.error_message,
                                                       topic=r.topic, partition=r.partition)
                for r in resp.responses}

    async def list_partition_reassignments(
            self, partitions: Iterable[tuple[str, int]] | None = None, *, timeout_ms: int = 30000
    ) -> dict[tuple[str, int], PartitionReassignment]:
        req = pb.ListPartitionReassignmentsRequest(timeout_ms=timeout_ms)
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, p in partitions:
                by_topic.setdefault(topic, []).append(p)
            for topic, ps in by_topic.items():
                req.topics.add(topic=topic, partitions=ps)
        resp = await self._controller_call("ListPartitionReassignments", req, timeout_ms)
        return {(t.topic, p.partition): PartitionReassignment(
                    tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in resp.topics for p in t.partitions}

    # ------------------------------------------------------------------ broker RPCs

    async def describe_log_dirs(self, broker_ids: Iterable[int] | None = None
                                ) -> dict[int, pb.DescribeLogDirsResponse]:
        """DescribeLogDirs from each broker (all live brokers when ``broker_ids`` is None)."""
        brokers = await self.live_brokers()
        ids = sorted(brokers) if broker_ids is None else list(broker_ids)
        missing = [b for b in ids if b not in brokers]
        if missing:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE,
                             f"broker(s) {','.join(map(str, missing))} not alive")

        async def one(b: int):
            addr = brokers[b].address
            return b, await call(self.pool.broker(addr).DescribeLogDirs,
                                 pb.DescribeLogDirsRequest(), addr,
                                 self.request_timeout_ms / 1000)

        return dict(await asyncio.gather(*(one(b) for b in ids)))

    async def replica_log_end_offsets(self, broker_id: int,
                                      partitions: Iterable[tuple[str, int]]
                                      ) -> dict[tuple[str, int], int | KafkaError]:
        """Each partition's log end offset on ``broker_id`` (GetReplicaLogInfo with no broker
        epoch, so any incarnation answers); a KafkaError where that broker has no replica."""
        addr = await self._live_broker_address(broker_id)
        req = pb.GetReplicaLogInfoRequest(broker_id=broker_id, broker_epoch=-1)
        for topic, ps in _partitions_by_topic(partitions).items():
            req.topic_partitions.add(topic=topic, partitions=ps)
        resp = await call(self.pool.broker(addr).GetReplicaLogInfo, req, addr,
                          self.request_timeout_ms / 1000)
        return {(t.topic, i.partition): _error_or_none(i.error_code, i.error_message,
                                                       topic=t.topic, partition=i.partition)
                or i.log_end_offset
                for t in resp.topic_partition_log_info for i in t.partition_log_info}

    async def replica_sizes(self, broker_id: int, partitions: Iterable[tuple[str, int]]
                            ) -> dict[tuple[str, int], int]:
        """Bytes of each partition's replica on ``broker_id`` (DescribeLogDirs, filtered; a
        ``-future`` copy is not counted); partitions the broker does not host are absent."""
        addr = await self._live_broker_address(broker_id)
        wanted = set(partitions)
        req = pb.DescribeLogDirsRequest()
        for topic, ps in _partitions_by_topic(wanted).items():
            req.topics.add(topic=topic, partitions=ps)
        resp = await call(self.pool.broker(addr).DescribeLogDirs, req, addr,
                          self.request_timeout_ms / 1000)
        out: dict[tuple[str, int], int] = {}
        for d in resp.results:
            for t in d.topics:
                for rp in t.partitions:
                    tp = (t.topic, rp.partition)
                    if not rp.is_future and tp in wanted:
                        out[tp] = out.get(tp, 0) + rp.size
        return out

    async def _live_broker_address(self, broker_id: int) -> str:
        brokers = await self.live_brokers()
        if broker_id not in brokers:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} not alive")
        return brokers[broker_id].address

    async def alter_replica_log_dirs(self, broker_id: int, moves: Mapping[tuple[str, int], str]
                                     ) -> dict[tuple[str, int], KafkaError | None]:
        """Move replicas of ``broker_id`` to other log dirs of that broker (KIP-113)."""
        brokers = await self.live_brokers()
        if broker_id not in brokers:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} not alive")
        by_dir: dict[str, dict[str, list[int]]] = {}
        for (topic, p), path in moves.items():
            by_dir.setdefault(path, {}).setdefault(topic, []).append(p)
        req = pb.AlterReplicaLogDirsRequest()
        for path, topics in by_dir.items():
            d = req.dirs.add(path=path)
            for topic, ps in topics.items():
                d.topics.add(topic=topic, partitions=ps)
        addr = brokers[broker_id].address
        resp = await call(self.pool.broker(addr).AlterReplicaLogDirs, req, addr,
                          self.request_timeout_ms / 1000)
        return {(r.topic, r.partition): _error_or_none(r.error_code, r.error_message,
                                                       topic=r.topic, partition=r.partition)
                for r in resp.results}

    async def delete_records(self, offsets: Mapping[tuple[str, int], int],
                             timeout_ms: int | None = None
                             ) -> dict[tuple[str, int], int | KafkaError]:
        """Kafka's Admin.deleteRecords (KIP-107): each partition's log start moved to its
        offset (-1: the high watermark) on its leader -> the low watermark, or a KafkaError.
        A partition whose leader moved meanwhile is sent again to the new one."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        out: dict[tuple[str, int], int | KafkaError] = {}
        todo = dict(offsets)
        for attempt in range(3):
            md = await self.metadata.fetch(sorted({t for t, _ in todo}))
            by_leader: dict[str, dict[tuple[str, int], int]] = {}
            for (topic, p), offset in todo.items():
                info = md.topics.get(topic)
                part = info.partition(p) if info is not None and not info.error_code else None
                leader = md.brokers.get(part.leader) if part is not None else None
                if leader is None:
                    out[(topic, p)] = KafkaError(
                        info.error_code if info is not None and info.error_code else
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if part is None
                        else ErrorCode.LEADER_NOT_AVAILABLE,
                        f"no leader for {topic}-{p}", topic=topic, partition=p)
                    continue
                by_leader.setdefault(leader.address, {})[(topic, p)] = offset

            async def one(addr: str, parts: dict[tuple[str, int], int]):
                req = pb.DeleteRecordsRequest(timeout_ms=timeout_ms)
                for topic, ps in _partitions_by_topic(parts).items():
                    req.topics.add(topic=topic, partitions=[
                        pb.DeleteRecordsPartition(partition=p, offset=parts[(topic, p)])
                        for p in ps])
                return await call(self.pool.broker(addr).DeleteRecords, req, addr,
                                  timeout_ms / 1000 + self.request_timeout_ms / 1000)

            answers = await asyncio.gather(*(one(a, ps) for a, ps in by_leader.items()))
            todo = {}
            for resp in answers:
                for r in resp.results:
                    key = (r.topic, r.partition)
                    if r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and attempt < 2:
                        todo[key] = offsets[key]
                        continue
                    out[key] = r.low_watermark if r.error_code == ErrorCode.NONE else \
                        KafkaError(r.error_code, r.error_message, topic=r.topic,
                                   partition=r.partition)
            if not todo:
                break
            await asyncio.sleep(self.metadata.retry_backoff_s)
        return out

    # ------------------------------------------------------------------ configs (any broker)

    async def describe_configs(self, resources: Iterable[tuple[str, str]], *,
                               include_synonyms: bool = True
                               ) -> dict[tuple[str, str], list[ConfigEntry] | KafkaError]:
        """Kafka's describeConfigs: ``(entity type, name)`` -> entries, for entity types
        "topics" and "brokers" (name "" is the cluster-wide broker default). A broker's own
        configs are asked of that broker; everything else of any live broker."""
        by_broker = await self._route_config_resources(list(resources))
        out: dict[tuple[str, str], list[ConfigEntry] | KafkaError] = {}
        for addr, items in by_broker.items():
            req = pb.DescribeConfigsRequest(include_synonyms=include_synonyms)
            for entity_type, name in items:
                req.resources.add(resource_type=CONFIG_RESOURCE_TYPES[entity_type],
                                  resource_name=name)
            resp = await self._call_broker_or_any(addr, "DescribeConfigs", req)
            for (entity_type, name), r in zip(items, resp.results):
                err = _error_or_none(r.error_code, r.error_message)
                out[(entity_type, name)] = err or [_config_entry(e) for e in r.configs]
        return out

    async def incremental_alter_configs(
            self, alterations: Mapping[tuple[str, str], Iterable[AlterConfigOp]], *,
            validate_only: bool = False) -> dict[tuple[str, str], KafkaError | None]:
        """Kafka's incrementalAlterConfigs: per resource, every operation or none."""
        by_broker = await self._route_config_resources(list(alterations))
        out: dict[tuple[str, str], KafkaError | None] = {}
        for addr, items in by_broker.items():
            req = pb.IncrementalAlterConfigsRequest(validate_only=validate_only)
            for entity_type, name in items:
                r = req.resources.add(resource_type=CONFIG_RESOURCE_TYPES[entity_type],
                                      resource_name=name)
                for op in alterations[(entity_type, name)]:
                    c = r.configs.add(name=op.name, config_operation=ALTER_OPS[op.op])
                    if op.value is not None:
                        c.value = op.value
            resp = await self._call_broker_or_any(addr, "IncrementalAlterConfigs", req)
            for key, r in zip(items, resp.responses):
                out[key] = _error_or_none(r.error_code, r.error_message)
        return out

    # ------------------------------------------------------------------ ACLs (any broker)

    async def acl_call(self, rpc: str, request):
        """Kafka's createAcls / describeAcls / deleteAcls: ``rpc`` ("CreateAcls",
        "DescribeAcls", "DeleteAcls") to any live broker, whose authorizer answers it."""
        if not await self.live_brokers():
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, "no live broker")
        return await self._call_broker_or_any(None, rpc, request)

    async def _route_config_resources(self, resources: list[tuple[str, str]]
                                      ) -> dict[str | None, list[tuple[str, str]]]:
        """Broker address -> the resources to send there; None: any live broker. (Kafka's
        AdminClient routes a BROKER resource with an id to that broker, the rest to the least
        loaded node.)"""
        brokers = await self.live_brokers()
        if not brokers:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, "no live broker")
        out: dict[str | None, list[tuple[str, str]]] = {}
        for entity_type, name in resources:
            if entity_type not in CONFIG_RESOURCE_TYPES:
                raise ValueError(f"unknown entity type {entity_type!r}")
            addr = None
            if entity_type == "brokers" and name:
                if not name.isdigit() or int(name) not in brokers:
                    raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE,
                                     f"broker {name} is not alive")
                addr = brokers[int(name)].address
            out.setdefault(addr, []).append((entity_type, name))
        return out

    async def _call_broker_or_any(self, addr: str | None, rpc: str, request):
        """Send ``request`` to ``addr``, or, for None, to the least loaded live broker: the one
        that answered the last Metadata request first, and on a transport failure the next one.
        A registered broker may still not answer (stopped, partitioned, its session not yet
        expired); Kafka's LeastLoadedNodeProvider likewise retries a failed call on another
        node, as the one that failed is backing off."""
        timeout_s = self.request_timeout_ms / 1000
        if addr is not None:
            return await call(getattr(self.pool.broker(addr), rpc), request, addr, timeout_s)
        live = sorted(b.address for b in self.metadata.cluster.brokers.values())
        first = self.metadata.last_answered
        candidates = ([first] if first in live else []) + [a for a in live if a != first]
        deadline = time.monotonic() + self.default_api_timeout_ms / 1000
        for i, address in enumerate(candidates):
            try:
                return await call(getattr(self.pool.broker(address), rpc), request, address,
                                  max(0.5, min(timeout_s, deadline - time.monotonic())))
            except TransportError:
                if i == len(candidates) - 1 or time.monotonic() >= deadline:
                    raise

    # ------------------------------------------------------------------ plumbing

    async def _with_retries(self, op, what: str):
        """Retry ``op`` on retriable errors until default.api.timeout.ms."""
        deadline = time.monotonic() + self.default_api_timeout_ms / 1000
        while True:
            try:
                return await op()
            except KafkaError as e:
                if not e.retriable or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(self.retry_backoff_s)

    async def _controller_call(self, rpc: str, request, server_timeout_ms: int | None = None):
        """Send ``request`` to the active controller, following it across failovers."""
        api_timeout_s = self.default_api_timeout_ms / 1000
        deadline = time.monotonic() + api_timeout_s
        rpc_timeout_s = (self.request_timeout_ms / 1000 if server_timeout_ms is None
                         else server_timeout_ms / 1000 + _DEADLINE_MARGIN_S)
        controller = self.metadata.cluster.controller
        last: BaseException | None = None
        backoff = self.retry_backoff_s
        while True:
            if controller is None:
                try:
                    controller = (await self.metadata.fetch()).controller
                except KafkaError as e:
                    last = e
                if controller is None and last is None:
                    last = KafkaError(ErrorCode.NOT_CONTROLLER,
                                      "the brokers know of no active controller")
            if controller is not None:
                addr = controller.address
                remaining = deadline - time.monotonic()
                try:
                    return await call(getattr(self.pool.controller(addr), rpc), request, addr,
                                      max(0.5, min(rpc_timeout_s, remaining + 1.0)))
                except KafkaError as e:
                    if not (e.error_code == ErrorCode.NOT_CONTROLLER
                            or isinstance(e, TransportError)):
                        raise
                    last = e
                    controller = None
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"{rpc}: no active controller answered within "
                    f"{self.default_api_timeout_ms} ms", last)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

"""The replica manager's gauges (Kafka's ReplicaManager metrics: partition counts, under-replicated
and under-min-ISR partitions, replication quota state).

Registered by ``broker.replica_manager.ReplicaManager`` with the state each gauge reads - the
partition maps, the fetch-session cache, the log manager, the quotas - not the manager
(composed, not a mixin sharing undeclared state).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.cleaner_gauges import register_cleaner_gauges
from broker.partition import Partition
from common.names import TopicPartition

if TYPE_CHECKING:
    from broker.fetch_session import FetchSessionCache
    from broker.metrics import BrokerMetrics
    from broker.replication_quota import ReplicationQuotas
    from broker.storage.log_manager import LogManager


def register_replica_gauges(m: BrokerMetrics, partitions: dict[TopicPartition, Partition],
                            offline_replicas: dict[TopicPartition, str],
                            sessions: FetchSessionCache, log_manager: LogManager,
                            quotas: ReplicationQuotas,
                            leader_held_back: Callable[[], int]) -> None:
    """``leader_held_back()``: the partitions the leader quota held back at the last fetch."""
    parts = lambda: list(partitions.values())  # noqa: E731
    m.gauge("kafka_server_replicamanager_partitioncount", "partitions on this broker",
            lambda: len(parts()))
    m.gauge("kafka_server_replicamanager_leadercount", "partitions led by this broker",
            lambda: sum(p.is_leader for p in parts()))
    m.gauge("kafka_server_replicamanager_underreplicatedpartitions",
            "led partitions whose ISR is smaller than their replicas",
            lambda: sum(p.under_replicated for p in parts()))
    m.gauge("kafka_server_replicamanager_underminisrpartitioncount",
            "led partitions whose ISR is smaller than min.insync.replicas",
            lambda: sum(p.under_min_isr for p in parts()))
    m.gauge("kafka_server_replicamanager_offlinereplicacount",
            "replicas lost with their log dir or log (KIP-112 JBOD), until re-created",
            lambda: len(offline_replicas))
    # Kafka's kafka.server:type=FetchSessionCache gauges and eviction meter (KIP-227).
    m.gauge("kafka_server_fetchsessioncache_numincrementalfetchsessions",
            "incremental fetch sessions this leader keeps", lambda: len(sessions.sessions))
    m.gauge("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "partitions in this leader's incremental fetch sessions",
            lambda: sum(len(s.partitions) for s in list(sessions.sessions.values())))
    m.gauge("kafka_log_logmanager_offlinelogdirectorycount", "offline log dirs",
            lambda: len(log_manager.offline_dirs))
    m.labelled_gauge("kafka_log_logmanager_logdirectoryoffline",
                     "1 when the log dir is offline, else 0", "logDirectory",
                     lambda: {d.path: float(not d.online) for d in log_manager.dirs})
    m.gauge("replog_replicamanager_pendingfollowerfetches",
            "follower fetches being read that keep their follower in sync (KIP-501)",
            lambda: sum(len(f.pending_fetches) for p in parts()
                        for f in list(p.followers.values())))
    register_cleaner_gauges(m, log_manager)
    # Kafka's LeaderReplication / FollowerReplication quota sensors' byte-rate.
    m.gauge("kafka_server_leaderreplication_byte_rate",
            "bytes/s sent on leader-throttled partitions (KIP-73)", quotas.leader.rate)
    m.gauge("kafka_server_followerreplication_byte_rate",
            "bytes/s received on follower-throttled partitions (KIP-73)",
            quotas.follower.rate)
    m.throttled_partitions.labels(direction="leader").set_function(
        leader_held_back)
    m.gauge("kafka_server_replicamanager_reassigningpartitions",
            "led partitions with adding or removing replicas (KIP-455)",
            lambda: sum(p.is_leader and bool(p.adding_replicas or p.removing_replicas)
                        for p in parts()))
    m.labelled_gauge("replog_reassignment_replica_lag_messages",
                     "leader LEO minus the fetch offset of each replica being added by a "
                     "reassignment", ("topic", "partition", "replica"),
                     lambda: {k: v for p in parts() for k, v in _adding_lag(p).items()})


def _adding_lag(p: Partition) -> dict[tuple[str, int, int], int]:
    """(topic, partition, replica) -> leader LEO minus the fetch offset, for each replica a
    led partition is adding (KIP-455); a replica that has not fetched yet lags by the LEO."""
    if not p.is_leader or not p.adding_replicas:
        return {}
    leo = p.log_end_offset
    out = {}
    for r in p.adding_replicas:
        f = p.followers.get(r)
        offset = f.log_end_offset if f is not None else 0
        out[(p.tp.topic, p.tp.partition, r)] = max(0, leo - max(offset, 0))
    return out

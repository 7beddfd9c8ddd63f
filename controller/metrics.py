"""The controller's Prometheus metrics, one CollectorRegistry per process (or per controller
in tests), with the names existing Kafka dashboards query (Strimzi / JMX-exporter style).

Gauges are refreshed from the context on the controller's event loop (never read by the
scrape thread while the loop mutates the context); a standby reports zeros, like Kafka's
non-active controllers.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controller.context import ControllerContext

# Milliseconds, from one ZooKeeper round trip to a failover of many partitions.
ELECTION_LATENCY_BUCKETS_MS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
                               30000)


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.active_controller_count = Gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller, 0 on a standby", registry=r)
        self.offline_partitions = Gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a live leader", registry=r)
        self.preferred_imbalance = Gauge(
            "kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
            "Partitions not led by their preferred replica", registry=r)
        self.global_partitions = Gauge(
            "kafka_controller_kafkacontroller_globalpartitioncount",
            "Partitions in the cluster", registry=r)
        self.global_topics = Gauge(
            "kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster",
            registry=r)
        self.unclean_elections = Counter(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Leaders elected from outside the ISR", registry=r)
        # Kafka's LeaderElectionRateAndTimeMs (a JMX timer: rate and latency of elections),
        # under the name Strimzi's JMX exporter gives it; as a Prometheus histogram (in ms) it
        # gives both: _count's rate and the buckets.
        # Observed once per batch of elections: from the triggering event's arrival in the
        # controller's queue until the elections are written to ZooKeeper.
        self.election_latency_ms = Histogram(
            "kafka_controller_controllerstats_leaderelectionrateandtimems",
            "Leader election latency in milliseconds (Kafka: LeaderElectionRateAndTimeMs)",
            buckets=ELECTION_LATENCY_BUCKETS_MS, registry=r)
        self.leader_elections = Counter(
            "replog_controller_leader_elections", "Leader elections by reason",
            ["reason"], registry=r)
        self.leadership_relinquished = Counter(
            "replog_controller_leadership_relinquished",
            "Leaderships given up by slow leaders (KIP-501)", registry=r)
        self.controller_epoch = Gauge(
            "replog_controller_epoch", "This controller's epoch (0 when standby)", registry=r)
        self.event_queue_size = Gauge(
            "replog_controller_event_queue_size", "Events waiting (Kafka: EventQueueSize)",
            registry=r)
        self.live_brokers = Gauge("replog_controller_live_brokers", "Registered brokers",
                                  registry=r)
        # design.md#reassignment: moves in flight, steps carried out, moves finished, and
        # transitions the state-machine tables refused (never applied).
        self.reassigning_partitions = Gauge(
            "replog_controller_reassigning_partitions",
            "Partitions with a reassignment in flight (adding or removing replicas)",
            registry=r)
        self.reassignment_steps = Counter(
            "replog_controller_reassignment_steps", "Reassignment steps carried out (1-7)",
            ["step"], registry=r)
        self.reassignments_completed = Counter(
            "replog_controller_reassignments_completed", "Partition reassignments completed",
            registry=r)
        # design.md#jbod: replicas restarted from /restart_partitions entries (lost with a log
        # dir, re-created on the same broker).
        self.restarted_partitions = Counter(
            "replog_controller_restarted_partitions",
            "Partition replicas restarted after their broker lost them with a log dir",
            registry=r)
        # design.md#kip-966: partitions below min ISR that keep eligible leaders outside the ISR.
        self.elr_partitions = Gauge(
            "replog_controller_partitions_with_elr",
            "Partitions whose ELR is not empty (KIP-966)", registry=r)
        # ... and the ELR sizes: replicas in ELRs and LastKnownELRs across the cluster (a
        # Balanced recovery waits for every LastKnownELR member).
        self.elr_replicas = Gauge(
            "replog_controller_eligible_leader_replicas",
            "Replicas in the ELRs of all partitions (KIP-966)", registry=r)
        self.last_known_elr_replicas = Gauge(
            "replog_controller_last_known_elr_replicas",
            "Replicas in the LastKnownELRs of all partitions (KIP-966)", registry=r)
        # design.md#kip-966: the Unclean Recovery Manager's tasks by how they ended (elected,
        # dropped - the partition no longer needed it -, failed), the offsets the chosen
        # replicas lacked against the best answer (0 is the goal), and its GetReplicaLogInfo
        # RPCs (one per broker per batch of partitions).
        self.unclean_recoveries = Counter(
            "replog_unclean_recoveries", "Unclean recoveries (KIP-966) by strategy and outcome",
            ["strategy", "outcome"], registry=r)
        self.unclean_recovery_offsets_discarded = Counter(
            "replog_unclean_recovery_offsets_discarded",
            "Best log end offset among the answers minus the elected replica's, summed",
            registry=r)
        self.replica_log_info_requests = Counter(
            "replog_controller_getreplicaloginfo_requests",
            "GetReplicaLogInfo RPCs sent by the Unclean Recovery Manager", registry=r)
        self.invalid_transitions = Counter(
            "replog_controller_invalid_state_transitions",
            "State transitions refused by the partition/replica state machines",
            ["kind"], registry=r)

    def refresh(self, ctx: ControllerContext | None, queue_size: int = 0) -> None:
        self.event_queue_size.set(queue_size)
        if ctx is None:
            for g in (self.active_controller_count, self.offline_partitions,
                      self.preferred_imbalance, self.global_partitions, self.global_topics,
                      self.controller_epoch, self.live_brokers,
                      self.reassigning_partitions, self.elr_partitions, self.elr_replicas,
                      self.last_known_elr_replicas):
                g.set(0)
            return
        self.active_controller_count.set(1)
        self.offline_partitions.set(ctx.offline_partition_count())
        self.preferred_imbalance.set(ctx.preferred_replica_imbalance_count())
        self.global_partitions.set(ctx.global_partition_count())
        self.global_topics.set(ctx.global_topic_count())
        self.controller_epoch.set(ctx.epoch)
        self.live_brokers.set(len(ctx.live_brokers))
        self.reassigning_partitions.set(len(ctx.reassigning_partitions()))
        self.elr_partitions.set(ctx.partitions_with_elr_count())
        elr, lke = ctx.elr_replica_counts()
        self.elr_replicas.set(elr)
        self.last_known_elr_replicas.set(lke)

"""The broker's Prometheus metrics, named as the Strimzi/JMX-exporter rules name Kafka's MBeans
(``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` ->
``kafka_server_replicamanager_underreplicatedpartitions``), so existing Kafka dashboards and
alerts work unchanged. Gauges are computed at scrape time from the replica manager's state.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from common.supervise import failures_counter


class BrokerMetrics:
    def __init__(self, broker_id: int):
        self.registry = CollectorRegistry()
        r = self.registry
        self.isr_shrinks = Counter("kafka_server_replicamanager_isrshrinks",
                                   "ISR shrinks (Kafka's IsrShrinksPerSec)", registry=r)
        self.isr_expands = Counter("kafka_server_replicamanager_isrexpands",
                                   "ISR expansions (Kafka's IsrExpandsPerSec)", registry=r)
        self.failed_isr_updates = Counter("kafka_server_replicamanager_failedisrupdates",
                                          "AlterPartition requests that failed", registry=r)
        self.produce_requests = Counter("kafka_server_brokertopicmetrics_totalproducerequests",
                                        "produce requests", registry=r)
        # Kafka's kafka.network:type=RequestMetrics,name=RequestsPerSec,request=... (a counter
        # here, like bytesin): Produce, and Fetch split as Kafka splits it, FetchFollower
        # (a replica's) and FetchConsumer. Requests per GB is what a request's fixed cost is
        # multiplied by (docs/profiles/README.md).
        self.requests = Counter("kafka_network_requestmetrics_requests",
                                "requests answered, by request type", ["request"], registry=r)
        self.fetch_follower_requests = self.requests.labels(request="FetchFollower")
        self.fetch_consumer_requests = self.requests.labels(request="FetchConsumer")
        self.produce_api_requests = self.requests.labels(request="Produce")
        self.bytes_in = Counter("kafka_server_brokertopicmetrics_bytesin",
                                "bytes appended as leader", registry=r)
        self.replication_bytes_in = Counter("kafka_server_brokertopicmetrics_replicationbytesin",
                                            "bytes appended as follower", registry=r)
        # Kafka's BrokerTopicStats.updateBytesOut: what Fetch responses carry, to consumers
        # (BytesOutPerSec) and to followers (ReplicationBytesOutPerSec), apart like bytes in.
        self.bytes_out = Counter("kafka_server_brokertopicmetrics_bytesout",
                                 "record bytes sent in Fetch responses to consumers", registry=r)
        self.replication_bytes_out = Counter(
            "kafka_server_brokertopicmetrics_replicationbytesout",
            "record bytes sent in Fetch responses to followers", registry=r)
        self.leadership_relinquished = Counter(
            "replog_leadership_relinquished", "leaderships given up because follower fetches "
            "were served too slowly (KIP-501)", registry=r)
        self.fetcher_max_lag = Gauge("kafka_server_replicafetchermanager_maxlag",
                                     "largest follower lag in messages", ["clientId"],
                                     registry=r)
        self.failed_partitions = Gauge("kafka_server_replicafetchermanager_failedpartitionscount",
                                       "partitions the fetchers stopped tracking (KIP-461)",
                                       ["clientId"], registry=r)
        self.failed_partitions.labels(clientId="Replica").set(0)
        # KIP-113: the intra-broker move copier's failed future replicas (alter_log_dirs.py
        # sets it to a live count); 0 before the replica manager is built.
        self.failed_partitions.labels(clientId="ReplicaAlterLogDirs").set(0)
        self.log_dir_failures = Counter(
            "replog_logdirfailurechannel_failures",
            "log dirs reported failed to the LogDirFailureChannel (an I/O error; KIP-112)",
            ["logDirectory"], registry=r)
        self.restart_requests = Counter(
            "replog_restart_partitions_requests",
            "/restart_partitions entries this broker wrote for replicas it lost (KIP-112 JBOD)",
            registry=r)
        self.background_failures = failures_counter(r)
        # KIP-73 replication throttles and KIP-455 reassignment traffic. Kafka's meters
        # (ReassignmentBytesInPerSec...) are counters here, like bytesin above.
        self.reassignment_bytes_in = Counter(
            "kafka_server_brokertopicmetrics_reassignmentbytesin",
            "bytes appended as a follower being added by a reassignment", registry=r)
        self.reassignment_bytes_out = Counter(
            "kafka_server_brokertopicmetrics_reassignmentbytesout",
            "bytes sent as leader to replicas being added by a reassignment", registry=r)
        self.throttled_bytes = Counter(
            "replog_replication_throttled_bytes",
            "bytes sent (leader) or received (follower) on partitions named by "
            "*.replication.throttled.replicas, as recorded against the quota (KIP-73)",
            ["direction"], registry=r)
        self.fetch_session_evictions = Counter(
            "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
            "incremental fetch sessions evicted to make room for new ones (KIP-227)",
            registry=r)
        self.throttled_partitions = Gauge(
            "replog_replication_throttled_partitions",
            "partitions held back by the replication quota at the last fetch (KIP-73)",
            ["direction"], registry=r)
        for direction in ("leader", "follower"):
            self.throttled_bytes.labels(direction=direction)
            self.throttled_partitions.labels(direction=direction).set(0)
        self._gauges: list[Gauge] = []

    def gauge(self, name: str, doc: str, fn: Callable[[], float]) -> None:
        g = Gauge(name, doc, registry=self.registry)
        g.set_function(_safe(fn))
        self._gauges.append(g)

    def labelled_gauge(self, name: str, doc: str, label: str | tuple[str, ...],
                       fn: Callable[[], dict]) -> None:
        """A gauge with one sample per label value (a tuple of values for several labels), all
        computed at scrape time (the label set changes with the broker's state, e.g. one sample
        per log dir)."""
        self.registry.register(_LabelledGauge(name, doc, label, fn))


def _safe(fn: Callable[[], float]) -> Callable[[], float]:
    # Called from the HTTP server's thread while the event loop mutates dicts: a concurrent
    # resize can raise; report the previous value's stand-in (NaN) rather than a 500.
    def call() -> float:
        try:
            return float(fn())
        except RuntimeError:
            return float("nan")
    return call


class _LabelledGauge(Collector):
    def __init__(self, name: str, doc: str, label: str | tuple[str, ...],
                 fn: Callable[[], dict]):
        self.name, self.doc, self.fn = name, doc, fn
        self.labels = [label] if isinstance(label, str) else list(label)

    def describe(self):
        return [GaugeMetricFamily(self.name, self.doc, labels=self.labels)]

    def collect(self):
        family = GaugeMetricFamily(self.name, self.doc, labels=self.labels)
        try:
            values = self.fn()
        except RuntimeError:  # a dict resized under the scrape thread: skip this scrape
            values = {}
        for key, value in values.items():
            family.add_metric([str(k) for k in key] if isinstance(key, tuple) else [key],
                              float(value))
        yield family

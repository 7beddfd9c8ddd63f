"""The broker's Prometheus metrics, named as the Strimzi/JMX-exporter rules name Kafka's MBeans
(``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` ->
``kafka_server_replicamanager_underreplicatedpartitions``), so existing Kafka dashboards and
alerts work unchanged. Gauges are computed at scrape time from the replica manager's state.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

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
        self.bytes_in = Counter("kafka_server_brokertopicmetrics_bytesin",
                                "bytes appended as leader", registry=r)
        self.replication_bytes_in = Counter("kafka_server_brokertopicmetrics_replicationbytesin",
                                            "bytes appended as follower", registry=r)
        self.leadership_relinquished = Counter(
            "replog_leadership_relinquished", "leaderships given up because follower fetches "
            "were served too slowly (seed 002)", registry=r)
        self.fetcher_max_lag = Gauge("kafka_server_replicafetchermanager_maxlag",
                                     "largest follower lag in messages", ["clientId"],
                                     registry=r)
        self.failed_partitions = Gauge("kafka_server_replicafetchermanager_failedpartitionscount",
                                       "partitions the fetchers stopped tracking (KIP-461)",
                                       ["clientId"], registry=r)
        self.failed_partitions.labels(clientId="Replica").set(0)
        self.background_failures = failures_counter(r)
        self._gauges: list[Gauge] = []

    def gauge(self, name: str, doc: str, fn: Callable[[], float]) -> None:
        g = Gauge(name, doc, registry=self.registry)
        g.set_function(_safe(fn))
        self._gauges.append(g)


def _safe(fn: Callable[[], float]) -> Callable[[], float]:
    # Called from the HTTP server's thread while the event loop mutates dicts: a concurrent
    # resize can raise; report the previous value's stand-in (NaN) rather than a 500.
    def call() -> float:
        try:
            return float(fn())
        except RuntimeError:
            return float("nan")
    return call

"""The log cleaner's gauges, named as the Strimzi/JMX-exporter rules name Kafka's MBeans
(``kafka.log:type=LogCleaner,name=max-buffer-utilization-percent`` ->
``kafka_log_logcleaner_max_buffer_utilization_percent``; design.md#compaction). Computed at
scrape time; 0 while the cleaner is disabled (log.cleaner.enable=false)."""

from __future__ import annotations

from collections.abc import Callable

from broker.metrics import BrokerMetrics
from broker.storage.log_cleaner import LogCleaner
from broker.storage.log_manager import LogManager


def register_cleaner_gauges(m: BrokerMetrics, log_manager: LogManager) -> None:
    def of(fn: Callable[[LogCleaner], float]) -> Callable[[], float]:
        return lambda: 0 if log_manager.cleaner is None else fn(log_manager.cleaner)

    # kafka.log:type=LogCleaner
    m.gauge("kafka_log_logcleaner_max_buffer_utilization_percent",
            "fullest offset map of the cleaners' last rounds, percent",
            of(LogCleaner.max_buffer_utilization_percent))
    m.gauge("kafka_log_logcleaner_cleaner_recopy_percent",
            "bytes written over bytes read by the cleaners' last rounds, percent",
            of(LogCleaner.cleaner_recopy_percent))
    m.gauge("kafka_log_logcleaner_max_clean_time_secs",
            "longest of the cleaners' last rounds, seconds", of(LogCleaner.max_clean_time_secs))
    m.gauge("kafka_log_logcleaner_max_compaction_delay_secs",
            "how far past max.compaction.lag.ms the most overdue log was at the last choice",
            of(LogCleaner.max_compaction_delay_secs))
    m.gauge("kafka_log_logcleaner_deadthreadcount", "cleaner threads that died",
            of(LogCleaner.dead_thread_count))
    # kafka.log:type=LogCleanerManager
    m.gauge("kafka_log_logcleanermanager_max_dirty_percent",
            "dirty ratio of the dirtiest compacted log at the last choice, percent",
            of(LogCleaner.max_dirty_percent))
    m.gauge("kafka_log_logcleanermanager_time_since_last_run_ms",
            "milliseconds since a cleaner last chose a log to clean",
            of(LogCleaner.time_since_last_run_ms))
    m.labelled_gauge("kafka_log_logcleanermanager_uncleanable_partitions_count",
                     "partitions whose cleaning failed, by log dir", "logDirectory",
                     lambda: {} if log_manager.cleaner is None else
                     {d.path: len(log_manager.cleaner.manager.uncleanable(d.path))
                      for d in log_manager.dirs})
    m.labelled_gauge("kafka_log_logcleanermanager_uncleanable_bytes",
                     "cleanable bytes of the uncleanable partitions, by log dir",
                     "logDirectory",
                     lambda: {} if log_manager.cleaner is None else
                     {d.path: log_manager.cleaner.manager.uncleanable_bytes(d.path)
                      for d in log_manager.dirs})

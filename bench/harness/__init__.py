"""The cluster harness the benchmarks share (``bench_cluster``, ``bench_client``): start the
benchmark cluster, measure its processes' CPU, tail their event logs, and talk to its brokers
straight over gRPC.

- ``cluster``: the benchmark ``LocalCluster`` (``start_cluster``), its pids, balanced replica
  assignments;
- ``cpu``: ``CpuMeter``, user+sys CPU seconds of fixed processes between start and stop;
- ``events``: ``EventTail``, the new events of a process's JSON-lines event log;
- ``brokers``: ``Brokers`` (grpc.aio channels, pre-serialized Produce, Metadata), the
  running brokers' view of a topic and waits on it, ``restore`` after a broker came back;
- ``prober``: ``Prober`` and ``ProducerLoad``, the clients that watch availability while a
  broker is killed or shut down (imported from there, not re-exported here).
- ``runner``: ``run_each`` and ``report``, the run / print / save skeleton of a cluster
  benchmark (imported from there).
"""

from bench.harness.brokers import (
    Brokers,
    isr_full,
    preferred_leads,
    restore,
    topic_view,
    wait_partitions,
)
from bench.harness.cluster import (
    CLUSTER_OVERRIDES,
    SESSION_TIMEOUT_MS,
    cluster_pids,
    rotating_assignment,
    start_cluster,
    zk_pid,
)
from bench.harness.cpu import CpuMeter, proc_cpu
from bench.harness.events import EventTail, parse_ts

__all__ = ["CLUSTER_OVERRIDES", "SESSION_TIMEOUT_MS", "Brokers", "CpuMeter", "EventTail",
           "cluster_pids", "isr_full", "parse_ts", "preferred_leads", "proc_cpu", "restore",
           "rotating_assignment", "start_cluster", "topic_view", "wait_partitions", "zk_pid"]

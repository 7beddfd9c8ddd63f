"""Observability plumbing shared by every process: the structlog JSON event log and the
Prometheus ``/metrics`` endpoint.

Events are one JSON object per line (``event``, ``timestamp``, ``process`` and the fields of the
event: partition, epochs, brokers...), written to a file per process so that ``replog analyze``
(PySpark) can read them afterwards. Metric names follow the Strimzi/JMX-exporter convention that
existing Kafka dashboards query (``kafka_server_replicamanager_underreplicatedpartitions``...).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, disable_created_metrics, start_http_server

# Kafka's exporters publish no "_created" series; dashboards do not expect them.
disable_created_metrics()


def configure_event_log(path: str | None, process: str, **context: Any):
    """Return a structlog logger writing JSON lines to ``path`` (stderr when None)."""
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        stream = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - process lifetime
    else:
        stream = sys.stderr
    logger = structlog.wrap_logger(
        structlog.PrintLogger(stream),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False),
        ],
        cache_logger_on_first_use=True,
    )
    return logger.bind(process=process, pid=os.getpid(), **context)


def start_metrics_endpoint(registry: CollectorRegistry, port: int = 0,
                           host: str = "127.0.0.1") -> int:
    """Serve ``registry`` on http://host:port/metrics; returns the bound port."""
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server.server_port


def dump_stacks_on_sigusr1(loop) -> None:
    """``kill -USR1 <pid>`` prints every thread's stack and every asyncio task's to stderr (the
    process log): what a hung process waits on. The local cluster sends it before it SIGKILLs
    a process that did not stop in time (harness/local_cluster.py), as ``jstack`` would be run
    on a Kafka broker that would not shut down."""
    import faulthandler
    import signal

    def dump() -> None:
        print("--- SIGUSR1: asyncio tasks ---", file=sys.stderr, flush=True)
        import asyncio
        for task in asyncio.all_tasks(loop):
            print(f"{task!r}", file=sys.stderr)
            for f in task.get_stack(limit=12):  # print_stack trips on frames without a line
                print(f"    {f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}",
                      file=sys.stderr)
        print("--- SIGUSR1: threads ---", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
    loop.add_signal_handler(signal.SIGUSR1, dump)


def quiet_third_party_logs() -> None:
    for name in ("kazoo", "kazoo.client", "grpc", "asyncio"):
        logging.getLogger(name).setLevel(logging.WARNING)

"""The controller process: `run(config) -> int` (what `replog controller --config FILE` calls).

Wires the pieces: a kazoo client bridged into asyncio (common/zk_async.py), the Controller
(election, event queue, decisions), the gRPC server with the Controller service and the standard
health service, the Prometheus endpoint (`metrics.port`) and the structlog JSON event log
(`event.log.file`). SIGTERM/SIGINT stop it gracefully: health goes NOT_SERVING, the controller
resigns and deletes /controller (a standby takes over at once), in-flight RPCs get a grace
period, then the ZooKeeper session is closed.

Health: service "" is SERVING while the process runs; "replog.v1.Controller" is SERVING only
while this candidate is the active controller (NOT_SERVING on a standby), so a load balancer
or a compose healthcheck can tell the two apart.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
import sys
from collections.abc import Mapping
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from kazoo.handlers.threading import KazooTimeoutError
from prometheus_client import CollectorRegistry

from common import event_loop
from common.clock import wall_ms
from common.listener_servers import bind_listeners
from common.listeners import advertised_endpoints, listener_config
from common.observability import (
    configure_event_log,
    dump_stacks_on_sigusr1,
    quiet_third_party_logs,
    start_metrics_endpoint,
)
from common.rpc import replog_pb2_grpc
from common.security.authorizer import AclAuthorizer
from common.security.listener_security import channel_factory_for, principal_builder_for
from common.security.zk_auth import zk_security
from common.zk_async import AsyncZk
from common.zk_layout import ControllerInfo
from controller.controller import Controller
from controller.elr import config_warnings
from controller.metrics import ControllerMetrics
from controller.servicer import ControllerServicer

SERVICE_NAME = "replog.v1.Controller"


class ControllerServer:
    """One controller candidate process (usable in-process by tests)."""

    def __init__(self, config: Mapping[str, Any], *, events=None,
                 registry: CollectorRegistry | None = None, serve_metrics: bool = True):
        self.config = config
        self.controller_id = int(config["controller.id"])
        self.events = events
        self.metrics = ControllerMetrics(registry)
        self.serve_metrics = serve_metrics
        self.metrics_port: int | None = None
        self.zk: AsyncZk | None = None
        self.servers: list[grpc.aio.Server] = []  # one per listener (KIP-103)
        self.health = HealthServicer()
        self.controller: Controller | None = None
        self.authorizer: AclAuthorizer | None = None
        self.address = ""

    async def start(self) -> None:
        cfg = self.config
        # AsyncZk.start creates a missing chroot (with its ACL under zookeeper.set.acl).
        self.zk = AsyncZk(cfg["zookeeper.connect"],
                          session_timeout_ms=cfg["zookeeper.session.timeout.ms"],
                          connection_timeout_ms=cfg["zookeeper.connection.timeout.ms"],
                          security=zk_security(cfg))
        await self.zk.start()
        # authorizer.class.name: Kafka's AclAuthorizer on this ZooKeeper (None: allow all)
        self.authorizer = AclAuthorizer.from_config(cfg, self.zk, self.events)
        if self.authorizer is not None:
            await self.authorizer.start()

        # KIP-103: one gRPC server per listener, each with its own servicer, so DescribeCluster
        # answers with the brokers' endpoints on the listener the request came in on.
        listeners = listener_config(cfg)
        bound = bind_listeners(listeners.listeners, cfg)
        self.servers = [b.server for b in bound]
        endpoints = advertised_endpoints(listeners, {b.listener: b.port for b in bound},
                                         socket.gethostname())
        # /controller's host/port: the inter-broker listener, where brokers send
        # AlterPartition and ControlledShutdown; its endpoints: every advertised listener.
        inter = next(e for e in endpoints if e.listener == listeners.inter_broker_listener_name)
        self.address = inter.address
        endpoint = ControllerInfo(self.controller_id, inter.host, inter.port,
                                  wall_ms(), endpoints)

        self.controller = Controller(
            controller_id=self.controller_id, zk=self.zk, endpoint=endpoint, config=cfg,
            metrics=self.metrics, events=self.events, on_active_change=self._on_active_change,
            # TLS to the brokers when the listener they are reached on is SSL
            channel_factory=channel_factory_for(cfg, listeners.controller_to_broker_listener))
        for b in bound:
            replog_pb2_grpc.add_ControllerServicer_to_server(
                ControllerServicer(self.controller, listener=b.listener,
                                   principal_builder=principal_builder_for(cfg, b.listener),
                                   authorizer=self.authorizer), b.server)
            health_pb2_grpc.add_HealthServicer_to_server(self.health, b.server)
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        await self.health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.NOT_SERVING)
        for b in bound:
            await b.server.start()
        await self.controller.start()
        if self.serve_metrics and cfg["metrics.port"] is not None:
            self.metrics_port = start_metrics_endpoint(self.metrics.registry,
                                                       cfg["metrics.port"], host="0.0.0.0")

    def _on_active_change(self, active: bool) -> None:
        status = (health_pb2.HealthCheckResponse.SERVING if active
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        asyncio.get_running_loop().create_task(self.health.set(SERVICE_NAME, status))
        if active:
            # The loaded context lives as long as this activation: keep the cyclic GC from
            # re-scanning it on every full collection (CPython's gc.freeze). A process-level
            # choice, so it is made here and not in the controller.
            gc.freeze()

    async def stop(self, grace_s: float = 5.0) -> None:
        await self.health.enter_graceful_shutdown()
        if self.controller is not None:
            await self.controller.stop()
        if self.servers:
            await asyncio.gather(*(s.stop(grace_s) for s in self.servers))
        if self.authorizer is not None:
            await self.authorizer.stop()
        if self.zk is not None:
            await self.zk.stop()


async def _main(config: Mapping[str, Any]) -> int:
    events = configure_event_log(config["event.log.file"], "controller",
                                 controller_id=config["controller.id"])
    # design.md#kip-966: conflicting or inert recovery settings are accepted, with a warning line.
    for warning in config_warnings(config):
        events.warning("config_warning", message=warning)
    server = ControllerServer(config, events=events)
    try:
        await server.start()
    except (KazooTimeoutError, OSError, RuntimeError) as e:
        print(f"replog controller: cannot start: {e}", file=sys.stderr)
        try:
            await server.stop(0)
        except Exception:  # noqa: BLE001, S110 - already failing; report the first error
            pass
        return 1
    print(f"controller {server.controller_id} listening on {server.address}"
          + (f", metrics on :{server.metrics_port}" if server.metrics_port else ""),
          flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    dump_stacks_on_sigusr1(loop)
    await stop.wait()
    await server.stop()
    return 0


def run(config: Mapping[str, Any]) -> int:
    """Process main: serve until SIGTERM/SIGINT; 0 on a clean stop, 1 if it cannot start."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_third_party_logs()
    # The controller allocates ~10 objects per partition on every failover and broker event;
    # CPython's default gen-0 threshold (700) makes it collect thousands of times per event
    # at 100k partitions. Collect less often (measured: 100k-partition failover 10.8 -> 6.9 s).
    gc.set_threshold(50_000, 20, 20)
    try:
        return event_loop.run(_main(config))
    except KeyboardInterrupt:
        return 0

"""The broker process (``replog broker --config FILE``): wiring and lifecycle only.

Start-up order (each step needs the previous one):
  1. ZooKeeper session; the cluster id (created by the first broker, as in Kafka).
  2. Log dirs loaded and recovered (meta.properties must match broker.id and cluster.id).
  3. gRPC server serving (Broker service + standard health) and /metrics.
  4. Registration ``/brokers/ids/<id>`` (ephemeral; its czxid is the broker epoch) — only now,
     so that the controller can reach every broker it sees registered.
Shut-down on SIGTERM/SIGINT: controlled shutdown first (``controlled.shutdown.enable``: the
controller moves this broker's leaderships away and the broker exits only after that), then
fetchers, gRPC, logs (clean-shutdown marker), and the ZooKeeper session last.
A ZooKeeper session loss re-registers with a new broker epoch once reconnected.

Log-dir failure (design.md#jbod): a dir unreadable at start-up is offline from the start and the
broker comes up on the others; a dir failing later is taken offline by the replica manager,
which asks the controller to restart its partitions through ``restarts`` (/restart_partitions)
and has the registration rewritten to show the dir offline. When the last dir goes the broker
halts (``_halt``): one line on stderr, exit code 1, as Kafka's Exit.halt(1).
"""

from __future__ import annotations

import asyncio
import base64
import gc
import os
import signal
import sys
import threading
import time
import uuid

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from kazoo.exceptions import NodeExistsError

from broker.alter_partition import AlterPartitionManager
from broker.auto_topic_creation import AutoTopicCreation
from broker.config_manager import ConfigManager
from broker.controller_client import ControllerClient
from broker.fault_injection import InjectedClock, watch_fault_file
from broker.fetcher import ReplicaFetcherManager
from broker.group.coordinator import GroupCoordinator
from broker.group_gauges import register_group_gauges
from broker.kafka_connections import ConnectionSettings
from broker.kafka_listener import KafkaListener
from broker.metadata_cache import BrokerNode, MetadataCache
from broker.metrics import BrokerMetrics
from broker.replica_manager import ReplicaManager
from broker.restart_notifier import (
    RestartNotifier,
    forget_lost_replicas,
    read_lost_replicas,
    record_lost_copies,
)
from broker.servicer import BrokerServicer
from broker.storage.fileops import FaultInjectingFileOps
from broker.storage.log import LogConfig
from broker.storage.log_cleaner import CleanerConfig
from broker.storage.log_manager import LogManager
from common import event_loop
from common import zk_layout as zl
from common.clock import wall_ms
from common.config import Config
from common.listener_servers import bind_listeners
from common.listeners import EndPoint, advertised_endpoints, listener_config
from common.observability import (
    configure_event_log,
    dump_stacks_on_sigusr1,
    quiet_third_party_logs,
    start_metrics_endpoint,
)
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.security.authorizer import AclAuthorizer
from common.security.listener_security import (
    channel_factory_for,
    kafka_listener_tls,
    principal_builder_for,
)
from common.security.zk_auth import zk_security
from common.supervise import supervised
from common.zk_async import AsyncZk


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class BrokerServer:
    def __init__(self, config: Config):
        self.config = config
        self.broker_id = config["broker.id"]
        self.events = configure_event_log(config["event.log.file"], "broker",
                                          broker=self.broker_id)
        self.metrics = BrokerMetrics(self.broker_id)
        self.zk = AsyncZk(config["zookeeper.connect"], config["zookeeper.session.timeout.ms"],
                          config["zookeeper.connection.timeout.ms"], security=zk_security(config))
        self.metadata = MetadataCache()
        # authorizer.class.name: Kafka's AclAuthorizer on this ZooKeeper (None: allow all)
        self.authorizer = AclAuthorizer.from_config(config, self.zk, self.events)
        # TLS to the controller and to leaders when the inter-broker listener is SSL
        self.inter_broker_channels = channel_factory_for(
            config, listener_config(config).inter_broker_listener_name)
        self.controller = ControllerClient(self.inter_broker_channels)
        self.stopping = asyncio.Event()
        self.log_manager: LogManager | None = None
        self.rm: ReplicaManager | None = None
        self.groups: GroupCoordinator | None = None
        self.configs: ConfigManager | None = None
        self.servers: list[grpc.aio.Server] = []  # one per listener (KIP-103)
        self.kafka_listeners: list[KafkaListener] = []  # kafka.listener.names (design.md#c12)
        self.endpoints: tuple[EndPoint, ...] = ()  # advertised, as registered
        self.security_protocols: tuple[tuple[str, str], ...] = ()  # the non-PLAINTEXT ones
        self.host = "127.0.0.1"  # the inter-broker listener's advertised host and port
        self.port = -1
        self.metrics_port: int | None = None
        self._tasks: list[asyncio.Task] = []
        self._session_lost = False
        self.restarts = RestartNotifier(
            self.broker_id, lambda: self.rm.broker_epoch if self.rm is not None else -1,
            self._write_restart_entry, self.events, self.metrics.restart_requests,
            record_lost=self._record_lost_copies)
        self._registration_update: asyncio.Task | None = None

    # ------------------------------------------------------------------ start

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await self.zk.start()
        self.zk.on_state_change(self._on_zk_state)
        for path in zl.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)
        cluster_id = await self._cluster_id()
        self.metadata.cluster_id = cluster_id
        if self.authorizer is not None:  # ACLs loaded before any listener serves
            await self.authorizer.start()
        fileops = None
        self._clock = wall_ms
        fault_file = self.config["fault.injection.file"]
        if fault_file:
            fileops = FaultInjectingFileOps()
            self._clock = InjectedClock()  # the file's clock rule moves it (chaos "clock")
            self._tasks.append(loop.create_task(
                watch_fault_file(fault_file, fileops, self.events, clock=self._clock),
                name="fault-injection"))
        lost = await read_lost_replicas(self.zk, self.broker_id)
        self.log_manager = LogManager(self.config["log.dirs"], self.broker_id,
                                      LogConfig.from_config(self.config), cluster_id=cluster_id,
                                      fileops=fileops, lost_replicas=lost,
                                      cleaner_config=CleanerConfig.from_config(self.config),
                                      events=self.events)
        await loop.run_in_executor(None, self.log_manager.startup)
        # KIP-966: once a controller has handled an unclean start, the registration says so
        # (a later failover must not depose this broker again; LogManager.registration_clean)
        self.log_manager.on_unclean_start_handled = lambda: loop.call_soon_threadsafe(
            self._rewrite_registration)
        for tp, log_dir in self.log_manager.set_aside:
            self.events.warning("lost_replica_set_aside", partition=str(tp), log_dir=log_dir)
        # Before registering: no log is created until then, so what the dirs read now hold is
        # all that was lost there (restart_notifier.py).
        await forget_lost_replicas(self.zk, self.broker_id,
                                   [d.path for d in self.log_manager.online_dirs])
        for d in self.log_manager.offline_dirs:
            self.events.error("log_dir_offline", log_dir=d.path, error=d.error, partitions=[])
        for tp, stale, kept in self.log_manager.stale_copies_deleted:
            self.events.warning("stale_replica_deleted", partition=str(tp), log_dir=stale,
                                kept_in=kept)

        # The fetchers and AlterPartition read the broker epoch the replica manager holds
        # (set at each registration); the lambdas read it when they send, not now.
        fetchers = ReplicaFetcherManager(
            self.broker_id, lambda: self.rm.broker_epoch, self.config, self.log_manager,
            self.metrics, self.events, channel_factory=self.inter_broker_channels)
        alter_partition = AlterPartitionManager(
            self.broker_id, lambda: self.rm.broker_epoch, self.controller, self.metrics,
            self.events)
        self.rm = ReplicaManager(self.broker_id, self.config, self.log_manager, self.metadata,
                                 self.metrics, self.events, self._load_topic_config,
                                 self._clock, fetcher_manager=fetchers, alter_partition=alter_partition,  # noqa: E501
                                 restart_notifier=self.restarts, halt=self._halt,
                                 on_log_dir_offline=self._log_dir_went_offline)
        self.rm.registered = False  # controller requests are refused until _register()
        # the group coordinator (docs/groups.md): follows this broker's leadership of
        # __consumer_offsets through rm.on_leadership_change, before any LeaderAndIsr
        self.groups = GroupCoordinator.from_config(self.rm, self.config, self.events)
        self.groups.start()
        register_group_gauges(self.metrics, self.groups, self.rm)
        alter_partition.start()
        # Dynamic configs are read before registering, so no LeaderAndIsr is applied with a
        # broker-level min ISR older than ZooKeeper's.
        self.configs = ConfigManager(self.zk, self.broker_id, self.config, self.rm, self.events)
        await self.configs.start()

        # KIP-103: one gRPC server per listener, each with its own servicer, so a Metadata
        # answer gives the endpoints of the listener the request came in on.
        listeners = listener_config(self.config)
        self.health = health.aio.HealthServicer()
        bound = bind_listeners(tuple(e for e in listeners.listeners
                                     if not listeners.is_kafka(e.listener)), self.config)
        kafka_ports = {}
        # one per broker, as Kafka's AutoTopicCreationManager: behind every front-end
        auto_topics = AutoTopicCreation(self.controller, self.config)
        for e in listeners.listeners:
            if listeners.is_kafka(e.listener):
                k = KafkaListener(self.rm, self.broker_id, e.listener, e.host, e.port,
                                  self.events, self.config["socket.request.max.bytes"],
                                  controller=self.controller, configs=self.configs,
                                  authorizer=self.authorizer, auto_topics=auto_topics,
                                  connections=ConnectionSettings.from_config(self.config),
                                  groups=self.groups,
                                  **kafka_listener_tls(self.config, e.listener))
                kafka_ports[e.listener] = await k.start()
                self.kafka_listeners.append(k)
        for b in bound:
            replog_pb2_grpc.add_BrokerServicer_to_server(
                BrokerServicer(self.rm, self.broker_id, self.configs, listener=b.listener,
                               principal_builder=principal_builder_for(self.config, b.listener),
                               authorizer=self.authorizer, auto_topics=auto_topics),
                b.server)
            health_pb2_grpc.add_HealthServicer_to_server(self.health, b.server)
            await b.server.start()
            self.servers.append(b.server)
        # The registration's endpoints; host/port are the inter-broker listener's (where the
        # controller and followers connect). A wildcard host is registered as loopback, as
        # before listeners had names.
        self.endpoints = advertised_endpoints(
            listeners, {**{b.listener: b.port for b in bound}, **kafka_ports}, "127.0.0.1")
        # the registration's listener_security_protocol_map (listeners not named: PLAINTEXT)
        self.security_protocols = tuple(sorted(
            (e.listener, listeners.protocol(e.listener)) for e in self.endpoints
            if listeners.protocol(e.listener) != "PLAINTEXT"))
        inter = next(e for e in self.endpoints
                     if e.listener == listeners.inter_broker_listener_name)
        self.host, self.port = inter.host, inter.port
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        await self.health.set("replog.v1.Broker", health_pb2.HealthCheckResponse.SERVING)
        if self.config["metrics.port"] is not None:
            # On the first gRPC listener's interface: loopback for a local cluster, every
            # interface in a container (listeners=0.0.0.0:9092) so Prometheus can scrape it.
            self.metrics_port = start_metrics_endpoint(self.metrics.registry,
                                                       self.config["metrics.port"],
                                                       host=listeners.listeners[0].host)

        await self._register()
        await self._refresh_controller()
        self._tasks += [loop.create_task(
            supervised(n, f, self.events, self.metrics.background_failures), name=n)
            for n, f in (("isr-expiration", self.rm.isr_expiration_loop),
                         ("log-dir-failures", self.rm.log_dir_failure_loop),
                         ("restart-partitions", self.restarts.run),
                         ("hw-checkpoint", self.rm.checkpoint_loop),
                         ("log-retention", self.rm.retention_loop),
                         ("config-changes", self.configs.run))]
        self.events.info("broker_started", address=f"{self.host}:{self.port}",
                         endpoints=[str(e) for e in self.endpoints],
                         broker_epoch=self.rm.broker_epoch, metrics_port=self.metrics_port,
                         log_dirs=[d.path for d in self.log_manager.dirs],
                         clean_shutdown=self.log_manager.had_clean_shutdown)
        print(f"replog broker {self.broker_id} listening on {self.host}:{self.port}"
              + (f" ({', '.join(map(str, self.endpoints))})" if len(self.endpoints) > 1 else "")
              + (f", metrics on :{self.metrics_port}" if self.metrics_port else ""), flush=True)

    async def _cluster_id(self) -> str:
        got = await self.zk.get_or_none(zl.CLUSTER_ID)
        if got is None:
            try:
                await self.zk.create(zl.CLUSTER_ID, zl.encode_cluster_id(new_cluster_id()))
            except NodeExistsError:
                pass
            got = await self.zk.get(zl.CLUSTER_ID)
        return zl.decode_cluster_id(got[0])

    def _registration(self) -> zl.BrokerRegistration:
        lm = self.log_manager
        return zl.BrokerRegistration(
            self.broker_id, self.host, self.port, self.config["broker.rack"],
            tuple(zl.LogDirInfo(d.path, d.directory_id or "", d.online) for d in lm.dirs),
            lm.registration_clean,
            # where the endpoint is reachable: the broker's registered (advertised) host, not
            # loopback - a broker on a host of its own (cluster up --hosts) or in a container
            # is not scraped on 127.0.0.1
            f"http://{self.host}:{self.metrics_port}/metrics" if self.metrics_port else None,
            wall_ms(), endpoints=self.endpoints, security_protocols=self.security_protocols)

    async def _register(self) -> None:
        lm = self.log_manager
        reg = self._registration()
        path = zl.broker_path(self.broker_id)
        deadline = time.monotonic() + self.config["zookeeper.session.timeout.ms"] / 1000 + 5
        while True:
            try:
                await self.zk.create(path, zl.encode_broker(reg), ephemeral=True)
                break
            except NodeExistsError:
                # Our previous session's ephemeral node lingers until that session expires.
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        stat = await self.zk.exists(path)
        self.rm.broker_epoch = stat.czxid
        self.rm.registered = True
        self.events.info("broker_registered", broker_epoch=stat.czxid,
                         clean_shutdown=lm.had_clean_shutdown)

    # ------------------------------------------------------------------ log-dir failure

    async def _write_restart_entry(self, data: bytes) -> str:
        """design.md#jbod-step-2-4 as ZooKeeper's Queue recipe: a persistent sequential child."""
        return await self.zk.create(zl.restart_entry_path(zl.RESTART_ENTRY_PREFIX), data,
                                    sequence=True)

    async def _record_lost_copies(self, entry) -> None:
        await record_lost_copies(self.zk, entry,
                                 [d.path for d in self.log_manager.offline_dirs])

    def _log_dir_went_offline(self, _log_dir: str) -> None:
        """Rewrite /brokers/ids/<id> so it shows the offline dir."""
        self._rewrite_registration()

    def _rewrite_registration(self) -> None:
        """Rewrite /brokers/ids/<id> with the current state (its czxid - the broker epoch - is
        unchanged by a set). Retried until written; a re-registration after a session loss
        writes the current state anyway."""
        if self._registration_update is None or self._registration_update.done():
            self._registration_update = asyncio.ensure_future(self._update_registration())

    async def _update_registration(self) -> None:
        delay = 0.2
        while not self.stopping.is_set():
            try:
                await asyncio.wait_for(self.zk.set(zl.broker_path(self.broker_id),
                                                   zl.encode_broker(self._registration())), 10)
                self.events.info("broker_registration_updated",
                                 offline_log_dirs=[d.path for d in self.log_manager.offline_dirs],
                                 clean_shutdown=self.log_manager.registration_clean)
                return
            except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable: retry
                self.events.warning("broker_registration_update_failed", error=str(e)[:200])
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _halt(self, message: str) -> None:
        """Kafka's Exit.halt(1) when no log dir is left: one line on stderr (the event log has
        ``broker_halting``), the ZooKeeper session closed if that is quick - so the controller
        sees the broker gone at once, not after the session timeout - then exit 1 without
        running anything else (a clean shutdown would write to dead disks)."""
        print(f"FATAL: {message}", file=sys.stderr, flush=True)
        closer = threading.Thread(target=self.zk.client.stop, daemon=True)
        closer.start()
        closer.join(timeout=3)
        os._exit(1)

    async def _load_topic_config(self, topic: str) -> dict[str, str]:
        """The topic's overrides; MalformedZnode naming the znode when it cannot be read
        (broker/topic_config_state.py keeps the config held then)."""
        path = zl.topic_config_path(topic)
        got = await self.zk.get_or_none(path)
        return zl.decode_at(path, got[0], zl.decode_topic_config) if got else {}

    # ------------------------------------------------------------------ controller tracking

    async def _refresh_controller(self, _event=None) -> None:
        watch = self.zk.watcher(self._on_controller_event)
        got = await self.zk.get_or_none(zl.CONTROLLER, watch=watch)
        if got is None:
            if await self.zk.exists(zl.CONTROLLER, watch=watch) is not None:
                await self._refresh_controller()
                return
            self._set_controller(None)
            return
        try:
            info = zl.decode_controller(got[0])
        except zl.MalformedZnode as e:
            # No controller can be read from it: none is known (the one held lost the znode)
            # until the next write, which the watch just set reports.
            self.events.error("controller_znode_malformed", znode=zl.CONTROLLER,
                              error=str(e)[:300])
            info = None
        self._set_controller(info)

    def _set_controller(self, info: zl.ControllerInfo | None) -> None:
        """The controller this broker sends AlterPartition and the rest to, and the one its
        Metadata answers name (clients find it there for admin operations); None: none known."""
        if info is None:
            self.controller.set_controller(-1, None)
            self.metadata.controller_id, self.metadata.controller = -1, None
            return
        self.controller.set_controller(info.controller_id, info.address)
        self.metadata.controller_id = info.controller_id
        self.metadata.controller = BrokerNode(info.controller_id, info.host, info.port,
                                            endpoints=info.endpoints)

    def _on_controller_event(self, _event) -> None:
        if not self.stopping.is_set():
            asyncio.ensure_future(self._refresh_controller())

    def _on_zk_state(self, state: str) -> None:
        if state == "LOST":
            self._session_lost = True
            self.events.warning("zookeeper_session_lost")
        if state == "CONNECTED" and self.configs is not None:
            self.configs.wake()  # a new session has no watches; changes may have been missed
        if state == "CONNECTED" and self._session_lost and not self.stopping.is_set():
            self._session_lost = False
            asyncio.ensure_future(self._reregister())

    async def _reregister(self) -> None:
        try:
            await self._register()
            await self._refresh_controller()
        except Exception as e:  # noqa: BLE001 - keep serving; the next state change retries
            self.events.error("reregistration_failed", error=str(e))

    # ------------------------------------------------------------------ stop

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move leadership away; True once nothing is left to move."""
        retries = self.config["controlled.shutdown.max.retries"]
        backoff = min(self.config["controlled.shutdown.retry.backoff.ms"] / 1000, 1.0)
        for attempt in range(retries + 1):
            try:
                resp = await self.controller.stub().ControlledShutdown(
                    pb.ControlledShutdownRequest(broker_id=self.broker_id,
                                                 broker_epoch=self.rm.broker_epoch), timeout=30)
                remaining = [f"{p.topic}-{p.partition}" for p in resp.remaining_partitions]
                self.events.info("controlled_shutdown_response", attempt=attempt,
                                 remaining=remaining[:20], remaining_count=len(remaining))
                if not remaining:
                    return True
            except Exception as e:  # noqa: BLE001 - no controller / transport: retry
                self.events.warning("controlled_shutdown_failed", attempt=attempt,
                                    error=str(e)[:200])
            await asyncio.sleep(backoff)
        return False

    async def stop(self) -> None:
        self.stopping.set()
        if self.rm is not None and self.config["controlled.shutdown.enable"] and \
                self.rm.broker_epoch >= 0:
            ok = await self.controlled_shutdown()
            self.events.info("controlled_shutdown_done", succeeded=ok)
        for t in self._tasks:
            t.cancel()
        if self.rm is not None:
            await self.rm.fetcher_manager.shutdown()
            await self.rm.alter_log_dirs.shutdown()  # KIP-113: kept, resumed at the next start
            await self.rm.alter_partition.stop()
        for k in self.kafka_listeners:
            await k.stop()
        if self.groups is not None:
            await self.groups.stop()
        if self.servers:
            await self.health.enter_graceful_shutdown()
            await asyncio.gather(*(s.stop(grace=1.0) for s in self.servers))
        if self.log_manager is not None:
            if self.rm is not None:
                await self.rm.stop_background()
                await self.rm.checkpoint()  # after every job still queued on the dirs
            await asyncio.get_running_loop().run_in_executor(None, self.log_manager.shutdown)
        await self.controller.close()
        if self.authorizer is not None:
            await self.authorizer.stop()
        try:
            await self.zk.stop()
        except Exception:  # noqa: BLE001 - the session is going away anyway
            pass
        self.events.info("broker_stopped")

    async def main(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        dump_stacks_on_sigusr1(loop)
        try:
            await self.start()
        except Exception as e:
            self.events.error("broker_start_failed", error=str(e))
            print(f"Error: broker {self.broker_id} failed to start: {e}", file=sys.stderr)
            await self.stop()
            return 1
        await self.stopping.wait()
        await self.stop()
        return 0


def run(config: Config) -> int:
    quiet_third_party_logs()
    # Every Produce and Fetch allocates futures, protobuf messages and result objects by the
    # thousand; CPython's default gen-0 threshold (700) then collects hundreds of times a
    # second and each gen-2 pass re-scans every partition's state. Collect less often, as the
    # controller does (measured with the client, see bench/bench_client.py).
    gc.set_threshold(50_000, 20, 20)
    return event_loop.run(BrokerServer(config).main())

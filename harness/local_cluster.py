"""A local replog cluster of real processes: ZooKeeper, controller candidates and brokers.

Used by ``replog cluster up`` and by every integration and fault test. Given a data dir it

- starts a real ZooKeeper 3.8 (``harness.zk_server.ZooKeeperServer``) unless a connect string is
  given, or with ``zookeeper_nodes=3|5`` a real ensemble (``ZooKeeperEnsemble``: one data dir,
  ``myid`` and ``zoo.cfg`` per member under ``zookeeper/zookeeper-<myid>``) whose members all go
  into ``zookeeper.connect``; it uses a chroot (``/replog`` by default) so several clusters can
  share an ensemble. Members are killed and restarted with ``kill_zookeeper`` /
  ``restart_zookeeper`` (the same ports), or from outside with ``replog zookeeper --config``;
- writes ``config/controller-<id>.properties`` and ``config/broker-<id>.properties`` (Kafka
  property names) with free loopback ports for the gRPC listeners and Prometheus endpoints, log
  dirs ``broker-<id>/logdir-<n>`` and event logs ``logs/<role>-<id>.events.jsonl``;
- starts each as its own process (``python -m admin.cli broker --config ...``, stdout/stderr to
  ``logs/<role>-<id>.log``) in its own session, so a Ctrl-C in a terminal reaches only the
  supervisor, which then stops everything in order;
- waits until every broker is registered in ZooKeeper, a controller is active, and every broker
  answers Metadata naming that controller and all brokers (so a client can create topics at once);
- writes ``cluster.json`` (bootstrap servers, ZooKeeper, pids, addresses, log dirs, metrics URLs)
  only once the cluster serves (every broker registered and in every broker's metadata, every
  Kafka listener accepting; until then ``cluster.starting.json`` with ``"ready": false``), and
  rewrites it whenever a process is restarted;
- gives each broker a Kafka-protocol listener too (``KAFKA://127.0.0.1:<port>``, docs/
  kafka-protocol.md): ``kafka_bootstrap_servers`` in cluster.json is for Kafka clients;
- with ``security="mtls"`` (``replog cluster up --security mtls``) turns every listener to TLS
  with client certificates required: a CA and a certificate per process under ``ssl/``, the
  gRPC listeners named SSL, and ``client.properties`` (the admin principal's Kafka client
  properties) beside cluster.json (harness/cluster_security.py). The cluster's own health
  checks connect with the admin certificate.

The cluster is these modules: this one (``LocalCluster``: what runs, the waits, ZooKeeper
observation), harness/cluster_zookeeper.py (starting its ZooKeeper and describing it),
harness/process.py (``ProcessHandle``, one process and its faults: kill, pause, stop, restart)
and harness/cluster_dir.py (the data dir's lock, cluster.json, and ``stop_cluster_in`` behind
``replog cluster down``). Their names are importable from here too.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Self

from common import zk_layout
from common.security.zk_auth import zk_security
from harness import cluster_dir, cluster_hosts, cluster_security, cluster_zookeeper
from harness.cluster_dir import CLUSTER_JSON as CLUSTER_JSON
from harness.cluster_dir import CLUSTER_STARTING_JSON as CLUSTER_STARTING_JSON
from harness.cluster_dir import LOCK_FILE as LOCK_FILE
from harness.cluster_dir import _lock_holder as _lock_holder
from harness.cluster_dir import stop_cluster_in as stop_cluster_in
from harness.cluster_view import ClusterView
from harness.polling import Deadline, wait_until
from harness.ports import free_port  # also imported from here by harness.prometheus and tests
from harness.process import HOST as HOST
from harness.process import LocalClusterError as LocalClusterError
from harness.process import ProcessHandle as ProcessHandle
from harness.process import _port_open
from harness.process import _tail as _tail

REPO_ROOT = Path(__file__).resolve().parent.parent
SECURITY_ENV = "REPLOG_CLUSTER_SECURITY"
DEFAULT_CHROOT = "/replog"
DEFAULT_CONTROLLER_ID_BASE = 100  # controller ids apart from broker ids, for readable logs


_live_clusters: weakref.WeakSet[LocalCluster] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    # A test run or supervisor that dies without stop(): no replog process outlives it.
    for c in list(_live_clusters):
        with contextlib.suppress(Exception):
            c.stop(graceful=False)


class LocalCluster:
    """ZooKeeper + controller candidates + brokers as real processes, in ``data_dir``."""

    def __init__(self, data_dir: str | os.PathLike[str], *, brokers: int = 3,
                 controllers: int = 1, log_dirs_per_broker: int = 2,
                 zookeeper: str | None = None, chroot: str | None = DEFAULT_CHROOT,
                 overrides: Mapping[str, object] | None = None,
                 broker_overrides: Mapping[str, object] | None = None,
                 controller_overrides: Mapping[str, object] | None = None,
                 per_broker_overrides: Mapping[int, Mapping[str, object]] | None = None,
                 broker_ids: Sequence[int] | None = None,
                 controller_ids: Sequence[int] | None = None,
                 startup_timeout_s: float = 60.0, zk_tick_time_ms: int = 200,
                 python: str | None = None, zookeeper_nodes: int = 1,
                 hosts: cluster_hosts.HostsOptions | None = None,
                 security: str | None = None):
        if brokers < 0 or controllers < 1 or log_dirs_per_broker < 1:
            raise LocalClusterError("a cluster needs brokers >= 0, controllers >= 1 and "
                                    "log_dirs_per_broker >= 1")
        if zookeeper_nodes < 1:
            raise LocalClusterError(f"zookeeper_nodes must be at least 1, got {zookeeper_nodes}")
        if zookeeper_nodes > 1 and zookeeper is not None:
            raise LocalClusterError("an external ZooKeeper and zookeeper_nodes > 1 exclude "
                                    "each other: the ensemble is either started here or given")
        # REPLOG_CLUSTER_SECURITY=mtls: every cluster this process makes is secure and this
        # process's clients use the admin certificate, so an existing suite of cluster tests
        # runs unchanged on secure clusters (those that open raw plaintext channels aside).
        self._security_from_env = security is None and \
            bool(os.environ.get(SECURITY_ENV))
        security = security or os.environ.get(SECURITY_ENV) or None
        if security is not None and security not in cluster_security.SECURITY_MODES:
            raise LocalClusterError(f"unknown security mode {security!r} (expected one of "
                                    f"{', '.join(cluster_security.SECURITY_MODES)})")
        self.security = security  # "mtls": TLS with client certificates on every listener
        self._client_channels = None  # channel_factory(), made once client.properties exists
        self.data_dir = Path(data_dir).resolve()
        self.num_log_dirs = log_dirs_per_broker
        self.zookeeper_nodes = zookeeper_nodes
        self.external_zookeeper = zookeeper
        self.chroot = chroot
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.broker_overrides = {k: str(v) for k, v in (broker_overrides or {}).items()}
        self.controller_overrides = {k: str(v) for k, v in (controller_overrides or {}).items()}
        self.startup_timeout_s = startup_timeout_s
        self.zk_tick_time_ms = zk_tick_time_ms
        self.python = python or sys.executable
        self.env = dict(os.environ)
        self.env["PYTHONUNBUFFERED"] = "1"
        # Children run this checkout's code, whatever the venv's editable install points at.
        self.env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT)] + [p for p in self.env.get("PYTHONPATH", "").split(os.pathsep) if p])
        # --hosts: every process on a network namespace of its own (harness/cluster_hosts.py)
        self.hosts_options = hosts
        self.running_hosts = None
        self.zookeeper_server = None  # the standalone server this cluster started
        self.zookeeper_ensemble = None  # or the ensemble (zookeeper_nodes > 1)
        self.zookeeper_connect = ""
        self._zk = None
        self._lock_fd: int | None = None
        # Nodes start in threads (ProcessHandle.astart), and each rewrites cluster.json: two at
        # once shared the .tmp file, and the second os.replace found it gone.
        self._json_lock = threading.Lock()
        self._owns_dir = False  # set once this cluster held the data dir's lock
        self._used_ports: set[int] = set()
        self._started = False
        self._served = False  # cluster.json written: the cluster has served in this run
        ids = list(broker_ids) if broker_ids is not None else list(range(1, brokers + 1))
        cids = list(controller_ids) if controller_ids is not None else \
            list(range(DEFAULT_CONTROLLER_ID_BASE, DEFAULT_CONTROLLER_ID_BASE + controllers))
        if len(set(ids)) != len(ids) or len(set(cids)) != len(cids):
            raise LocalClusterError("broker and controller ids must be unique")
        self.controllers: dict[int, ProcessHandle] = {
            c: ProcessHandle(self, "controller", c, self._port(), self._port()) for c in cids}
        self.brokers: dict[int, ProcessHandle] = {}
        per = per_broker_overrides or {}
        for b in ids:
            self._add_broker_handle(b, per.get(b))

    # ------------------------------------------------------------------ topology

    def _port(self) -> int:
        p = free_port(exclude=self._used_ports)
        self._used_ports.add(p)
        return p

    def _add_broker_handle(self, broker_id: int, overrides: Mapping[str, object] | None
                           ) -> ProcessHandle:
        dirs = [self.data_dir / f"broker-{broker_id}" / f"logdir-{n}"
                for n in range(self.num_log_dirs)]
        h = ProcessHandle(self, "broker", broker_id, self._port(), self._port(), dirs,
                          {k: str(v) for k, v in (overrides or {}).items()},
                          kafka_port=self._port())
        self.brokers[broker_id] = h
        return h

    def broker(self, broker_id: int) -> ProcessHandle:
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise LocalClusterError(f"no broker {broker_id} in this cluster "
                                    f"(brokers: {sorted(self.brokers)})") from None

    def controller(self, controller_id: int) -> ProcessHandle:
        try:
            return self.controllers[controller_id]
        except KeyError:
            raise LocalClusterError(f"no controller {controller_id} in this cluster "
                                    f"(controllers: {sorted(self.controllers)})") from None

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(h.address for h in self.brokers.values())

    @property
    def kafka_bootstrap_servers(self) -> str:
        return ",".join(h.kafka_address for h in self.brokers.values() if h.kafka_address)

    @property
    def grpc_listener(self) -> str:
        """The name of each process's gRPC listener."""
        return cluster_security.SSL_LISTENER if self.security else "PLAINTEXT"

    @property
    def client_properties_path(self) -> Path | None:
        """The admin principal's ``--command-config`` file (None on a plaintext cluster)."""
        return self.data_dir / cluster_security.CLIENT_PROPERTIES if self.security else None

    def channel_factory(self):
        """The ChannelFactory of a client of this cluster: TLS with the admin certificate on
        a secure cluster, plaintext otherwise (pass it to ChannelPool)."""
        if self.security is None:
            from common.grpc_options import insecure_channel
            return insecure_channel
        if self._client_channels is None:
            from common.security.tls import client_channel_factory
            self._client_channels = client_channel_factory(str(self.client_properties_path))
        return self._client_channels

    @property
    def cluster_json_path(self) -> Path:
        return self.data_dir / CLUSTER_JSON

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float | None = None) -> LocalCluster:
        """Start ZooKeeper (unless external), the controllers, then the brokers; return once
        the cluster serves clients. On failure everything started is stopped again."""
        timeout = self.startup_timeout_s if timeout is None else timeout
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._acquire_lock()
        _live_clusters.add(self)
        try:
            if self.hosts_options is not None and self.running_hosts is None:
                cluster_hosts.start_hosts(self)
            if self.security is not None:
                cluster_security.write_admin_properties(self.data_dir)
                if self._security_from_env:
                    from client.transport import set_default_channel_factory
                    set_default_channel_factory(self.channel_factory())
            self._start_zookeeper()
            for h in self.controllers.values():
                h.start(wait=False)
            for h in self.brokers.values():
                h.start(wait=False)
            deadline = Deadline(timeout)
            for h in self.controllers.values():
                h.wait_ready(deadline.remaining(floor=1.0))
            self.wait_for_controller(deadline.remaining(floor=1.0))
            self.wait_for_brokers(timeout=deadline.remaining(floor=1.0))
            self.wait_for_metadata(timeout=deadline.remaining(floor=1.0))
            self.wait_for_kafka_listeners(timeout=deadline.remaining(floor=1.0))
        except BaseException:
            self.stop(graceful=False)
            raise
        # Serving now: every broker registered, in every broker's metadata with the active
        # controller, and every Kafka listener accepting. Only now does cluster.json appear
        # (it used to be written as each process was spawned, and a script that waited for it
        # met "Replication factor: 3 larger than available brokers: 1").
        self._started = True
        self._served = True
        self._write_cluster_json()
        return self

    def stop(self, graceful: bool = True, timeout: float = 60.0) -> None:
        """Brokers first (SIGTERM: controlled shutdown; in parallel), then the controllers, then
        ZooKeeper. ``graceful=False`` SIGKILLs the processes instead (fast test teardown)."""
        try:
            for group in (self.brokers.values(), self.controllers.values()):
                handles = [h for h in group if h.is_running()]
                for h in handles:
                    if graceful:
                        h.send_signal(signal.SIGTERM)
                        if h.paused:
                            h.send_signal(signal.SIGCONT)
                    else:
                        h.kill(wait=False)
                for h in handles:
                    h.stop(timeout) if graceful else h.kill()
            if self._zk is not None:
                with contextlib.suppress(Exception):
                    self._zk.stop()
                    self._zk.close()
                self._zk = None
            if self.zookeeper_server is not None:
                self.zookeeper_server.stop()
            if self.zookeeper_ensemble is not None:
                self.zookeeper_ensemble.stop()
        finally:
            self._started = False
            _live_clusters.discard(self)
            cluster_hosts.stop_hosts(self)
            with contextlib.suppress(OSError):
                self._write_cluster_json()
            self._release_lock()

    def add_broker(self, broker_id: int | None = None,
                   overrides: Mapping[str, object] | None = None, start: bool = True
                   ) -> ProcessHandle:
        """A new broker (next free id by default), started unless ``start=False``."""
        if broker_id is None:
            broker_id = max(self.brokers, default=0) + 1
        if broker_id in self.brokers:
            raise LocalClusterError(f"broker {broker_id} already exists")
        if self.running_hosts is not None:
            raise LocalClusterError("a cluster on --hosts cannot add a broker: its hosts are "
                                    "made when it starts")
        h = self._add_broker_handle(broker_id, overrides)
        if start:
            h.start()
        return h

    # ------------------------------------------------------------------ ZooKeeper

    def _start_zookeeper(self) -> None:
        self.zookeeper_connect = cluster_zookeeper.start(self)
        self.zk_client()

    @property
    def zk_security(self):
        """zookeeper.set.acl and the credentials (a secure cluster's, or cluster-wide overrides):
        the chroot is made with its ACL and this process's kazoo clients authenticate like the
        nodes."""
        secure = cluster_security.zookeeper_overrides(self.data_dir) if self.security else {}
        return zk_security({**secure, **self.overrides})

    def zookeeper_member(self, myid: int):
        """Ensemble member ``myid`` (a harness.zk_server.ZooKeeperServer)."""
        if self.zookeeper_ensemble is None:
            raise LocalClusterError("this cluster runs no ZooKeeper ensemble "
                                    "(zookeeper_nodes=1 or an external ZooKeeper)")
        try:
            return self.zookeeper_ensemble.member(myid)
        except Exception as e:  # noqa: BLE001 - ZooKeeperServerError: no such member
            raise LocalClusterError(str(e)) from None

    def zookeeper_leader(self) -> int | None:
        """The myid of the ensemble's leader (``mntr``), or None while there is no quorum."""
        self.zookeeper_member(1)  # a clear error without an ensemble
        return self.zookeeper_ensemble.leader()

    def kill_zookeeper(self, myid: int) -> None:
        """SIGKILL ensemble member ``myid``."""
        self.zookeeper_member(myid).kill()
        self._write_cluster_json()

    def restart_zookeeper(self, *myids: int, wait: bool = True, timeout: float = 60.0) -> None:
        """Start members ``myids`` again on their ports (together: restoring a lost majority
        needs them all running before any serves); with ``wait``, until each serves."""
        for myid in myids:
            self.zookeeper_member(myid).restart(wait=False)
        self._write_cluster_json()
        if wait:
            self.zookeeper_ensemble.wait_for_quorum(timeout, members=list(myids))

    def zk_client(self):
        """A started kazoo client chrooted like the cluster (shared; do not close it)."""
        if self._zk is None:
            from kazoo.client import KazooClient
            client = KazooClient(self.zookeeper_connect, timeout=10.0,
                                 **self.zk_security.kazoo_args())
            client.start(timeout=15)
            self._zk = client
        return self._zk

    def _registration_czxid(self, broker_id: int) -> int | None:
        if self._zk is None:
            return None
        stat = self._zk.exists(zk_layout.broker_path(broker_id))
        return stat.czxid if stat is not None else None

    # ZooKeeper's view of the cluster, read as chaos and the lab read it (harness/
    # cluster_view.py), without their bound: a wait here has a deadline of its own, and a
    # caller asking once ZooKeeper is back gets the answer, not a timeout of the reconnect.
    def registered_brokers(self) -> dict[int, zk_layout.BrokerRegistration]:
        return ClusterView(self).registered_brokers(timeout=None)

    def active_controller_id(self) -> int | None:
        """The id in /controller, or None while no controller is active."""
        return ClusterView(self).active_controller_id(timeout=None)

    def active_controller(self) -> ProcessHandle | None:
        cid = self.active_controller_id()
        return self.controllers.get(cid) if cid is not None else None

    def controller_epoch(self) -> int | None:
        return ClusterView(self).controller_epoch(timeout=None)

    # ------------------------------------------------------------------ waiting

    def _wait(self, what: str, check, timeout: float, handles: Iterable[ProcessHandle] = ()):
        handles = list(handles)

        def cond():
            result = check()
            if not result:
                for h in handles:
                    h._check_alive(f"while waiting for {what}")
            return result

        def timed_out(_last) -> LocalClusterError:
            tails = "\n".join(f"--- {h.log_file} ---\n{h.log_tail(15)}" for h in handles)
            return LocalClusterError(f"timed out after {timeout:.0f}s waiting for {what}"
                                     + (f"\n{tails}" if tails else ""))

        return wait_until(cond, timeout, interval=0.05, timed_out=timed_out)

    def wait_for_controller(self, timeout: float = 30.0, exclude: Iterable[int] = ()
                            ) -> int:
        """Wait until one of the controllers (not in ``exclude``) is active; return its id."""
        excluded = set(exclude)

        def check():
            cid = self.active_controller_id()
            return cid if cid in self.controllers and cid not in excluded else None

        running = [h for h in self.controllers.values() if h.is_running()]
        return self._wait("an active controller", check, timeout, running)

    def wait_for_brokers(self, ids: Iterable[int] | None = None, timeout: float = 30.0) -> None:
        """Wait until the brokers ``ids`` (default: all running) are registered."""
        want = set(ids) if ids is not None else {b for b, h in self.brokers.items()
                                                 if h.is_running()}
        self._wait(f"brokers {sorted(want)} to register",
                   lambda: want <= set(self.registered_brokers()), timeout,
                   [self.brokers[b] for b in want if b in self.brokers])

    def wait_for_metadata(self, ids: Iterable[int] | None = None, timeout: float = 30.0
                          ) -> None:
        """Wait until each running broker's Metadata names the active controller and every
        broker in ``ids`` (default: all running brokers)."""
        running = [h for h in self.brokers.values() if h.is_running()]
        want = set(ids) if ids is not None else {h.id for h in running}
        missing: dict[int, str] = {}

        def check() -> bool:
            missing.clear()
            cid = self.active_controller_id()
            for h in running:
                md = self._metadata(h)
                if md is None:
                    missing[h.id] = "no Metadata answer"
                elif md.controller_id < 0 or md.controller_id != cid:
                    missing[h.id] = f"controller_id {md.controller_id} (active: {cid})"
                elif not want <= {b.broker_id for b in md.brokers}:
                    missing[h.id] = f"brokers {sorted(b.broker_id for b in md.brokers)}"
            return not missing

        try:
            self._wait("every broker's metadata to show the controller and all brokers",
                       check, timeout, running)
        except LocalClusterError as e:
            raise LocalClusterError(f"{e}\nstill waiting on: "
                                    + "; ".join(f"broker {b}: {m}"
                                                for b, m in sorted(missing.items()))) from None

    def wait_for_kafka_listeners(self, timeout: float = 30.0) -> None:
        """Wait until every running broker's Kafka-protocol listener accepts connections."""
        running = [h for h in self.brokers.values() if h.is_running() and h.kafka_address]

        def check() -> bool:
            return all(_port_open(h.host, h.kafka_port) for h in running)
        self._wait("every broker's Kafka listener to accept", check, timeout, running)

    def _metadata(self, h: ProcessHandle):
        import grpc

        from common.rpc import replog_pb2, replog_pb2_grpc
        try:
            with self._blocking_channel(h.address) as ch:
                return replog_pb2_grpc.BrokerStub(ch).Metadata(replog_pb2.MetadataRequest(),
                                                               timeout=2.0)
        except grpc.RpcError:
            return None

    def _blocking_channel(self, address: str):
        import grpc
        if self.security is None:
            return grpc.insecure_channel(address)
        return self.channel_factory().blocking(address)

    # ------------------------------------------------------------------ cluster.json and lock

    def describe(self) -> dict:
        return {
            # true while the cluster serves (start() returned, stop() not called)
            "ready": self._started,
            "bootstrap_servers": self.bootstrap_servers,
            "kafka_bootstrap_servers": self.kafka_bootstrap_servers,
            "zookeeper": self.zookeeper_connect,
            "controllers": [h.describe() for h in self.controllers.values()],
            "brokers": [h.describe() for h in self.brokers.values()],
            "data_dir": str(self.data_dir),
            "supervisor_pid": os.getpid() if self._lock_fd is not None else None,
            "zookeeper_pid": (self.zookeeper_server.pid if self.zookeeper_server is not None
                              and self.zookeeper_server.is_running() else None),
            "zookeeper_config": (str(self.zookeeper_server.config_file)
                                 if self.zookeeper_server is not None else None),
            "zookeeper_nodes": cluster_zookeeper.describe_nodes(self),
            "hosts": cluster_hosts.describe(self),
            "security": self.security,
            "client_properties": (str(self.client_properties_path)
                                  if self.client_properties_path else None),
        }

    def _write_cluster_json(self) -> None:
        """cluster.json once the cluster has served (rewritten on every restart, and with
        "ready": false at stop); before that, cluster.starting.json ("ready": false)."""
        if not self._owns_dir or not self.data_dir.exists():
            return  # never overwrite the description of another cluster in this dir
        with self._json_lock:
            path = self.cluster_json_path if self._served else \
                self.data_dir / CLUSTER_STARTING_JSON
            cluster_dir.write_cluster_json(path, self.describe())
            if self._served:
                with contextlib.suppress(FileNotFoundError):
                    (self.data_dir / CLUSTER_STARTING_JSON).unlink()

    def _acquire_lock(self) -> None:
        if self._lock_fd is not None:
            return
        self._lock_fd = cluster_dir.acquire_lock(self.data_dir)
        self._owns_dir = True
        # an earlier run's description (its processes are gone, checked above) must not be
        # taken for this cluster's readiness
        self._served = False
        for name in (CLUSTER_JSON, CLUSTER_STARTING_JSON):
            with contextlib.suppress(FileNotFoundError):
                (self.data_dir / name).unlink()

    def _release_lock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            cluster_dir.release_lock(fd)

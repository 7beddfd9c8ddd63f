"""A bounded view of a running cluster, for what breaks it and watches it (the chaos nemeses and
runner, the lab, bench): its processes' facts from ``cluster.json`` (re-read each time: a
restart changes a pid), their lifecycle through the :class:`LocalCluster` that started them, and
ZooKeeper's view - the active controller and its epoch, broker registrations, a partition's
state and leader, a topic's assignment - where every read is bounded by ``ZK_READ_TIMEOUT_S``,
so a lost quorum makes a read unknown (None) instead of a wait without end. LocalCluster reads
ZooKeeper through it too, with ``timeout=None``: its waits have deadlines of their own, and its
callers expect an answer once ZooKeeper is back. An attached cluster (chaos/attached.py) stands
in for a LocalCluster with what it has; the ``getattr`` probes below read what only one of them
offers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from kazoo.exceptions import NoNodeError

from common import zk_layout


class Cluster(Protocol):
    """What the view needs of a cluster: a LocalCluster (harness/local_cluster.py, which reads
    ZooKeeper through this module, so it is not imported here) or an attached cluster
    (chaos/attached.py). Its processes are ProcessHandles (harness/process.py)."""

    brokers: Mapping[int, Any]
    controllers: Mapping[int, Any]
    zookeeper_connect: str

    @property
    def cluster_json_path(self) -> Path: ...

    def zk_client(self) -> Any: ...

# kazoo's synchronous reads wait for a reconnect without end: while ZooKeeper is down (a
# kill of it is in progress) a nemesis reading it would wait for the schedule's next event,
# the restart, which runs only after that nemesis returns - so every read here is bounded
# (tests/chaos/test_late_faults.py::
# test_a_shutdown_inside_a_zookeeper_kill_lets_zookeeper_come_back).
ZK_READ_TIMEOUT_S = 5.0


class ClusterView:
    """The processes of a cluster: facts from ``cluster.json``, lifecycle through the
    :class:`LocalCluster` that started them, and ZooKeeper's view of them (the controller,
    its epoch, registrations, partition 0's leader), every read bounded."""

    def __init__(self, cluster: Cluster, topic: str = ""):
        self.cluster = cluster
        self.topic = topic  # ``leader`` targets the leader of its partition 0

    def info(self) -> dict:
        return json.loads(self.cluster.cluster_json_path.read_text(encoding="utf-8"))

    def _zk_read(self, op: str, path: str, timeout: float | None = ZK_READ_TIMEOUT_S):
        """``get``, ``exists`` or ``get_children`` of ``path``, bounded by ``timeout`` (raises
        KazooTimeoutError then): the cluster's ZooKeeper client queues a request while
        disconnected, and its synchronous call would wait for the reconnect forever. ``None``:
        that synchronous call's wait."""
        client = self.cluster.zk_client()
        return getattr(client, f"{op}_async")(path).get(timeout=timeout)

    def partition_state(self, topic: str, partition: int,
                        timeout: float = ZK_READ_TIMEOUT_S) -> zk_layout.LeaderAndIsr:
        """The partition's state znode as the controller (or a leader's AlterPartition) last
        wrote it, read within ``timeout``; raises NoNodeError before the partition exists
        and KazooTimeoutError while ZooKeeper does not answer in time."""
        data, stat = self._zk_read("get", zk_layout.partition_state_path(topic, partition),
                                   timeout)
        return zk_layout.decode_partition_state(data, stat.version)

    def restart_entries(self, timeout: float = ZK_READ_TIMEOUT_S) -> list[str]:
        """The /restart_partitions entries no controller has handled yet (design.md#jbod),
        read within ``timeout``."""
        return self._zk_read("get_children", zk_layout.RESTART_PARTITIONS, timeout)

    def topic_assignment(self, topic: str,
                         timeout: float = ZK_READ_TIMEOUT_S) -> zk_layout.TopicAssignment:
        """The topic's znode (its replicas, and those a reassignment is adding or removing),
        read within ``timeout``; raises as :meth:`partition_state`."""
        data, _ = self._zk_read("get", zk_layout.topic_path(topic), timeout)
        return zk_layout.decode_topic(topic, data)

    def zookeeper_down(self) -> bool:
        """The cluster's own ZooKeeper is not running (a kill nemesis took it), or its
        ensemble has fewer members running than a quorum. Anything that registers a broker
        waits for it: LocalCluster's start reads the broker's registration before it even
        spawns the process."""
        zk = self.cluster.zookeeper_server
        if zk is not None:
            return not zk.is_running()
        ens = self.ensemble()
        return ens is not None and \
            sum(m.is_running() for m in ens.members.values()) < ens.quorum

    def ensemble(self):
        """The cluster's own ZooKeeper ensemble (harness.zk_ensemble.ZooKeeperEnsemble), or None:
        a standalone server, an external one, or an attached cluster's (never the run's)."""
        return getattr(self.cluster, "zookeeper_ensemble", None)

    def zookeeper_leader(self, timeout_s: float = 10.0) -> int:
        """The myid of the ensemble's leader, waiting (bounded) while it elects one."""
        deadline = time.monotonic() + timeout_s
        while (leader := self.ensemble().leader()) is None:
            if time.monotonic() >= deadline:
                raise RuntimeError(f"the ZooKeeper ensemble has no leader after {timeout_s:g}s "
                                   f"(member states {self.ensemble().states()})")
            time.sleep(0.1)
        return leader

    def controller_epoch(self, fresh: bool = False,
                         timeout: float | None = ZK_READ_TIMEOUT_S) -> int | None:
        """/controller_epoch; None when ZooKeeper does not answer in time (a lost quorum).
        ``fresh``: through a session of its own to the ensemble rather than the cluster's
        shared client, which may still be backing off after the whole ensemble was down
        (kazoo's default connection retry doubles its delay, and its session may be gone)."""
        if not fresh:
            try:
                data, _ = self._zk_read("get", zk_layout.CONTROLLER_EPOCH, timeout)
                return zk_layout.decode_controller_epoch(data)
            except Exception:  # noqa: BLE001 - a timeout, a lost connection: unknown
                return None
        return self.controller_state()[0]

    def controller_state(self) -> tuple[int | None, bool | None]:
        """``/controller_epoch`` and whether /controller is held by a controller of the run
        that is running and was started before it claimed the znode, read through one session
        of its own. The second is False while no controller is active, and while the znode
        still belongs to the session of a controller that was killed (ZooKeeper keeps an
        ephemeral until its session expires, and a quorum loss meanwhile postpones that): the
        election that follows is then owed to that earlier fault. None when ZooKeeper does
        not answer or the process's start is not known."""
        with self._fresh_zk() as client:
            if client is None:
                return None, None
            try:
                data, stat = client.get_async(zk_layout.CONTROLLER).get(
                    timeout=ZK_READ_TIMEOUT_S)
            except NoNodeError:
                data = stat = None
            except Exception:  # noqa: BLE001 - a timeout, a lost connection: unknown
                return None, None
            # The epoch after /controller: an election between the two reads shows as the
            # new epoch with the old holder, never as the old epoch with a live new one.
            try:
                epoch_data, _ = client.get_async(zk_layout.CONTROLLER_EPOCH).get(
                    timeout=ZK_READ_TIMEOUT_S)
                epoch = zk_layout.decode_controller_epoch(epoch_data)
            except Exception:  # noqa: BLE001 - no quorum any more, or no such znode: unknown
                epoch = None
        if stat is None:
            return epoch, False
        try:
            handle = self.cluster.controllers.get(zk_layout.decode_controller(data).controller_id)
        except (ValueError, KeyError):
            return epoch, None
        if handle is None or not handle.is_running():
            return epoch, False
        started = getattr(handle, "started_at", None)
        if started is None:
            return epoch, None
        # stat.ctime: the znode's creation, in the ZooKeeper leader's wall-clock milliseconds
        # (this machine's clock, as the handle's start time is). Compared at ZooKeeper's
        # millisecond granularity: a process spawned and elected within one millisecond has a
        # start time past ctime / 1000 (ctime is truncated), yet it did claim the znode.
        return epoch, int(started * 1000) <= stat.ctime

    @contextlib.contextmanager
    def _fresh_zk(self):
        """A session of its own to the ensemble (None if none can be had in time): the
        cluster's shared client may still be backing off after the whole ensemble was down
        (kazoo's default connection retry doubles its delay, and its session may be gone)."""
        from kazoo.client import KazooClient
        security = getattr(self.cluster, "zk_security", None)  # a secure LocalCluster's
        client = KazooClient(self.cluster.zookeeper_connect, timeout=ZK_READ_TIMEOUT_S,
                             **(security.kazoo_args() if security is not None else {}))
        try:
            try:
                client.start(timeout=ZK_READ_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - no quorum in time: unknown
                yield None
                return
            yield client
        finally:
            with contextlib.suppress(Exception):
                client.stop()
                client.close()

    def active_controller_id(self, timeout: float | None = ZK_READ_TIMEOUT_S) -> int | None:
        """The id in /controller; None while no controller is active or ZooKeeper does not
        answer in time."""
        try:
            data, _ = self._zk_read("get", zk_layout.CONTROLLER, timeout)
            return zk_layout.decode_controller(data).controller_id
        except Exception:  # noqa: BLE001 - NoNodeError, a timeout, an undecodable znode
            return None

    def registered_brokers(self, timeout: float | None = ZK_READ_TIMEOUT_S
                           ) -> dict[int, zk_layout.BrokerRegistration]:
        """Every broker registration under /brokers/ids, its epoch the znode's czxid (KIP-380);
        {} before the first registration or when ZooKeeper does not answer in time, and a
        registration gone between the listing and its read is left out."""
        try:
            children = self._zk_read("get_children", zk_layout.BROKER_IDS, timeout)
        except Exception:  # noqa: BLE001 - NoNodeError before the first registration, a timeout
            return {}
        out = {}
        for c in children:
            try:
                data, stat = self._zk_read("get", f"{zk_layout.BROKER_IDS}/{c}", timeout)
                out[int(c)] = zk_layout.decode_broker(int(c), data, stat.czxid)
            except Exception:  # noqa: BLE001, S112 - the znode went away meanwhile
                continue
        return out

    def resolve(self, target: str) -> str:
        """``controller`` -> the active controller's name, ``leader`` -> the broker leading
        partition 0 (its state znode); other names as they are."""
        if target == "leader":
            try:
                leader = self.partition_state(self.topic, 0).leader
            except Exception:  # noqa: BLE001 - no state yet or ZooKeeper down: any broker
                leader = zk_layout.NO_LEADER
            if leader == zk_layout.NO_LEADER:
                leader = min(self.cluster.brokers)
            return f"broker-{leader}"
        if target != "controller":
            return target
        cid = self.active_controller_id()
        if cid is None:
            cid = min(self.cluster.controllers)
        return f"controller-{cid}"

    def _live_target(self, target: str) -> str | None:
        """``resolve(target)`` when it names a running process that holds the role now (the
        active controller in /controller, partition 0's leader in its state znode); None
        while nobody does (a failover in progress)."""
        if target == "controller":
            cid = self.active_controller_id()
            name = f"controller-{cid}" if cid is not None else None
        elif target == "leader":
            try:
                leader = self.partition_state(self.topic, 0).leader
            except Exception:  # noqa: BLE001 - no state yet or ZooKeeper unreachable
                return None
            name = f"broker-{leader}" if leader != zk_layout.NO_LEADER else None
        else:
            name = target
        if name is None or name == "zookeeper":
            return name
        return name if self.handle(name).is_running() else None

    async def resolve_live(self, target: str, timeout_s: float = 30.0) -> str:
        """Like :meth:`resolve`, but waits (bounded) until the role is held by a running
        process: a matrix fault right after a failover must hit the new leader or
        controller, not the one just stopped."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            name = await asyncio.to_thread(self._live_target, target)
            if name is not None:
                return name
            if loop.time() >= deadline:
                raise RuntimeError(f"no running process holds {target} after {timeout_s:.0f}s")
            await asyncio.sleep(0.2)

    def registered(self, broker_id: int) -> bool | None:
        """Whether /brokers/ids/<id> exists; None when ZooKeeper did not answer in time."""
        try:
            return self._zk_read("exists", zk_layout.broker_path(broker_id)) is not None
        except Exception:  # noqa: BLE001 - a timeout or a lost connection: unknown
            return None

    def loss_registered(self, name: str) -> bool:
        """ZooKeeper has registered that ``name`` is gone: a broker's /brokers/ids/<id> znode
        deleted (its session expired), another controller named in /controller (or none,
        when no other controller runs to take over)."""
        role, _, nid = name.partition("-")
        if role == "broker":
            return self.registered(int(nid)) is False
        cid = self.active_controller_id()
        if cid is None:
            return not any(h.is_running() for c, h in self.cluster.controllers.items()
                           if c != int(nid))
        return cid != int(nid)

    def handle(self, name: str) -> Any:  # a ProcessHandle
        role, _, nid = name.partition("-")
        group = self.cluster.brokers if role == "broker" else self.cluster.controllers
        return group[int(nid)]

    def pid(self, name: str) -> int | None:
        info = self.info()
        if name == "zookeeper":
            return info.get("zookeeper_pid")
        role, _, nid = name.partition("-")
        for p in info.get(f"{role}s", []):
            if p["id"] == int(nid):
                return p.get("pid")
        return None

    def ports(self, name: str) -> list[int]:
        info = self.info()
        if name == "zookeeper":
            hostport = info["zookeeper"].split("/", 1)[0].split(",")[0]
            return [int(hostport.rsplit(":", 1)[1])]
        role, _, nid = name.partition("-")
        for p in info.get(f"{role}s", []):
            if p["id"] == int(nid):
                return [int(p["address"].rsplit(":", 1)[1])]
        raise KeyError(name)

    def log_dir(self, broker_id: int, index: int) -> str:
        for p in self.info()["brokers"]:
            if p["id"] == broker_id:
                return p["log_dirs"][index]
        raise KeyError(broker_id)

    def restart_unavailable(self) -> str | None:
        """Why the run may not start this cluster's processes again (an attached cluster
        whose supervisor runs: chaos/attached.py), or None."""
        check = getattr(self.cluster, "restart_unavailable", None)
        return check() if check is not None else None

    def fault_file(self, broker_id: int) -> Path | None:
        path = self.cluster.broker(broker_id).properties().get("fault.injection.file")
        return Path(str(path)) if path else None

    # ZooKeeper has no ProcessHandle: LocalCluster runs it as a ZooKeeperServer, or as the
    # members of a ZooKeeperEnsemble.
    def kill_zookeeper(self) -> str:
        """SIGKILL the cluster's own ZooKeeper and return what was killed: the standalone
        server (``zookeeper``) or, in an ensemble, its leader (``zookeeper-<myid>``: the
        member whose loss every client notices, as the standalone server's is)."""
        if self.ensemble() is not None:
            myid = self.zookeeper_leader()
            self.cluster.kill_zookeeper(myid)
            return f"zookeeper-{myid}"
        zk = self.cluster.zookeeper_server
        if zk is None or zk.pid is None:
            raise RuntimeError("the cluster does not run its own ZooKeeper")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(zk.pid, signal.SIGKILL)  # the JVM runs in its own process group
        zk._proc.wait()
        return "zookeeper"

    def start_zookeeper(self, name: str = "zookeeper") -> None:
        """Start again what kill_zookeeper returned (an ensemble member on its own ports,
        waiting until it serves)."""
        if name != "zookeeper":
            self.cluster.restart_zookeeper(int(name.removeprefix("zookeeper-")))
            return
        zk = self.cluster.zookeeper_server
        # Same port as before, or every connect string in the cluster goes stale: the
        # server would otherwise pick a new one if the old were briefly taken (hook wanted:
        # ZooKeeperServer.restart() keeping its port).
        zk._port_pinned = True
        zk.start()
        self.cluster._write_cluster_json()

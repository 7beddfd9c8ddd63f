"""``replog chaos --cluster DATA_DIR``: a running cluster, found through its ``cluster.json``.

:class:`AttachedCluster` offers what the runner and the nemeses use of a
:class:`~harness.local_cluster.LocalCluster` (brokers and controllers by id, the bootstrap
servers, a ZooKeeper client, the active controller) for processes this run did not start:
pids, config files, log files and log dirs come from ``cluster.json``, liveness from the pid
and its command line (a recycled pid never counts).

A process the run stops is started again the way ``replog cluster up`` starts it (``python
-m admin.cli <role> --config <file>``, its output appended to its log file, in a session of
its own so it outlives the run), and its new pid is written back into ``cluster.json``.
That is safe only once the cluster's supervisor is gone: a live ``replog cluster up`` (or the
:class:`LocalCluster` of another process) holds the data dir's lock, knows nothing of a
process started behind its back, and would rewrite ``cluster.json`` without it on stop, so
``replog cluster down`` would leave it running. While the lock is held, the nemeses that
restart processes (kill, bounce, shutdown, eio, the matrix) are skipped, saying why; pause,
partition, expire, slow, elect and reassign need no restart. ZooKeeper is never killed (the
run does not own it), and the loop-mounted disk nemeses need dirs mounted before the
brokers start.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from chaos.schedule import Timeouts
from common import zk_layout
from common.config import load_config
from common.errors import ReplogError
from common.properties import parse_properties_text
from common.security.zk_auth import zk_security
from harness import cluster_security
from harness.local_cluster import CLUSTER_JSON, REPO_ROOT, LocalCluster, _lock_holder
from harness.polling import poll, wait_until

READY_TIMEOUT_S = 60.0


class AttachedProcess:
    """One broker or controller of an attached cluster (a ProcessHandle look-alike)."""

    def __init__(self, cluster: AttachedCluster, role: str, info: dict):
        self.cluster = cluster
        self.role = role
        self.id = int(info["id"])
        self.name = f"{role}-{self.id}"
        self.address = info["address"]
        self.host, _, port = self.address.rpartition(":")
        self.port = int(port)
        self.config_file = Path(info["config_file"])
        self.log_file = Path(info["log_file"])
        self.log_dirs = [Path(d) for d in info.get("log_dirs", [])]
        self._pid: int | None = info.get("pid")
        self._proc: subprocess.Popen | None = None  # when this run started it
        self.paused = False

    @property
    def pid(self) -> int | None:
        return self._pid if self.is_running() else None

    def is_running(self) -> bool:
        if self._pid is None:
            return False
        if self._proc is not None and self._proc.pid == self._pid:
            return self._proc.poll() is None
        try:
            p = psutil.Process(self._pid)
            return (p.status() != psutil.STATUS_ZOMBIE
                    and str(self.config_file) in " ".join(p.cmdline()))
        except psutil.Error:
            return False

    def properties(self) -> dict[str, str]:
        text = self.config_file.read_text(encoding="utf-8")
        return {k: v for k, v, _ in parse_properties_text(text, str(self.config_file))}

    def _signal(self, sig: int) -> None:
        if self.is_running():
            try:
                os.kill(self._pid, sig)
            except ProcessLookupError:
                pass

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False

    def _wait_gone(self, timeout: float) -> bool:
        if self._proc is not None and self._proc.pid == self._pid:
            try:
                self._proc.wait(timeout)  # our own child: waiting also reaps it
            except subprocess.TimeoutExpired:
                return False
            return True
        return poll(lambda: not self.is_running(), timeout, interval=0.05) is not None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        self._signal(sig)
        self._wait_gone(30.0)
        self.paused = False

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (a broker's controlled shutdown), SIGKILL after ``timeout``."""
        self._signal(signal.SIGTERM)
        if self.paused:
            self._signal(signal.SIGCONT)
        if not self._wait_gone(timeout):
            self.kill()
        self.paused = False

    def start(self) -> None:
        why = self.cluster.restart_unavailable()
        if why is not None:
            raise ReplogError(f"{self.name} cannot be started here: {why}")
        if self.is_running():
            raise ReplogError(f"{self.name} is already running (pid {self._pid})")
        before = self.cluster.registration_czxid(self.id) if self.role == "broker" else None
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join([str(REPO_ROOT)] + [
                       p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        cmd = [sys.executable, "-m", "admin.cli", self.role, "--config", str(self.config_file)]
        with self.log_file.open("ab") as log:
            log.write(f"--- replog chaos: starting {self.name}: {' '.join(cmd)} ---\n".encode())
            log.flush()
            self._proc = subprocess.Popen(cmd, cwd=self.cluster.data_dir, env=env,
                                          stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        self._pid = self._proc.pid
        self.paused = False
        self.cluster.record_pid(self.role, self.id, self._pid)
        self._wait_ready(before)

    def _wait_ready(self, previous_czxid: int | None) -> None:
        def ready() -> bool:
            if not self.is_running():
                raise ReplogError(f"{self.name} exited while starting; see {self.log_file}")
            if self.role == "controller":
                try:
                    with socket.create_connection((self.host, self.port), timeout=0.5):
                        return True
                except OSError:
                    return False
            czxid = self.cluster.registration_czxid(self.id)
            return czxid is not None and czxid != previous_czxid

        wait_until(ready, READY_TIMEOUT_S, interval=0.05, timed_out=lambda _: ReplogError(
            f"{self.name} not ready after {READY_TIMEOUT_S:.0f}s; see {self.log_file}"))

    async def astart(self, wait: bool = True, timeout: float | None = None) -> AttachedProcess:
        await asyncio.to_thread(self.start)
        return self

    async def astop(self, timeout: float = 60.0) -> None:
        await asyncio.to_thread(self.stop, timeout)

    async def arestart(self, wait: bool = True, timeout: float | None = None
                       ) -> AttachedProcess:
        await self.astop()
        return await self.astart()

    async def akill(self, sig: int = signal.SIGKILL) -> None:
        await asyncio.to_thread(self.kill, sig)


class AttachedCluster:
    """A running cluster described by ``DATA_DIR/cluster.json``."""

    zookeeper_server = None  # never the run's to kill

    def __init__(self, data_dir: str | os.PathLike[str]):
        self.data_dir = Path(data_dir).resolve()
        self.cluster_json_path = self.data_dir / CLUSTER_JSON
        try:
            info = json.loads(self.cluster_json_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ReplogError(f"no readable {CLUSTER_JSON} in {self.data_dir}: {e}") from None
        self.zookeeper_connect = info["zookeeper"]
        self.brokers = {int(p["id"]): AttachedProcess(self, "broker", p)
                        for p in info.get("brokers", [])}
        self.controllers = {int(p["id"]): AttachedProcess(self, "controller", p)
                            for p in info.get("controllers", [])}
        down = [h.name for h in [*self.brokers.values(), *self.controllers.values()]
                if not h.is_running()]
        if not self.brokers or down:
            raise ReplogError(f"the cluster in {self.data_dir} is not fully up"
                              + (f" ({', '.join(down)} not running)" if down else
                                 " (no brokers)"))
        self._zk = None

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(h.address for h in self.brokers.values())

    def broker(self, broker_id: int) -> AttachedProcess:
        return self.brokers[broker_id]

    def controller(self, controller_id: int) -> AttachedProcess:
        return self.controllers[controller_id]

    def restart_unavailable(self) -> str | None:
        """Why processes of this cluster may not be (re)started by the run, or None."""
        holder = _lock_holder(self.data_dir)
        if holder is not None:
            return (f"the cluster's supervisor (pid {holder}: replog cluster up, or a "
                    f"LocalCluster) runs; it would not know a process the run starts, nor "
                    f"stop it")
        return None

    def timeouts(self) -> Timeouts:
        """The detection timeouts of the brokers' configs (the schedule's fault durations
        exceed them)."""
        cfg = load_config(str(next(iter(self.brokers.values())).config_file))
        return Timeouts(cfg["zookeeper.session.timeout.ms"] / 1000,
                        cfg["replica.lag.time.max.ms"] / 1000)

    @property
    def zk_security(self):
        """The running cluster's ZooKeeper credentials, for zk_client: a secure cluster's
        (replog cluster up --security mtls keeps them under its data dir), else none."""
        digest = cluster_security.ssl_dir(self.data_dir) / cluster_security.ZOOKEEPER_DIGEST_FILE
        return zk_security(cluster_security.zookeeper_overrides(self.data_dir)
                           if digest.is_file() else {})

    # The same ZooKeeper reads as LocalCluster's (they use only _zk, zookeeper_connect and
    # zk_security).
    zk_client = LocalCluster.zk_client
    active_controller_id = LocalCluster.active_controller_id

    def registration_czxid(self, broker_id: int) -> int | None:
        stat = self.zk_client().exists(zk_layout.broker_path(broker_id))
        return stat.czxid if stat is not None else None

    def record_pid(self, role: str, node_id: int, pid: int) -> None:
        """Write a restarted process's pid into cluster.json, so ``replog cluster down``
        stops it."""
        info = json.loads(self.cluster_json_path.read_text(encoding="utf-8"))
        for p in info.get(f"{role}s", []):
            if int(p["id"]) == node_id:
                p["pid"] = pid
        tmp = self.cluster_json_path.with_suffix(".json.chaos-tmp")
        tmp.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.cluster_json_path)

    def close(self) -> None:
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            finally:
                self._zk = None

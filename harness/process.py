"""One broker or controller process of a local cluster (:class:`ProcessHandle`), and the
process facts the harness reads (alive, command line, a log's last lines, an open port).

Fault injection goes through :class:`ProcessHandle`: ``kill()`` (SIGKILL), ``pause()``
(SIGSTOP), ``resume()`` (SIGCONT), ``stop()`` (SIGTERM and wait: a broker does a controlled
shutdown), ``start()``, ``restart()``; blocking waits have ``a``-prefixed asyncio variants
(``await handle.arestart()``) that run in a worker thread so a test's producer keeps running.
Ports stay the same across restarts of one process, so clients' bootstrap lists stay valid.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import psutil

from common.errors import ReplogError
from harness import cluster_hosts, cluster_security
from harness.polling import wait_until

HOST = "127.0.0.1"


class LocalCluster(Protocol):
    """What a handle reads and calls of harness.local_cluster.LocalCluster (which owns its
    handles, so it is not imported back)."""

    data_dir: Path
    python: str
    env: dict[str, str]
    startup_timeout_s: float
    security: str | None
    zookeeper_connect: str
    overrides: dict[str, str]
    broker_overrides: dict[str, str]
    controller_overrides: dict[str, str]

    @property
    def grpc_listener(self) -> str: ...

    def _registration_czxid(self, broker_id: int) -> int | None: ...

    def _metadata(self, h: ProcessHandle) -> Any: ...

    def _write_cluster_json(self) -> None: ...


class LocalClusterError(ReplogError):
    """The local cluster could not be started, stopped or inspected."""


def _port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _tail(path: Path, lines: int = 30) -> str:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
    except FileNotFoundError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""


def _alive(pid: int) -> bool:
    # A zombie (exited, not reaped) counts as dead.
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _write_properties(path: Path, props: Mapping[str, object], header: str) -> None:
    lines = [f"# {header}",
             "# Written by replog's harness/local_cluster.py; rewritten on every start."]
    lines += [f"{k}={v}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


class ProcessHandle:
    """One broker or controller process of a LocalCluster."""

    def __init__(self, cluster: LocalCluster, role: str, node_id: int, port: int,
                 metrics_port: int, log_dirs: Sequence[Path] = (),
                 overrides: Mapping[str, str] | None = None, kafka_port: int | None = None):
        self.cluster = cluster
        self.role = role
        self.id = node_id
        self.host = HOST
        self.port = port
        self.metrics_port = metrics_port
        self.kafka_port = kafka_port  # a broker's Kafka-protocol listener
        self.log_dirs = [Path(d) for d in log_dirs]
        self.overrides = dict(overrides or {})
        self.name = f"{role}-{node_id}"
        self.config_file = cluster.data_dir / "config" / f"{self.name}.properties"
        self.log_file = cluster.data_dir / "logs" / f"{self.name}.log"
        self.event_log_file = cluster.data_dir / "logs" / f"{self.name}.events.jsonl"
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self.starts = 0
        # Wall-clock time of the last start, comparable with a znode's ctime (the ensemble
        # nemeses tell a running controller's /controller from a killed predecessor's).
        self.started_at: float | None = None
        self.netns: str | None = None  # --hosts: its network namespace (harness/cluster_hosts)
        self.rack: str | None = None  # --racks: its broker.rack

    # ------------------------------------------------------------------ facts

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def kafka_address(self) -> str | None:
        """None when overrides replace ``listeners`` (then they say what is served)."""
        c = self.cluster
        replaced = any("listeners" in o for o in (c.overrides, c.broker_overrides,
                                                  self.overrides))
        return f"{self.host}:{self.kafka_port}" if self.kafka_port and not replaced else None

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def log_tail(self, lines: int = 30) -> str:
        return _tail(self.log_file, lines)

    def __repr__(self) -> str:
        state = ("paused" if self.paused else f"pid={self.pid}") if self.is_running() \
            else "stopped"
        return f"<{self.name} {self.address} {state}>"

    # ------------------------------------------------------------------ config

    def properties(self) -> dict[str, object]:
        c = self.cluster
        props: dict[str, object] = {f"{self.role}.id": self.id,
                                    "listeners": f"{c.grpc_listener}://{self.address}"}
        if self.kafka_address:  # KAFKA: in kafka.listener.names and the protocol map by default
            props["listeners"] += f",KAFKA://{self.kafka_address}"
        if self.role == "broker":
            props["log.dirs"] = ",".join(str(d) for d in self.log_dirs)
            if self.rack is not None:
                props["broker.rack"] = self.rack
        props["zookeeper.connect"] = c.zookeeper_connect
        props["metrics.port"] = self.metrics_port
        props["event.log.file"] = str(self.event_log_file)
        if c.security is not None:
            props.update(cluster_security.security_overrides(c.data_dir, c.security, self.name,
                                                             self.host))
        props.update(c.overrides)
        props.update(c.broker_overrides if self.role == "broker" else c.controller_overrides)
        props.update(self.overrides)
        return props

    def write_config(self) -> None:
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        _write_properties(self.config_file, self.properties(), f"replog {self.role} {self.id}")

    # ------------------------------------------------------------------ lifecycle

    def start(self, wait: bool = True, timeout: float | None = None) -> ProcessHandle:
        """Start the process (config rewritten first); with ``wait``, until it is ready."""
        if self.is_running():
            raise LocalClusterError(f"{self.name} is already running (pid {self.pid})")
        before = self.cluster._registration_czxid(self.id) if self.role == "broker" else None
        self.write_config()
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        cmd = cluster_hosts.wrap(self.cluster, self.name, [
            self.cluster.python, "-m", "admin.cli", self.role, "--config",
            str(self.config_file)])
        with self.log_file.open("ab") as log:
            log.write(f"--- replog local cluster: starting {self.name}: {' '.join(cmd)} "
                      f"---\n".encode())
            log.flush()
            self.started_at = time.time()
            self.proc = subprocess.Popen(cmd, cwd=self.cluster.data_dir, env=self.cluster.env,
                                         stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.paused = False
        self.starts += 1
        self.cluster._write_cluster_json()
        if wait:
            self.wait_ready(timeout, previous_czxid=before)
        return self

    def wait_ready(self, timeout: float | None = None, previous_czxid: int | None = None,
                   check_metadata: bool = True) -> None:
        """Broker: registered in ZooKeeper (a registration newer than ``previous_czxid``) and
        answering Metadata with an active controller. Controller: its gRPC port accepts."""
        timeout = self.cluster.startup_timeout_s if timeout is None else timeout

        def ready() -> bool:
            self._check_alive("while starting")
            if self.role == "controller":
                return _port_open(self.host, self.port)
            czxid = self.cluster._registration_czxid(self.id)
            if czxid is None or czxid == previous_czxid:
                return False
            if not check_metadata:
                return True
            md = self.cluster._metadata(self)
            return md is not None and md.controller_id >= 0

        def timed_out(_last) -> LocalClusterError:
            what = ("listening" if self.role == "controller"
                    else "registered in ZooKeeper with an active controller in its metadata")
            return LocalClusterError(f"{self.name} not {what} after {timeout:.0f}s; last lines "
                                     f"of {self.log_file}:\n{self.log_tail()}")

        wait_until(ready, timeout, interval=0.05, timed_out=timed_out)

    def _check_alive(self, when: str) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise LocalClusterError(
                f"{self.name} exited with code {self.proc.returncode} {when}; last lines of "
                f"{self.log_file}:\n{self.log_tail()}")

    def send_signal(self, sig: int) -> None:
        if self.is_running():
            try:
                os.kill(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self, sig: int = signal.SIGKILL, wait: bool = True) -> None:
        """Send ``sig`` (SIGKILL by default); with ``wait``, reap the process."""
        self.send_signal(sig)
        if wait and self.proc is not None and sig in (signal.SIGKILL, signal.SIGTERM):
            self.proc.wait()
            self.paused = False

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and ZooKeeper session but does nothing."""
        self.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (a broker does a controlled shutdown) and wait; SIGKILL after ``timeout``."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.send_signal(signal.SIGTERM)
            if self.paused:
                # A stopped process acts on SIGTERM only once woken.
                self.send_signal(signal.SIGCONT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                # Its stacks to its log first (common/observability.dump_stacks_on_sigusr1):
                # a process that would not stop says what it was waiting on.
                self.send_signal(signal.SIGUSR1)
                try:
                    self.proc.wait(1.0)
                except subprocess.TimeoutExpired:
                    pass
                self.send_signal(signal.SIGKILL)
                self.proc.wait()
        self.paused = False
        return self.proc.returncode

    def restart(self, wait: bool = True, timeout: float | None = None,
                stop_timeout: float = 60.0) -> ProcessHandle:
        """Stop (SIGTERM) if running, then start again on the same ports."""
        self.stop(stop_timeout)
        return self.start(wait=wait, timeout=timeout)

    # asyncio variants: the blocking waits run in a worker thread.
    async def astart(self, wait: bool = True, timeout: float | None = None) -> ProcessHandle:
        return await asyncio.to_thread(self.start, wait, timeout)

    async def astop(self, timeout: float = 60.0) -> int | None:
        return await asyncio.to_thread(self.stop, timeout)

    async def arestart(self, wait: bool = True, timeout: float | None = None) -> ProcessHandle:
        return await asyncio.to_thread(self.restart, wait, timeout)

    async def akill(self, sig: int = signal.SIGKILL) -> None:
        await asyncio.to_thread(self.kill, sig)

    async def await_ready(self, timeout: float | None = None) -> None:
        await asyncio.to_thread(self.wait_ready, timeout)

    def describe(self) -> dict:
        d: dict = {"id": self.id, "pid": self.pid if self.is_running() else None,
                   "address": self.address}
        if self.role == "broker":
            d["log_dirs"] = [str(p) for p in self.log_dirs]
            d["kafka_address"] = self.kafka_address
        d["metrics_url"] = self.metrics_url
        if self.netns is not None:
            d["namespace"], d["rack"] = self.netns, self.rack
        d["config_file"] = str(self.config_file)
        d["log_file"] = str(self.log_file)
        d["event_log_file"] = str(self.event_log_file)
        return d

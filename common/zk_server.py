"""A real, standalone ZooKeeper 3.8 server run as a child process, plus session fault injection.

replog's controller coordinates through a real ZooKeeper (SPEC "Architecture"), so tests and
`replog cluster up` run the genuine server rather than a fake: Debian's `zookeeper` package jar,
started as `ZooKeeperServerMain` with a generated standalone `zoo.cfg` on a loopback port.

- `ZooKeeperServer` writes the config, starts the JVM in its own process group, waits until the
  server is really serving (`ruok` answers `imok` and `srvr` reports a mode), and stops it with
  SIGTERM then SIGKILL.
- `expire_session` expires a kazoo client's session on the *server*, the way older releases of
  kazoo's test harness did: a second connection attaches to the same session id and password and
  closes it. The server then deletes the session's ephemeral znodes and drops every connection
  of that session, so the client sees LOST and builds a new session — a real fault, not a
  client-side fake (kazoo 2.11's harness only injects a local `_SESSION_EXPIRED` event, which
  leaves the session and its ephemerals alive on the server until the timeout).
- `ensure_chroot` creates a chroot path and returns the chrooted connect string.

Standalone only: no ensemble, no TLS, no auth. Free of pytest on purpose; `tests/conftest.py`
wraps it in fixtures.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import weakref
from collections import deque
from pathlib import Path
from types import TracebackType

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from common.ports import free_port, is_free

__all__ = [
    "DEFAULT_ZOOKEEPER_JAR",
    "ZooKeeperNotInstalledError",
    "ZooKeeperServer",
    "ZooKeeperServerError",
    "ensure_chroot",
    "expire_session",
    "four_letter_word",
]

# Debian's package layout (`apt-get install zookeeper`); the jar's manifest Class-Path pulls in
# its dependencies, and /etc/zookeeper/conf is what Debian's own zkEnv.sh puts first.
DEFAULT_ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
DEBIAN_CONF_DIR = Path("/etc/zookeeper/conf")
# The manifest names slf4j-api but no binding, so without these the server logs nothing at all
# and a failed start would leave an empty log. Both ship with libzookeeper-java's dependencies
# (libslf4j-java, liblog4j1.2-java); they are added only when present.
_LOG_BINDING_JARS = (
    Path("/usr/share/java/slf4j-log4j12.jar"),
    Path("/usr/share/java/log4j-1.2.jar"),
)
_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

# Small heap, serial GC and C1-only JIT: the server idles through tests, and these flags cut
# JVM start-up time and memory when many test sessions or a local cluster run side by side.
_JVM_FLAGS = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",  # no /tmp/hsperfdata_* files left behind
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.admin.enableServer=false",  # the Jetty admin server would grab port 8080
    "-Dzookeeper.jmx.log4j.disable=true",
)

_LOG4J_PROPERTIES = """\
# Written by replog's common/zk_server.py: log to the console, which the launcher redirects to
# the server's log file.
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
"""

_LOG_TAIL_LINES = 40
_STOP_GRACE_S = 5.0


class ZooKeeperServerError(RuntimeError):
    """The ZooKeeper server could not be started, or misbehaved."""


class ZooKeeperNotInstalledError(ZooKeeperServerError):
    """java or the ZooKeeper jar is missing on this machine."""


def _free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside the ephemeral range
    (common/ports: the JVM binds it seconds later; the caller may still race another listener)."""
    return free_port("127.0.0.1")


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (`ruok`, `srvr`, ...) and return the full reply.

    Only words whitelisted by `4lw.commands.whitelist` get an answer; others get a refusal text.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        # The server writes its answer and closes the connection; read until EOF.
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


# Servers still running when the interpreter exits (e.g. a Ctrl-C through `replog cluster up`)
# are stopped, so no JVM outlives its owner. A SIGKILLed owner still leaks one: see stop().
_live_servers: weakref.WeakSet[ZooKeeperServer] = weakref.WeakSet()


@atexit.register
def _stop_live_servers() -> None:
    for server in list(_live_servers):
        server.stop()


class ZooKeeperServer:
    """A standalone ZooKeeper server process bound to 127.0.0.1, with its data in `data_dir`.

    Session timeouts are negotiated by the server into [min, max]; ZooKeeper's defaults are
    2 and 20 ticks, so a short `tick_time_ms` is what allows sub-second sessions in tests.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int | None = None,
        tick_time_ms: int = 2000,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int | None = None,
        log_file: str | os.PathLike[str] | None = None,
        *,
        jar: str | os.PathLike[str] = DEFAULT_ZOOKEEPER_JAR,
    ) -> None:
        if tick_time_ms <= 0:
            raise ValueError(f"tick_time_ms must be positive, got {tick_time_ms}")
        self.data_dir = Path(data_dir).resolve()
        self._port_pinned = port is not None
        self._port = port if port is not None else _free_loopback_port()
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = (
            min_session_timeout_ms if min_session_timeout_ms is not None else 2 * tick_time_ms
        )
        self.max_session_timeout_ms = (
            max_session_timeout_ms if max_session_timeout_ms is not None else 20 * tick_time_ms
        )
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError(
                f"min_session_timeout_ms {self.min_session_timeout_ms} exceeds "
                f"max_session_timeout_ms {self.max_session_timeout_ms}"
            )
        self.log_file = (
            Path(log_file).resolve() if log_file is not None else self.data_dir / "zookeeper.log"
        )
        self.jar = Path(jar)
        self.config_file = self.data_dir / "zoo.cfg"
        self._log4j_file = self.data_dir / "log4j.properties"
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    # -- read-only facts -------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def hosts(self) -> str:
        """The kazoo / `zookeeper.connect` string, without a chroot."""
        return f"127.0.0.1:{self._port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Launch the server and return once it serves clients; raise ZooKeeperServerError if
        it exits or is not serving within `timeout` seconds (the process is then stopped)."""
        with self._lock:
            if self.is_running():
                return self
            java = self._find_java()
            # An auto-picked port can be taken between picking and binding; pick again then.
            attempts = 1 if self._port_pinned else 3
            for attempt in range(1, attempts + 1):
                # Checked first because another server already on the port would answer the
                # readiness probes while ours dies of "Address already in use".
                if not is_free(self._port):
                    if self._port_pinned:
                        raise ZooKeeperServerError(
                            f"port {self._port} on 127.0.0.1 is already in use; "
                            "cannot start ZooKeeper there"
                        )
                    self._port = _free_loopback_port()
                self._launch(java)
                try:
                    self._wait_until_serving(timeout)
                    _live_servers.add(self)
                    return self
                except ZooKeeperServerError as exc:
                    self._terminate()
                    if attempt < attempts and "Address already in use" in str(exc):
                        self._port = _free_loopback_port()
                        continue
                    raise
            raise AssertionError("unreachable")

    def stop(self, timeout: float = _STOP_GRACE_S) -> None:
        """SIGTERM the server's process group, then SIGKILL it if still alive after `timeout`."""
        with self._lock:
            self._terminate(timeout)
            _live_servers.discard(self)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.is_running() else "stopped"
        return f"ZooKeeperServer({self.hosts}, data_dir={str(self.data_dir)!r}, {state})"

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last `lines` lines of the server's log file (empty if there is none yet)."""
        try:
            with self.log_file.open("r", encoding="utf-8", errors="replace") as f:
                return "".join(deque(f, maxlen=lines))
        except FileNotFoundError:
            return ""

    # -- internals -------------------------------------------------------------------------

    def _find_java(self) -> str:
        java = shutil.which("java")
        if java is None:
            raise ZooKeeperNotInstalledError(
                "java not found on PATH: ZooKeeper needs a Java runtime "
                "(Debian/Ubuntu: apt-get install default-jre-headless zookeeper)"
            )
        if not self.jar.is_file():
            raise ZooKeeperNotInstalledError(
                f"ZooKeeper jar not found at {self.jar} "
                "(Debian/Ubuntu: apt-get install zookeeper, or run 'make setup' as root)"
            )
        return java

    def _write_config(self) -> None:
        lines = [
            "# Written by replog's common/zk_server.py: a standalone server for tests and",
            "# `replog cluster up`; rewritten on every start.",
            f"dataDir={self.data_dir}",
            f"clientPort={self._port}",
            # Loopback only: a test or dev server must not be reachable from the network.
            "clientPortAddress=127.0.0.1",
            f"tickTime={self.tick_time_ms}",
            f"minSessionTimeout={self.min_session_timeout_ms}",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr",
            # Unlimited connections per client IP: every client here comes from 127.0.0.1.
            "maxClientCnxns=0",
            # Keep a long-running local cluster's disk use bounded.
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        self.config_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self._log4j_file.write_text(_LOG4J_PROPERTIES, encoding="utf-8")

    def _command(self, java: str) -> list[str]:
        classpath = [str(DEBIAN_CONF_DIR), str(self.jar)]
        classpath += [str(jar) for jar in _LOG_BINDING_JARS if jar.is_file()]
        return [
            java,
            *_JVM_FLAGS,
            f"-Dlog4j.configuration={self._log4j_file.as_uri()}",
            "-cp",
            os.pathsep.join(classpath),
            _MAIN_CLASS,
            str(self.config_file),
        ]

    def _launch(self, java: str) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self._write_config()
        with self.log_file.open("ab") as log:
            log.write(f"--- replog: starting ZooKeeper on {self.hosts} ---\n".encode())
            log.flush()
            # Own session and process group: a Ctrl-C aimed at the owner's terminal does not
            # reach the JVM directly, and stop() can signal the whole group.
            self._proc = subprocess.Popen(
                self._command(java),
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _wait_until_serving(self, timeout: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        last_reply = ""
        while True:
            code = self._proc.poll()
            if code is not None:
                raise ZooKeeperServerError(
                    f"ZooKeeper on {self.hosts} exited with code {code} during start-up; "
                    f"last lines of {self.log_file}:\n{self.log_tail()}"
                )
            try:
                # ruok only says the JVM's server thread is up; srvr answers "This ZooKeeper
                # instance is not currently serving requests" until the database is loaded.
                if four_letter_word("127.0.0.1", self._port, "ruok", timeout=1.0) == "imok":
                    last_reply = four_letter_word("127.0.0.1", self._port, "srvr", timeout=1.0)
                    if "Mode:" in last_reply:
                        return
            except OSError as exc:
                last_reply = repr(exc)
            if time.monotonic() >= deadline:
                raise ZooKeeperServerError(
                    f"ZooKeeper on {self.hosts} not serving after {timeout:.0f}s "
                    f"(last probe: {last_reply.strip()!r}); last lines of {self.log_file}:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.05)

    def _terminate(self, timeout: float = _STOP_GRACE_S) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            self._signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(proc, signal.SIGKILL)
                proc.wait()
        # No signal after wait(): once reaped, the pid (and so the group id) may be reused.

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        try:
            # start_new_session made the child its group's leader: pgid == pid.
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def expire_session(client: KazooClient, hosts: str, timeout: float = 15.0) -> None:
    """Expire `client`'s session on the server and wait until the client has a new one.

    A second connection resumes the same session (id and password) and closes it, which makes
    the server end the session: its ephemeral znodes are deleted and its connections dropped.
    On return the client has seen KazooState.LOST and is CONNECTED again with a new session id.
    `hosts` may carry a chroot; sessions are server-wide, so any path works.
    """
    client_id = client.client_id
    if client_id is None:
        raise ZooKeeperServerError("expire_session needs a connected client")
    old_session_id = client_id[0]
    lost = threading.Event()
    reconnected = threading.Event()

    # Runs on kazoo's connection thread: only set events, never block there.
    def on_state(state: KazooState) -> bool | None:
        if state == KazooState.LOST:
            lost.set()
        elif state == KazooState.CONNECTED and lost.is_set():
            reconnected.set()
            return True  # removes the listener
        return None

    client.add_listener(on_state)
    try:
        deadline = time.monotonic() + timeout
        # kazoo's older harness retried too: the client may not be told at once, e.g. when its
        # connection is mid-reconnect as the ghost closes the session.
        while not lost.is_set():
            if time.monotonic() >= deadline:
                raise ZooKeeperServerError(
                    f"client session 0x{old_session_id:x} was not expired within {timeout}s"
                )
            ghost = KazooClient(hosts, client_id=client_id, timeout=max(timeout, 1.0))
            try:
                ghost.start(timeout=max(deadline - time.monotonic(), 0.5))
                ghost.stop()  # sends closeSession for the shared session
            finally:
                ghost.close()
            lost.wait(min(2.0, max(deadline - time.monotonic(), 0.0)))
        if not reconnected.wait(max(deadline - time.monotonic(), 0.0)):
            raise ZooKeeperServerError(
                f"client did not reconnect within {timeout}s after its session expired"
            )
    finally:
        client.remove_listener(on_state)
    new_id = client.client_id
    if new_id is None or new_id[0] == old_session_id:
        raise ZooKeeperServerError(
            f"client still on session 0x{old_session_id:x} after expiry (client id {new_id!r})"
        )


def ensure_chroot(hosts: str, path: str, timeout: float = 15.0) -> str:
    """Create `path` (and its parents) on the ensemble at `hosts`; return `hosts` + `path`.

    kazoo does not create a chroot itself, and a client chrooted to a missing path fails its
    first operation, so tests and `replog cluster up` create it first with an unchrooted client.
    """
    if not path.startswith("/") or path == "/" or path.endswith("/"):
        raise ValueError(f"chroot must be an absolute znode path like /replog, got {path!r}")
    client = KazooClient(hosts, timeout=timeout)
    try:
        client.start(timeout=timeout)
        client.ensure_path(path)
        client.stop()
    finally:
        client.close()
    return hosts.rstrip("/") + path

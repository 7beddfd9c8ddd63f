"""A real, standalone ZooKeeper 3.8 server run as a child process, plus session fault injection.

replog's controller coordinates through a real ZooKeeper (SPEC "Architecture"), so tests and
`replog cluster up` run the genuine server rather than a fake: Debian's `zookeeper` package jar,
started as `ZooKeeperServerMain` with a generated standalone `zoo.cfg` on a loopback port.

- `ZooKeeperServer` writes the config, starts the JVM in its own process group, waits until the
  server is really serving (`ruok` answers `imok` and `srvr` reports a mode), and stops it with
  SIGTERM then SIGKILL.
- `expire_session` (harness/zk_sessions.py) expires a kazoo client's session on the *server*,
  the way older releases of kazoo's test harness did: a second connection attaches to the same
  session id and password and closes it. The server then deletes the session's ephemeral znodes
  and drops every connection of that session, so the client sees LOST and builds a new session
  — a real fault, not a client-side fake (kazoo 2.11's harness only injects a local
  `_SESSION_EXPIRED` event, which leaves the session and its ephemerals alive on the server
  until the timeout).
- `ensure_chroot` (harness/zk_sessions.py) creates a chroot path and returns the chrooted
  connect string.
- `ZooKeeperEnsemble` (harness/zk_ensemble.py) runs 3 or 5 such servers as one quorum
  (`QuorumPeerMain`, a `server.N` line per member, one data dir and `myid` each): started and
  waited for until a leader is elected and every member serves, a member killed (SIGKILL) and
  restarted on its ports, and the current leader read from each member's `mntr`
  (`zk_server_state`).
- `server_command(config_file)` is the JVM command line for one server's config file, so
  `replog zookeeper --config FILE` runs a member in the foreground exactly as the launcher does.

No TLS, no auth, no dynamic reconfiguration. Free of pytest on purpose; `tests/conftest.py`
wraps it in fixtures.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from harness.polling import wait_until
from harness.ports import free_port, is_free

__all__ = [
    "DEFAULT_ZOOKEEPER_JAR",
    "QuorumPeer",
    "ZooKeeperNotInstalledError",
    "ZooKeeperServer",
    "ZooKeeperServerError",
    "four_letter_word",
    "server_command",
    "server_state",
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
# An ensemble member runs QuorumPeerMain, which reads the server.N lines and dataDir/myid.
_QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

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
# Written by replog's harness/zk_server.py: log to the console, which the launcher redirects to
# the server's log file.
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
# Every four-letter-word probe (readiness, who leads) logs "Processing mntr command" at INFO:
# polled every 0.1 s they would bury the lines that matter in the log tails shown on failure.
log4j.logger.org.apache.zookeeper.server.NIOServerCnxn=WARN
"""

_LOG_TAIL_LINES = 40
_STOP_GRACE_S = 5.0


class ZooKeeperServerError(RuntimeError):
    """The ZooKeeper server could not be started, or misbehaved."""


class ZooKeeperNotInstalledError(ZooKeeperServerError):
    """java or the ZooKeeper jar is missing on this machine."""


def _free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside the ephemeral range
    (harness/ports: the JVM binds it seconds later; the caller may still race another listener)."""
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


def _find_java(jar: Path) -> str:
    """java on PATH, checked together with the ZooKeeper jar it will run."""
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperNotInstalledError(
            "java not found on PATH: ZooKeeper needs a Java runtime "
            "(Debian/Ubuntu: apt-get install default-jre-headless zookeeper)"
        )
    if not jar.is_file():
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper jar not found at {jar} "
            "(Debian/Ubuntu: apt-get install zookeeper, or run 'make setup' as root)"
        )
    return java


def server_state(host: str, port: int, timeout: float = 1.0) -> str | None:
    """The server's role from `mntr` (`zk_server_state`): "leader", "follower" or "standalone"
    while it serves; None when it does not answer or is not serving (a member without a quorum
    answers "This ZooKeeper instance is not currently serving requests")."""
    try:
        reply = four_letter_word(host, port, "mntr", timeout=timeout)
    except OSError:
        return None
    m = re.search(r"^zk_server_state\s+(\S+)", reply, re.MULTILINE)
    return m.group(1) if m else None


@dataclass(frozen=True)
class QuorumPeer:
    """One ensemble member as every member's config names it: `server.<myid>=host:q:e`, plus
    the client port it serves on (not in the server line: each member's own clientPort)."""

    myid: int
    host: str
    client_port: int
    quorum_port: int  # followers connect to the leader here
    election_port: int  # leader election (FastLeaderElection) between members

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"


def _config_values(config_file: Path) -> dict[str, str]:
    values = {}
    for line in config_file.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def server_command(
    config_file: str | os.PathLike[str],
    *,
    java: str | None = None,
    jar: str | os.PathLike[str] = DEFAULT_ZOOKEEPER_JAR,
    log4j_file: str | os.PathLike[str] | None = None,
) -> list[str]:
    """The JVM command line that runs the server of `config_file`: `QuorumPeerMain` when the
    file has `server.N` lines (an ensemble member; dataDir/myid must exist), else the standalone
    `ZooKeeperServerMain`. The log4j file defaults to `log4j.properties` beside the config,
    as the launcher writes it; without one, logs go to the console with Debian's settings.

    Raises ZooKeeperServerError (one line) for a file that cannot run a server."""
    config_file = Path(config_file).resolve()
    if not config_file.is_file():
        raise ZooKeeperServerError(f"no ZooKeeper config file at {config_file}")
    values = _config_values(config_file)
    if "dataDir" not in values:
        raise ZooKeeperServerError(f"{config_file} sets no dataDir")
    members = sorted(int(k.split(".", 1)[1]) for k in values
                     if k.startswith("server.") and k.split(".", 1)[1].isdigit())
    if members:
        myid_file = Path(values["dataDir"]) / "myid"
        try:
            myid = int(myid_file.read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            raise ZooKeeperServerError(
                f"{config_file} names an ensemble (server.{members[0]}...) but {myid_file} "
                "does not hold this member's id") from None
        if myid not in members:
            raise ZooKeeperServerError(
                f"{myid_file} says myid {myid}, which no server.N line of {config_file} names "
                f"(members {members})")
    if java is None:
        java = _find_java(Path(jar))
    if log4j_file is None and (config_file.parent / "log4j.properties").is_file():
        log4j_file = config_file.parent / "log4j.properties"
    classpath = [str(DEBIAN_CONF_DIR), str(jar)]
    classpath += [str(j) for j in _LOG_BINDING_JARS if j.is_file()]
    log4j = ([f"-Dlog4j.configuration={Path(log4j_file).resolve().as_uri()}"]
             if log4j_file is not None else ["-Dzookeeper.root.logger=INFO,CONSOLE"])
    return [
        java,
        *_JVM_FLAGS,
        *log4j,
        "-cp",
        os.pathsep.join(classpath),
        _QUORUM_MAIN_CLASS if members else _MAIN_CLASS,
        str(config_file),
    ]


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
        myid: int | None = None,
        peers: Sequence[QuorumPeer] = (),
        host: str = "127.0.0.1",
        command_prefix: Sequence[str] = (),
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
        # An ensemble member: its myid and every member's quorum line (its own included).
        self.myid = myid
        self.peers = tuple(peers)
        if self.peers and (myid is None or myid not in {p.myid for p in self.peers}):
            raise ValueError(f"myid {myid} is not one of the peers {[p.myid for p in peers]}")
        # The address served on, and what runs the JVM there: a host of its own under
        # `replog cluster up --hosts` (harness/hosts.py: `ip netns exec <its namespace>`).
        self.host = host
        self.command_prefix = list(command_prefix)
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
        return f"{self.host}:{self._port}"

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
                _live_servers.add(self)
                try:
                    self._wait_until_serving(timeout)
                    return self
                except ZooKeeperServerError as exc:
                    self._terminate()
                    if attempt < attempts and "Address already in use" in str(exc):
                        self._port = _free_loopback_port()
                        continue
                    raise
            raise AssertionError("unreachable")

    def launch(self) -> ZooKeeperServer:
        """Start the process on its (pinned) port without waiting: an ensemble member serves
        only once a quorum of members runs, so the ensemble launches all before waiting."""
        with self._lock:
            if not self.is_running():
                java = self._find_java()
                mine = [p for p in self.peers if p.myid == self.myid]
                for port in [self._port] + [q for p in mine
                                            for q in (p.quorum_port, p.election_port)]:
                    if not is_free(port):
                        raise ZooKeeperServerError(
                            f"port {port} on 127.0.0.1 is already in use; cannot start "
                            f"ZooKeeper {self._label()} there")
                self._launch(java)
                _live_servers.add(self)
        return self

    def wait_until_serving(self, timeout: float = 30.0) -> None:
        """Return once the server answers `srvr` with a mode (standalone, leader, follower);
        raise ZooKeeperServerError if it exits or does not serve within `timeout` seconds."""
        self._wait_until_serving(timeout)

    def kill(self) -> None:
        """SIGKILL the server (a crash: no clean shutdown) and reap it."""
        with self._lock:
            proc = self._proc
            if proc is not None and proc.poll() is None:
                self._signal_group(proc, signal.SIGKILL)
                proc.wait()

    def restart(self, timeout: float = 30.0, wait: bool = True) -> ZooKeeperServer:
        """Stop if running, then start again on the *same* port: every connect string naming
        this server stays valid. Without `wait`, only launched (see `launch`)."""
        self.stop()
        self._port_pinned = True
        self.launch()
        if wait:
            try:
                self._wait_until_serving(timeout)
            except ZooKeeperServerError:
                self.stop()
                raise
        return self

    def state(self, timeout: float = 1.0) -> str | None:
        """"leader", "follower", "standalone" while serving; None otherwise (see server_state)."""
        if not self.is_running():
            return None
        return server_state(self.host, self._port, timeout)

    def stop(self, timeout: float = _STOP_GRACE_S) -> None:
        """SIGTERM the server's process group, then SIGKILL it if still alive after `timeout`."""
        with self._lock:
            self._terminate(timeout)
            _live_servers.discard(self)

    def __enter__(self) -> Self:
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
        return _find_java(self.jar)

    def _label(self) -> str:
        return f"member {self.myid}" if self.peers else "server"

    def _write_config(self) -> None:
        kind = f"ensemble member {self.myid}" if self.peers else "a standalone server"
        lines = [
            f"# Written by replog's harness/zk_server.py: {kind} for tests and",
            "# `replog cluster up`; rewritten on every start.",
            f"dataDir={self.data_dir}",
            f"clientPort={self._port}",
            # Loopback only: a test or dev server must not be reachable from the network.
            f"clientPortAddress={self.host}",
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
        if self.peers:
            lines += [
                # Ticks a follower has to connect and sync to a new leader (initLimit), and to
                # stay in step with it (syncLimit): ZooKeeper requires both in quorum mode.
                "initLimit=10",
                "syncLimit=5",
                # Each member is one host: a reconfig is out of scope, so the member list is
                # static and the same in every member's file.
                "reconfigEnabled=false",
                *(f"server.{p.myid}={p.host}:{p.quorum_port}:{p.election_port}"
                  for p in self.peers),
            ]
            # QuorumPeerConfig reads the member's identity from dataDir/myid, not the file.
            (self.data_dir / "myid").write_text(f"{self.myid}\n", encoding="ascii")
        self.config_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self._log4j_file.write_text(_LOG4J_PROPERTIES, encoding="utf-8")

    def _command(self, java: str) -> list[str]:
        return self.command_prefix + server_command(self.config_file, java=java, jar=self.jar,
                                                    log4j_file=self._log4j_file)

    def _launch(self, java: str) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self._write_config()
        with self.log_file.open("ab") as log:
            log.write(f"--- replog: starting ZooKeeper {self._label()} on {self.hosts} "
                      "---\n".encode())
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
        last_reply = ""

        def serving() -> bool:
            nonlocal last_reply
            code = self._proc.poll()
            if code is not None:
                raise ZooKeeperServerError(
                    f"ZooKeeper on {self.hosts} exited with code {code} during start-up; "
                    f"last lines of {self.log_file}:\n{self.log_tail()}"
                )
            try:
                # ruok only says the JVM's server thread is up; srvr answers "This ZooKeeper
                # instance is not currently serving requests" until the database is loaded.
                if four_letter_word(self.host, self._port, "ruok", timeout=1.0) == "imok":
                    last_reply = four_letter_word(self.host, self._port, "srvr", timeout=1.0)
                    return "Mode:" in last_reply
            except OSError as exc:
                last_reply = repr(exc)
            return False

        wait_until(serving, timeout, interval=0.05, timed_out=lambda _: ZooKeeperServerError(
            f"ZooKeeper on {self.hosts} not serving after {timeout:.0f}s "
            f"(last probe: {last_reply.strip()!r}); last lines of {self.log_file}:\n"
            f"{self.log_tail()}"))

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

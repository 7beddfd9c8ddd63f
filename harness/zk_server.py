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
- `ZooKeeperEnsemble` runs 3 or 5 such servers as one quorum (`QuorumPeerMain`, a `server.N`
  line per member, one data dir and `myid` each): started and waited for until a leader is
  elected and every member serves, a member killed (SIGKILL) and restarted on its ports, and
  the current leader read from each member's `mntr` (`zk_server_state`).
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
import time
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from harness.ports import free_port, is_free
from harness.polling import wait_until

__all__ = [
    "DEFAULT_ZOOKEEPER_JAR",
    "QuorumPeer",
    "ZooKeeperEnsemble",
    "ZooKeeperNotInstalledError",
    "ZooKeeperServer",
    "ZooKeeperServerError",
    "ensure_chroot",
    "expire_session",
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


class ZooKeeperEnsemble:
    """`size` ZooKeeper servers on 127.0.0.1 forming one quorum, member i (myid i, from 1) in
    `base_dir/zookeeper-<i>` with its `zoo.cfg`, `myid` and log (`log_dir/zookeeper-<i>.log`).

    Every port (client, quorum, election) is picked once, outside the ephemeral range
    (harness/ports), and kept across restarts, so `hosts` stays valid for the ensemble's life.
    ZooKeeper sizes a quorum as a strict majority, so 3 members survive one loss and 5 two."""

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        size: int = 3,
        *,
        tick_time_ms: int = 2000,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        jar: str | os.PathLike[str] = DEFAULT_ZOOKEEPER_JAR,
        hosts: Sequence[str] | None = None,
        command_prefixes: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """`hosts[i]` and `command_prefixes[i]`: member i+1's own address and what runs it
        there (`replog cluster up --hosts`); every member on 127.0.0.1 by default."""
        if size < 1:
            raise ValueError(f"an ensemble needs at least one member, got {size}")
        self.base_dir = Path(base_dir).resolve()
        log_dir = Path(log_dir).resolve() if log_dir is not None else None
        used: set[int] = set()

        def port() -> int:
            p = free_port("127.0.0.1", exclude=used)
            used.add(p)
            return p

        addrs = list(hosts) if hosts is not None else ["127.0.0.1"] * size
        prefixes = [list(c) for c in command_prefixes] if command_prefixes else [[]] * size
        self.peers = tuple(QuorumPeer(i, addrs[i - 1], port(), port(), port())
                           for i in range(1, size + 1))
        self.members: dict[int, ZooKeeperServer] = {
            p.myid: ZooKeeperServer(
                self.base_dir / f"zookeeper-{p.myid}",
                port=p.client_port,
                tick_time_ms=tick_time_ms,
                min_session_timeout_ms=min_session_timeout_ms,
                max_session_timeout_ms=max_session_timeout_ms,
                log_file=(log_dir / f"zookeeper-{p.myid}.log") if log_dir else None,
                jar=jar,
                myid=p.myid,
                peers=self.peers,
                host=p.host,
                command_prefix=prefixes[p.myid - 1],
            )
            for p in self.peers
        }

    # -- facts -----------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def quorum(self) -> int:
        return self.size // 2 + 1

    @property
    def hosts(self) -> str:
        """Every member's client address: the kazoo / `zookeeper.connect` string."""
        return ",".join(p.address for p in self.peers)

    def member(self, myid: int) -> ZooKeeperServer:
        try:
            return self.members[myid]
        except KeyError:
            raise ZooKeeperServerError(
                f"no ZooKeeper member {myid} (members: {sorted(self.members)})") from None

    def states(self) -> dict[int, str | None]:
        """Each member's `zk_server_state` (None: down or not serving)."""
        return {i: m.state() for i, m in self.members.items()}

    def leader(self) -> int | None:
        """The myid of the member that reports itself leader, or None (no quorum)."""
        leaders = [i for i, st in self.states().items() if st == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def __repr__(self) -> str:
        return f"ZooKeeperEnsemble({self.hosts}, states={self.states()})"

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> ZooKeeperEnsemble:
        """Launch every member and return once a leader is elected and every member serves.
        On failure every member is stopped again."""
        try:
            for m in self.members.values():
                m.launch()
            self.wait_for_quorum(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_for_quorum(self, timeout: float = 60.0, members: Sequence[int] | None = None
                        ) -> int:
        """Wait until every running member (or those in `members`) serves and exactly one is
        the leader; return the leader's myid."""
        want: list[ZooKeeperServer] = []
        states: dict[int, str | None] = {}

        def leader() -> int | None:
            nonlocal want, states
            want = [self.member(i) for i in members] if members is not None else \
                [m for m in self.members.values() if m.is_running()]
            for m in want:
                code = m._proc.poll() if m._proc is not None else None
                if code is not None:
                    raise ZooKeeperServerError(
                        f"ZooKeeper member {m.myid} exited with code {code}; last lines of "
                        f"{m.log_file}:\n{m.log_tail()}")
            states = {m.myid: m.state() for m in want}
            leaders = [i for i, st in self.states().items() if st == "leader"]
            if want and all(st in ("leader", "follower") for st in states.values()) \
                    and len(leaders) == 1:
                return leaders[0]
            return None

        def timed_out(_last) -> ZooKeeperServerError:
            tails = "".join(f"--- member {m.myid} ({m.log_file}) ---\n{m.log_tail(10)}"
                            for m in want)
            return ZooKeeperServerError(
                f"ZooKeeper ensemble {self.hosts} has no quorum after {timeout:.0f}s "
                f"(member states {states})\n{tails}")

        # myid 0 is not a member id (ZooKeeper's myid is 1..255), so a leader is always truthy.
        return wait_until(leader, timeout, timed_out=timed_out)

    def kill(self, myid: int) -> None:
        """SIGKILL one member (a host crash for ZooKeeper: no clean shutdown)."""
        self.member(myid).kill()

    def restart(self, myid: int, timeout: float = 60.0, wait: bool = True) -> None:
        """Start a member again on its ports; with `wait`, until it serves - which needs a
        quorum of running members, so restore a lost majority with `restart_many`."""
        m = self.member(myid)
        m.restart(wait=False)
        if wait:
            self.wait_for_quorum(timeout, members=[myid])

    def restart_many(self, myids: Sequence[int], timeout: float = 60.0) -> None:
        """Launch the members together, then wait until each serves (a majority restored)."""
        for i in myids:
            self.member(i).restart(wait=False)
        self.wait_for_quorum(timeout, members=list(myids))

    def stop(self, timeout: float = _STOP_GRACE_S) -> None:
        for m in self.members.values():
            m.stop(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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


def ensure_chroot(hosts: str, path: str, timeout: float = 15.0, *,
                  auth_data: Sequence[tuple[str, str]] = (), acl=None) -> str:
    """Create `path` (and its parents) on the ensemble at `hosts`; return `hosts` + `path`.
    `auth_data` and `acl`: the credentials to send and the ACL of the levels created
    (kazoo's; zookeeper.set.acl's chroot ACL, common/security/zk_auth.py).

    kazoo does not create a chroot itself, and a client chrooted to a missing path fails its
    first operation, so tests and `replog cluster up` create it first with an unchrooted client.
    """
    if not path.startswith("/") or path == "/" or path.endswith("/"):
        raise ValueError(f"chroot must be an absolute znode path like /replog, got {path!r}")
    client = KazooClient(hosts, timeout=timeout, auth_data=list(auth_data))
    try:
        client.start(timeout=timeout)
        client.ensure_path(path, acl=acl)
        client.stop()
    finally:
        client.close()
    return hosts.rstrip("/") + path

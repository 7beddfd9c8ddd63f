"""A real ZooKeeper ensemble of 3 or 5 servers as one quorum (``QuorumPeerMain``, a
``server.N`` line per member, one data dir and ``myid`` each): started and waited for until a
leader is elected and every member serves, a member killed (SIGKILL) and restarted on its
ports, and the current leader read from each member's ``mntr`` (``zk_server_state``). Each
member is a harness.zk_server.ZooKeeperServer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from harness.polling import wait_until
from harness.ports import free_port
from harness.zk_server import (
    _STOP_GRACE_S,
    DEFAULT_ZOOKEEPER_JAR,
    QuorumPeer,
    ZooKeeperServer,
    ZooKeeperServerError,
)


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

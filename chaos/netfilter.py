"""Network partitions between chosen processes of one machine: nftables on loopback ports.

Every replog process listens on 127.0.0.1, so addresses cannot tell processes apart; ports
and sockets can. A process to be cut off is moved into its own cgroup v2 group
(``<cgroup2 mount>/replog-chaos-<pid>/<name>``), and a rule in this runner's own table
(``inet replog_chaos_<pid>``) drops packets that a socket of that group sends out on ``lo`` to
the other side's listening ports; the other side's packets to the process's existing
connections are dropped too. Both directions of every connection stop, which is what a
partition looks like to gRPC and ZooKeeper: calls time out, sessions are not renewed. Nothing else is touched: rules only match ``lo``,
only the cluster's own ports, and the table and groups are removed on heal.

Needs root, the ``nft`` binary and a cgroup v2 hierarchy under /sys/fs/cgroup (nft resolves
group paths there); ``unavailable()`` says which is missing.
"""  # noqa: E501

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import psutil

NFT_BASE = Path("/sys/fs/cgroup")


def cgroup2_mount() -> Path | None:
    try:
        mounts = psutil.disk_partitions(all=True)
    except OSError:
        return None
    return next((Path(m.mountpoint) for m in mounts if m.fstype == "cgroup2"), None)


def unavailable() -> str | None:
    """Why partitions cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (nftables rules and cgroups)"
    if shutil.which("nft") is None:
        return "needs the nft binary (Debian's nftables package)"
    mount = cgroup2_mount()
    if mount is None or not (mount == NFT_BASE or NFT_BASE in mount.parents):
        return "needs a cgroup v2 hierarchy under /sys/fs/cgroup"
    return None


class Netfilter:
    """This runner's nftables table and cgroups; ``block(src, pid, ports)`` cuts the process
    ``pid`` off from ``ports``; ``heal()`` removes every rule and group."""

    def __init__(self, tag: str | None = None):
        self.tag = tag or str(os.getpid())
        self.table = f"replog_chaos_{self.tag}"
        mount = cgroup2_mount()
        self.root = (mount / f"replog-chaos-{self.tag}") if mount is not None else None
        self._moved: dict[int, Path] = {}  # pid -> the cgroup it came from
        self._table_made = False

    def _nft(self, *args: str) -> None:
        subprocess.run(["nft", *args], check=True, capture_output=True, text=True)

    def _ensure_table(self) -> None:
        if not self._table_made:
            self._nft("add", "table", "inet", self.table)
            self._nft("add", "chain", "inet", self.table, "out",
                      "{ type filter hook output priority 0; policy accept; }")
            self._table_made = True

    def _group_of(self, name: str, pid: int) -> tuple[str, int]:
        """Move ``pid`` (all its threads) into its own group; return nft's path and level."""
        assert self.root is not None
        group = self.root / name
        group.mkdir(parents=True, exist_ok=True)
        if pid not in self._moved:
            self._moved[pid] = _current_cgroup(pid)
        (group / "cgroup.procs").write_text(f"{pid}\n")
        mount = cgroup2_mount()
        assert mount is not None
        level = len(group.relative_to(mount).parts)
        return str(group.relative_to(NFT_BASE)), level

    def block(self, name: str, pid: int, ports: list[int]) -> None:
        """Cut ``pid`` off from ``ports`` on lo: what it sends there, on new connections
        through its cgroup and on existing ones through their local ports (a socket keeps the
        cgroup it was created in, so moving the process does not move its open connections),
        and what comes back from those ports to its existing connections."""
        self._ensure_table()
        path, level = self._group_of(name, pid)
        dports = _nft_set(ports)
        self._nft("add", "rule", "inet", self.table, "out", "oifname", "lo", "socket",
                  "cgroupv2", "level", str(level), f'"{path}"', "tcp", "dport", dports, "drop")
        local = local_tcp_ports(pid)
        if local:
            self._nft("add", "rule", "inet", self.table, "out", "oifname", "lo", "tcp",
                      "sport", _nft_set(local), "tcp", "dport", dports, "drop")
            # ... and what the other side sends back on those connections. Without this an
            # answer already on its way (a long-poll fetch completing, a ZooKeeper reply)
            # still reached the process, so a cut stream could deliver after the cut: a real
            # partition drops both directions of a link.
            self._nft("add", "rule", "inet", self.table, "out", "oifname", "lo", "tcp",
                      "sport", dports, "tcp", "dport", _nft_set(local), "drop")

    def cuts(self, pid: int | None) -> bool:
        """Whether ``pid`` is cut off from something (moved into one of this table's groups)."""
        return pid is not None and pid in self._moved

    def heal(self) -> None:
        if self._table_made:
            with contextlib.suppress(subprocess.CalledProcessError):
                self._nft("delete", "table", "inet", self.table)
            self._table_made = False
        for pid, origin in list(self._moved.items()):
            with contextlib.suppress(OSError):  # the process may have died meanwhile
                (origin / "cgroup.procs").write_text(f"{pid}\n")
            del self._moved[pid]
        if self.root is not None and self.root.exists():
            for group in sorted(self.root.iterdir(), reverse=True):
                if group.is_dir():
                    with contextlib.suppress(OSError):  # busy: a process we never moved back
                        group.rmdir()
            with contextlib.suppress(OSError):
                self.root.rmdir()


def _current_cgroup(pid: int) -> Path:
    # psutil has no cgroup API: the process's cgroup v2 path is read from /proc itself
    mount = cgroup2_mount()
    assert mount is not None
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return mount / line[3:].lstrip("/")
    return mount


def _nft_set(ports) -> str:
    return "{ " + ", ".join(str(p) for p in sorted(set(ports))) + " }"


def local_tcp_ports(pid: int) -> set[int]:
    """Local ports of the TCP sockets ``pid`` holds open (psutil matches its fds against the
    TCP tables of our network namespace, which the local cluster's processes share)."""
    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:
        return set()
    return {c.laddr.port for c in conns if c.laddr}

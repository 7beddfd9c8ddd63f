"""Hosts as network namespaces, racks with real latency: the plan, and a thin shell that runs it.

``replog cluster up --hosts`` runs every process (ZooKeeper member, controller, broker) in its
own network namespace with its own address, so a partition, a delay or a loss applies to one
host's links as it would on a real network. This module decides *what* to create (a pure
:class:`HostsPlan`: names, addresses, racks, the exact commands to set it up and tear it down)
and runs it (:func:`apply`, :func:`teardown`, :func:`cleanup_stale`).

The shape, for a cluster whose data dir hashes to ``tag`` (6 hex digits):

- a *switch* namespace ``replog-<tag>-net`` holding the bridge ``replog0``. The bridge lives
  there, not in the host's namespace, because the host's bridge netfilter
  (``net.bridge.bridge-nf-call-iptables=1``) would pass bridged packets through the host's
  iptables FORWARD chain, whose policy may be DROP (Docker sets it so): inside the switch
  namespace no rule exists and bridge-nf is switched off;
- one namespace per process, ``replog-<tag>-<role><id>`` (``replog-1a2b3c-broker1``), with a
  veth ``eth0`` into the bridge (the switch's end is ``p-<r><id>``: ``p-b1``, ``p-c100``,
  ``p-z1``), an address ``10.77.<N>.<10+i>/24``, loopback up and *no default route*: nothing
  leaves the cluster's own /24;
- the host's end: a veth ``replog-<tag>`` into the bridge with ``10.77.<N>.1/24``, so the CLI,
  ``metrics export`` and Prometheus on the host reach every process as before. ``N`` is a /24
  no interface of the host uses yet (chosen under a lock: two clusters at once get two).

Racks: ``racks=R`` spreads brokers (and ZooKeeper members and controllers, as a real deployment
spreads them) round-robin over ``rack-1`` .. ``rack-R``; brokers get ``broker.rack``.
Between racks, each host delays what it sends to another rack by ``latency_ms`` (so a round trip
between racks costs twice that) and drops ``loss_pct`` percent of it:

- the delay: this kernel has no sch_netem (nor the prio qdisc or flower/matchall classifiers a
  per-destination netem needs), so an iptables NFQUEUE rule in the host's namespace hands
  packets to another rack to ``harness.netdelay`` (run in that namespace), which accepts each one
  ``latency_ms`` after it was queued. ``--queue-bypass`` lets packets through undelayed if the
  delayer is gone, rather than cutting the link;
- the loss: an nftables rule in the namespace, ``numgen random mod 10000 < loss*100 drop``.

Everything the cluster made lives in its namespaces, plus the host's veth: deleting the
namespaces (after ending the processes still in them) and that veth removes every bridge, qdisc
and rule. ``hosts.json`` in the data dir records the plan; :func:`cleanup_stale` also finds what a
killed ``cluster up`` left by the ``replog-<tag>`` prefix alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from common.errors import ReplogError

HOSTS_JSON = "hosts.json"
BRIDGE = "replog0"
SUBNET_PREFIX = "10.77"  # 10.77.<N>.0/24, one N per running cluster
FIRST_HOST = 10  # .1 is the host (gateway), .2-.9 left free
RACK_QUEUE = 1  # NFQUEUE numbers: inter-rack latency ...
SPIKE_QUEUE = 2  # ... and a chaos latency spike on one host's links
CHAOS_TABLE = "replog_chaos"  # nftables table of chaos rules inside a host's namespace
RACK_TABLE = "replog_rack"  # nftables table of the inter-rack loss
LOCK_PATH = Path("/run/replog-hosts.lock")
_ROLE_LETTER = {"broker": "b", "controller": "c", "zookeeper": "z"}

Cmd = list[str]


class HostsError(ReplogError):
    """Hosts could not be created, inspected or removed."""


def cluster_tag(data_dir: str | os.PathLike[str]) -> str:
    """6 hex digits naming every namespace and link of the cluster in ``data_dir``."""
    return hashlib.sha1(str(Path(data_dir).resolve()).encode()).hexdigest()[:6]


def unavailable() -> str | None:
    """Why hosts cannot be made here (one line), or None when they can."""
    if os.geteuid() != 0:
        return "--hosts needs root (it creates network namespaces, veths and a bridge)"
    for tool in ("ip", "iptables", "nft"):
        if shutil.which(tool) is None:
            return f"--hosts needs the {tool} command (Debian's iproute2, iptables, nftables)"
    if subprocess.run(["ip", "netns", "list"], check=False,
                      capture_output=True).returncode != 0:
        return "--hosts needs network namespaces ('ip netns list' fails here)"
    return None


@dataclass(frozen=True)
class Host:
    """One process's host: its namespace, the switch's port for it, its address and rack."""

    name: str  # the process: broker-1, controller-100, zookeeper-1
    netns: str
    port: str  # the veth end in the switch namespace (the host's end is always eth0)
    address: str
    rack: str | None = None

    @property
    def role(self) -> str:
        return self.name.rpartition("-")[0]


@dataclass(frozen=True)
class HostsPlan:
    """What one cluster's hosts are; every method is pure (commands are returned, not run)."""

    tag: str
    subnet: int  # N in 10.77.N.0/24
    hosts: tuple[Host, ...]
    racks: int = 1
    latency_ms: float = 0.0
    loss_pct: float = 0.0
    python: str = field(default=sys.executable, compare=False)

    # -- names ------------------------------------------------------------------------------

    @property
    def switch_netns(self) -> str:
        return f"replog-{self.tag}-net"

    @property
    def uplink(self) -> str:
        """The host's veth into the bridge (15 characters at most: an interface name)."""
        return f"replog-{self.tag}"

    @property
    def gateway(self) -> str:
        return f"{SUBNET_PREFIX}.{self.subnet}.1"

    @property
    def namespaces(self) -> list[str]:
        return [h.netns for h in self.hosts] + [self.switch_netns]

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise HostsError(f"no host {name} in this cluster "
                         f"(hosts: {', '.join(h.name for h in self.hosts)})")

    def rack_of(self, name: str) -> str | None:
        return self.host(name).rack

    def rack_names(self) -> list[str]:
        return [f"rack-{k}" for k in range(1, self.racks + 1)] if self.racks > 1 else []

    def in_rack(self, rack: str) -> list[Host]:
        return [h for h in self.hosts if h.rack == rack]

    def other_racks(self, h: Host) -> list[str]:
        """Addresses of the hosts in racks other than ``h``'s."""
        return [o.address for o in self.hosts if o.rack != h.rack]

    @property
    def shaped(self) -> bool:
        return self.racks > 1 and (self.latency_ms > 0 or self.loss_pct > 0)

    # -- commands ---------------------------------------------------------------------------

    def setup_commands(self) -> list[Cmd]:
        sw = self.switch_netns
        cmds: list[Cmd] = [
            ["ip", "netns", "add", sw],
            ["ip", "-n", sw, "link", "set", "lo", "up"],
            ["ip", "-n", sw, "link", "add", BRIDGE, "type", "bridge"],
            ["ip", "-n", sw, "link", "set", BRIDGE, "up"],
            ["ip", "link", "add", self.uplink, "type", "veth", "peer", "name", "up0",
             "netns", sw],
            ["ip", "-n", sw, "link", "set", "up0", "master", BRIDGE, "up"],
            ["ip", "addr", "add", f"{self.gateway}/24", "dev", self.uplink],
            ["ip", "link", "set", self.uplink, "up"],
        ]
        for h in self.hosts:
            cmds += [
                ["ip", "netns", "add", h.netns],
                ["ip", "link", "add", h.port, "netns", sw, "type", "veth", "peer", "name",
                 "eth0", "netns", h.netns],
                ["ip", "-n", sw, "link", "set", h.port, "master", BRIDGE, "up"],
                ["ip", "-n", h.netns, "link", "set", "lo", "up"],
                ["ip", "-n", h.netns, "addr", "add", f"{h.address}/24", "dev", "eth0"],
                ["ip", "-n", h.netns, "link", "set", "eth0", "up"],
            ]
            cmds += self.rack_commands(h)
        return cmds

    def optional_setup_commands(self) -> list[Cmd]:
        """Run after setup; a failure is fine (no br_netfilter in the switch namespace: then
        bridged packets never meet netfilter anyway)."""
        return [["ip", "netns", "exec", self.switch_netns, "sysctl", "-qw",
                 "net.bridge.bridge-nf-call-iptables=0"]]

    def rack_commands(self, h: Host) -> list[Cmd]:
        """Delay and loss on what ``h`` sends to other racks (nothing within its rack)."""
        others = self.other_racks(h)
        if not self.shaped or not others:
            return []
        cmds: list[Cmd] = []
        if self.latency_ms > 0:
            cmds.append(["ip", "netns", "exec", h.netns, "iptables", "-w", "-A", "OUTPUT",
                         "-d", ",".join(f"{a}/32" for a in others), "-j", "NFQUEUE",
                         "--queue-num", str(RACK_QUEUE), "--queue-bypass"])
        if self.loss_pct > 0:
            cmds += nft_drop_commands(h.netns, RACK_TABLE, "output", "ip daddr", others,
                                      self.loss_pct)
        return cmds

    def delayer_command(self, h: Host, queue: int = RACK_QUEUE,
                        delay_ms: float | None = None) -> Cmd | None:
        """The ``harness.netdelay`` process serving ``h``'s queue (None: nothing to delay)."""
        delay = self.latency_ms if delay_ms is None else delay_ms
        if queue == RACK_QUEUE and (not self.shaped or self.latency_ms <= 0
                                    or not self.other_racks(h)):
            return None
        return ["ip", "netns", "exec", h.netns, self.python, "-m", "harness.netdelay",
                "--queue", str(queue), "--delay-ms", f"{delay:g}"]

    def teardown_commands(self) -> list[Cmd]:
        """Every namespace (their veths, qdiscs and rules go with them), the switch, the host's
        veth. Run after the processes in the namespaces have ended; each may fail harmlessly
        (already gone)."""
        return ([["ip", "netns", "delete", ns] for ns in self.namespaces]
                + [["ip", "link", "delete", self.uplink]])

    def wrap(self, name: str, cmd: Sequence[str]) -> Cmd:
        """``cmd`` run in process ``name``'s namespace (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.host(name).netns, *cmd]

    # -- chaos (chaos/host_nemesis.py) -------------------------------------------------------

    @property
    def cidr(self) -> str:
        return f"{SUBNET_PREFIX}.{self.subnet}.0/24"

    def cut_commands(self, src: str, dst: str) -> list[Cmd]:
        """``src`` stops reaching ``dst``; ``dst``'s packets still reach ``src`` (one
        direction: an asymmetric partition, as a one-way firewall rule or a broken link
        direction makes it)."""
        return nft_drop_commands(self.host(src).netns, CHAOS_TABLE, "output", "ip daddr",
                                 [self.host(dst).address])

    def rack_cut_commands(self, rack: str) -> list[Cmd]:
        """Every host of ``rack`` cut off from every host of the other racks, both ways (its
        uplink gone); this machine (the clients) still reaches it."""
        members = self.in_rack(rack)
        if not members:
            raise HostsError(f"no host in {rack} (racks: {', '.join(self.rack_names())})")
        others = [h.address for h in self.hosts if h.rack != rack]
        cmds: list[Cmd] = []
        for h in members:
            cmds += nft_drop_commands(h.netns, CHAOS_TABLE, "output", "ip daddr", others)
            cmds += nft_drop_commands(h.netns, CHAOS_TABLE, "input", "ip saddr", others)
        return cmds

    def link_loss_commands(self, name: str, loss_pct: float) -> list[Cmd]:
        """``loss_pct`` percent of what host ``name`` sends and receives on its link dropped."""
        ns = self.host(name).netns
        return (nft_drop_commands(ns, CHAOS_TABLE, "output", "ip daddr", [self.cidr], loss_pct)
                + nft_drop_commands(ns, CHAOS_TABLE, "input", "ip saddr", [self.cidr],
                                    loss_pct))

    def link_delay_commands(self, name: str) -> list[Cmd]:
        """What host ``name`` sends and receives queued to SPIKE_QUEUE (its delayer, started
        with ``delayer_command(h, SPIKE_QUEUE, ms)``, holds each packet). In the mangle table:
        it comes before the filter table's inter-rack queue, so a spike adds to the racks'
        delay instead of replacing it."""
        ns = self.host(name).netns
        q = ["-j", "NFQUEUE", "--queue-num", str(SPIKE_QUEUE), "--queue-bypass"]
        return [["ip", "netns", "exec", ns, "iptables", "-w", "-t", "mangle", "-A", "OUTPUT",
                 "-d", self.cidr, *q],
                ["ip", "netns", "exec", ns, "iptables", "-w", "-t", "mangle", "-A", "INPUT",
                 "-s", self.cidr, *q]]

    def chaos_heal_commands(self) -> list[Cmd]:
        """Remove every chaos rule from every host (each may fail harmlessly: none there)."""
        cmds: list[Cmd] = []
        for h in self.hosts:
            cmds.append(["ip", "netns", "exec", h.netns, "nft", "delete", "table", "inet",
                         CHAOS_TABLE])
            cmds += [["ip", "netns", "exec", h.netns, "iptables", "-w", "-t", "mangle", "-F",
                      chain] for chain in ("OUTPUT", "INPUT")]
        return cmds

    # -- record -----------------------------------------------------------------------------

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("python")
        d.update(switch_netns=self.switch_netns, uplink=self.uplink, gateway=self.gateway,
                 bridge=BRIDGE)
        return d

    @classmethod
    def from_json(cls, d: dict) -> HostsPlan:
        return cls(d["tag"], int(d["subnet"]), tuple(Host(**h) for h in d["hosts"]),
                   int(d.get("racks", 1)), float(d.get("latency_ms", 0)),
                   float(d.get("loss_pct", 0)))


def nft_drop_commands(netns: str, table: str, hook: str, match: str, addresses: Iterable[str],
                      loss_pct: float = 100.0) -> list[Cmd]:
    """An nftables table in ``netns`` whose ``hook`` chain drops packets matching ``match``
    (``ip daddr`` or ``ip saddr``) one of ``addresses``; ``loss_pct`` < 100 drops that share at
    random (numgen), as netem's ``loss`` does."""
    addrs = "{ " + ", ".join(addresses) + " }"
    chain = hook
    rule = f"{match} {addrs}"
    if loss_pct < 100:
        rule += f" numgen random mod 10000 < {round(loss_pct * 100)}"
    return [["ip", "netns", "exec", netns, "nft", "add", "table", "inet", table],
            ["ip", "netns", "exec", netns, "nft", "add", "chain", "inet", table, chain,
             f"{{ type filter hook {hook} priority 0; policy accept; }}"],
            ["ip", "netns", "exec", netns, "nft", "add", "rule", "inet", table, chain,
             *rule.split(), "drop"]]


def plan(tag: str, subnet: int, processes: Sequence[str], racks: int = 1,
         latency_ms: float = 0.0, loss_pct: float = 0.0, python: str | None = None
         ) -> HostsPlan:
    """The hosts of ``processes`` (``broker-1``, ``controller-100``, ``zookeeper-1`` ...):
    addresses in list order, racks round-robin within each role."""
    if racks < 1:
        raise HostsError(f"--racks must be at least 1, got {racks}")
    if latency_ms < 0 or not 0 <= loss_pct <= 100:
        raise HostsError("--inter-rack-latency-ms must be >= 0 and --inter-rack-loss-pct "
                         "within 0-100")
    if (latency_ms or loss_pct) and racks < 2:
        raise HostsError("--inter-rack-latency-ms/--inter-rack-loss-pct need --racks 2 or "
                         "more")
    if not 0 <= subnet <= 255 or not re.fullmatch(r"[0-9a-f]{6}", tag):
        raise HostsError(f"bad tag {tag!r} or subnet {subnet}")
    if len(processes) > 254 - FIRST_HOST:
        raise HostsError(f"at most {254 - FIRST_HOST} hosts in one cluster")
    seen: dict[str, int] = {}
    hosts = []
    for i, name in enumerate(processes):
        role, _, nid = name.rpartition("-")
        if role not in _ROLE_LETTER or not nid.isdigit():
            raise HostsError(f"not a process name: {name!r}")
        k = seen.get(role, 0)
        seen[role] = k + 1
        rack = f"rack-{k % racks + 1}" if racks > 1 else None
        hosts.append(Host(name, f"replog-{tag}-{role}{nid}", f"p-{_ROLE_LETTER[role]}{nid}",
                          f"{SUBNET_PREFIX}.{subnet}.{FIRST_HOST + i}", rack))
    if any(len(h.port) > 15 for h in hosts):
        raise HostsError("process ids too long for interface names")
    return HostsPlan(tag, subnet, tuple(hosts), racks, float(latency_ms), float(loss_pct),
                     python or sys.executable)


# ---------------------------------------------------------------------------- the thin shell

def run(cmd: Cmd, check: bool = True) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(cmd, check=False, capture_output=True, text=True)
    except FileNotFoundError:  # no iproute2/nft here: nothing of ours can exist either
        if check:
            raise HostsError(f"{cmd[0]} not found") from None
        return subprocess.CompletedProcess(cmd, 127, "", f"{cmd[0]} not found")
    if check and r.returncode != 0:
        raise HostsError(f"{' '.join(cmd)} failed: {(r.stderr or r.stdout).strip()}")
    return r


def netns_list() -> list[str]:
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_pids(netns: str) -> list[int]:
    out = run(["ip", "netns", "pids", netns], check=False).stdout
    return [int(x) for x in out.split() if x.isdigit()]


def used_subnets() -> set[int]:
    """The N of every 10.77.N.x address on the host's interfaces."""
    out = run(["ip", "-4", "-o", "addr", "show"], check=False).stdout
    return {int(m.group(1)) for m in re.finditer(
        rf"inet {re.escape(SUBNET_PREFIX)}\.(\d+)\.\d+/", out)}


@contextlib.contextmanager
def _global_lock():
    """Held while a subnet is picked and claimed: two ``cluster up`` at once pick two."""
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _stop_pids(pids: Iterable[int], timeout: float = 10.0) -> None:
    pids = list(pids)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + timeout
    for pid in pids:
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


class RunningHosts:
    """A plan applied: the namespaces exist, the delayers run. ``close()`` removes it all."""

    def __init__(self, plan_: HostsPlan, data_dir: Path, log_dir: Path | None = None):
        self.plan = plan_
        self.data_dir = data_dir
        self.log_dir = log_dir or data_dir
        self.delayers: dict[str, subprocess.Popen] = {}
        self.closed = False

    def start_delayers(self) -> None:
        for h in self.plan.hosts:
            cmd = self.plan.delayer_command(h)
            if cmd is None:
                continue
            log = (self.log_dir / f"netdelay-{h.name}.log").open("ab")
            self.delayers[h.name] = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, env=delayer_env())
            log.close()
        # A delayer that is not serving yet lets packets through undelayed (queue bypass):
        # wait until each has bound its queue (it prints one line then).
        deadline = time.monotonic() + 15
        for name, p in self.delayers.items():
            path = self.log_dir / f"netdelay-{name}.log"
            while "netdelay: queue" not in path.read_text(errors="replace"):
                if p.poll() is not None or time.monotonic() > deadline:
                    raise HostsError(f"the delayer of {name} did not start: "
                                     f"{path.read_text(errors='replace')[-500:]}")
                time.sleep(0.02)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for p in self.delayers.values():
            if p.poll() is None:
                p.terminate()
        for p in self.delayers.values():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        teardown(self.plan)
        with contextlib.suppress(OSError):
            (self.data_dir / HOSTS_JSON).unlink()


def delayer_env() -> dict[str, str]:
    """A delayer runs this checkout's harness.netdelay, whatever the venv points at."""
    root = str(Path(__file__).resolve().parent.parent)
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, *rest])}


def apply(data_dir: str | os.PathLike[str], processes: Sequence[str], racks: int = 1,
          latency_ms: float = 0.0, loss_pct: float = 0.0, python: str | None = None,
          log_dir: Path | None = None) -> RunningHosts:
    """Create the hosts of ``processes`` for the cluster in ``data_dir`` (what a killed run left
    there is removed first), record them in ``hosts.json`` and start the delayers. On any
    failure everything made is removed again."""
    why = unavailable()
    if why:
        raise HostsError(why)
    data_dir = Path(data_dir).resolve()
    tag = cluster_tag(data_dir)
    cleanup_stale(data_dir)
    with _global_lock():
        used = used_subnets()
        free = next((n for n in range(256) if n not in used), None)
        if free is None:
            raise HostsError(f"no free {SUBNET_PREFIX}.N.0/24 left on this host")
        p = plan(tag, free, processes, racks, latency_ms, loss_pct, python)
        (data_dir / HOSTS_JSON).write_text(json.dumps(p.to_json(), indent=2) + "\n")
        running = RunningHosts(p, data_dir, log_dir)
        try:
            for cmd in p.setup_commands():
                run(cmd)
        except BaseException:
            running.close()
            raise
    try:
        for cmd in p.optional_setup_commands():
            run(cmd, check=False)
        running.start_delayers()
    except BaseException:
        running.close()
        raise
    return running


def teardown(p: HostsPlan) -> None:
    """End what still runs in the plan's namespaces, then delete them and the host's veth."""
    present = set(netns_list())
    pids = [pid for ns in p.namespaces if ns in present for pid in netns_pids(ns)]
    _stop_pids(pids)
    for cmd in p.teardown_commands():
        run(cmd, check=False)


def recorded_plan(data_dir: str | os.PathLike[str]) -> HostsPlan | None:
    try:
        return HostsPlan.from_json(json.loads((Path(data_dir) / HOSTS_JSON).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def leftovers(data_dir: str | os.PathLike[str]) -> dict[str, list[str]]:
    """What exists of the cluster in ``data_dir`` by name: namespaces and the host's veth."""
    tag = cluster_tag(data_dir)
    ns = [n for n in netns_list() if n.startswith(f"replog-{tag}-")]
    link = run(["ip", "-o", "link", "show", f"replog-{tag}"], check=False)
    return {"namespaces": ns, "links": [f"replog-{tag}"] if link.returncode == 0 else []}


def cleanup_stale(data_dir: str | os.PathLike[str], allow_processes: bool = False) -> list[str]:
    """Remove what a cluster in ``data_dir`` left behind (its recorded plan, and whatever
    carries its ``replog-<tag>`` prefix). A process of the cluster still running in one of its
    namespaces is refused in one line unless ``allow_processes`` (``cluster down``, which
    stopped what it knew of and ends the rest); delayers are always ended. Returns what went."""
    data_dir = Path(data_dir).resolve()
    left = leftovers(data_dir)
    if not left["namespaces"] and not left["links"]:
        with contextlib.suppress(OSError):
            (data_dir / HOSTS_JSON).unlink()
        return []
    pids = [pid for ns in left["namespaces"] for pid in netns_pids(ns)]
    others = [pid for pid in pids if "harness.netdelay" not in _cmdline(pid)]
    if others and not allow_processes:
        raise HostsError(
            f"processes of an earlier cluster still run in its network namespaces (pids "
            f"{', '.join(map(str, others))}); stop them with: replog cluster down --data-dir "
            f"{data_dir}")
    _stop_pids(pids)
    for ns in left["namespaces"]:
        run(["ip", "netns", "delete", ns], check=False)
    for link in left["links"]:
        run(["ip", "link", "delete", link], check=False)
    with contextlib.suppress(OSError):
        (data_dir / HOSTS_JSON).unlink()
    return left["namespaces"] + left["links"]

"""Nemeses for a cluster on hosts (``replog cluster up --hosts``, harness/hosts.py): faults of
one host's links, as a real network has them, rather than of a process's loopback ports.

- ``host-cut``: one host stops reaching one peer, while the peer still reaches it (an nftables
  drop in the first host's namespace, its output only): the asymmetric partition in which a
  leader that still hears ZooKeeper cannot answer it, or a follower whose fetches leave but
  whose answers never come back;
- ``link-delay``: a latency spike on one host's link, both ways (its packets held by a
  ``harness.netdelay`` process in its namespace, on top of any inter-rack delay);
- ``link-loss``: a share of one host's packets dropped, both ways (nft numgen);
- ``rack-cut``: every host of one rack cut off from the other racks, both ways; the clients
  on this machine still reach it (a rack whose uplink is gone, seen from a client inside it).

Every rule lives in the host's own namespace (table ``replog_chaos``, the mangle table's
OUTPUT/INPUT), so heal removes them all and nothing outlives the cluster's namespaces. The
checker's rules are unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess

from chaos.nemesis import NEMESIS_CLASSES, ClusterProcesses, Nemesis
from harness import cluster_hosts
from harness import hosts as hostlib


def host_plan(procs: ClusterProcesses) -> hostlib.HostsPlan | None:
    info = procs.info().get("hosts")
    return hostlib.HostsPlan.from_json(info) if info else None


def racks_of(cluster) -> int:
    """The racks of a running cluster (1 when it is not on hosts), from its cluster.json."""
    try:
        info = json.loads(cluster.cluster_json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 1
    return int((info.get("hosts") or {}).get("racks", 1))


def host_name(procs: ClusterProcesses, target: str) -> str:
    """A schedule target as a host: ``controller``/``leader`` resolved now; ``zookeeper`` the
    ensemble's leader (member 1 of a standalone server or while there is none)."""
    if target == "zookeeper":
        leader = None
        with contextlib.suppress(Exception):  # no ensemble, or no quorum: member 1
            leader = procs.cluster.zookeeper_leader()
        return f"zookeeper-{leader or 1}"
    return procs.resolve(target)


class _HostNemesis(Nemesis):
    def unavailable(self):
        if not cluster_hosts.on_hosts(self.procs.cluster):
            return "needs a cluster on hosts of its own (replog cluster up --hosts)"
        return hostlib.unavailable()

    @property
    def plan(self) -> hostlib.HostsPlan:
        plan = host_plan(self.procs)
        assert plan is not None
        return plan

    async def _run(self, cmds) -> None:
        for cmd in cmds:
            await asyncio.to_thread(hostlib.run, cmd)

    undone = "healed"

    async def undo(self) -> bool:
        plan = host_plan(self.procs)
        if plan is not None:
            for cmd in plan.chaos_heal_commands():
                await asyncio.to_thread(hostlib.run, cmd, False)
        return True


class HostCutNemesis(_HostNemesis):
    name = "host-cut"

    async def start(self, fault):
        src, dst = (host_name(self.procs, t) for t in fault.target)
        if src == dst:
            return {"skipped": f"{fault.target} resolve to one host, {src}"}
        await self._run(self.plan.cut_commands(src, dst))
        return {"cut": src, "from": dst, "direction": f"{src} -> {dst} dropped"}


class RackCutNemesis(_HostNemesis):
    name = "rack-cut"

    def unavailable(self):
        why = super().unavailable()
        if why is None and racks_of(self.procs.cluster) < 2 and (
                getattr(self.procs.cluster, "hosts_options", None) is None
                or self.procs.cluster.hosts_options.racks < 2):
            return "needs a cluster on 2 racks or more (replog cluster up --hosts --racks N)"
        return why

    async def start(self, fault):
        rack = fault.target[0]
        await self._run(self.plan.rack_cut_commands(rack))
        return {"rack": rack, "hosts": [h.name for h in self.plan.in_rack(rack)]}


class LinkLossNemesis(_HostNemesis):
    name = "link-loss"

    async def start(self, fault):
        name = host_name(self.procs, fault.target[0])
        pct = float(fault.target[1])
        await self._run(self.plan.link_loss_commands(name, pct))
        return {"host": name, "loss_pct": pct}


class LinkDelayNemesis(_HostNemesis):
    name = "link-delay"

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.delayers: list[subprocess.Popen] = []

    async def start(self, fault):
        name = host_name(self.procs, fault.target[0])
        ms = float(fault.target[1])
        plan = self.plan
        cmd = plan.delayer_command(plan.host(name), hostlib.SPIKE_QUEUE, ms)
        proc = await asyncio.to_thread(
            subprocess.Popen, cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True, env=hostlib.delayer_env())
        self.delayers.append(proc)
        line = await asyncio.to_thread(proc.stdout.readline)  # bound to its queue
        if not line.startswith(b"netdelay: queue"):
            raise RuntimeError(f"the delayer of {name} did not start: {line!r}")
        await self._run(plan.link_delay_commands(name))
        return {"host": name, "delay_ms": ms}

    async def undo(self) -> bool:
        await super().undo()  # the rules first: then nothing is queued to a delayer gone
        for proc in self.delayers:
            proc.terminate()
        for proc in self.delayers:
            try:
                await asyncio.to_thread(proc.wait, 5)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.delayers.clear()
        return True


HOST_NEMESIS_CLASSES: dict[str, type[Nemesis]] = {
    c.name: c for c in (HostCutNemesis, RackCutNemesis, LinkLossNemesis, LinkDelayNemesis)}
for _name, _cls in HOST_NEMESIS_CLASSES.items():
    NEMESIS_CLASSES.setdefault(_name, _cls)

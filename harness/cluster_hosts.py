"""The LocalCluster side of ``replog cluster up --hosts`` (harness/hosts.py has the plan).

Kept apart from harness/local_cluster.py, which only calls in here: before ZooKeeper starts, the
cluster's hosts are created (one namespace per ZooKeeper member, controller and broker, racks
round-robin) and every :class:`ProcessHandle` takes its host's address, namespace and rack;
each process is then started through ``ip netns exec <its namespace>`` and binds and advertises
its own address. On stop (or a failed start) the hosts are removed; ``cluster down`` removes
what a killed supervisor left.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness import hosts as hostlib


class ProcessOnHost(Protocol):
    """A process handle as far as hosts go: its name, and the host it is moved onto."""

    name: str
    host: str
    netns: str | None
    rack: str | None


class LocalCluster(Protocol):
    """What this module reads and sets of harness.local_cluster.LocalCluster (which calls in
    here, so it is not imported back)."""

    data_dir: Path
    python: str
    zookeeper_nodes: int
    external_zookeeper: str | None
    hosts_options: HostsOptions | None
    running_hosts: Any  # harness.hosts' running plan, None while there are no hosts
    controllers: Mapping[int, ProcessOnHost]
    brokers: Mapping[int, ProcessOnHost]


@dataclass(frozen=True)
class HostsOptions:
    """What ``--hosts``, ``--racks``, ``--inter-rack-latency-ms`` and ``--inter-rack-loss-pct``
    asked for."""

    racks: int = 1
    latency_ms: float = 0.0
    loss_pct: float = 0.0

    def check(self) -> None:
        """Bad values raise HostsError (one line) before anything is made."""
        hostlib.plan("000000", 0, [], self.racks, self.latency_ms, self.loss_pct)


def zookeeper_names(cluster: LocalCluster) -> list[str]:
    return [f"zookeeper-{i}" for i in range(1, max(1, cluster.zookeeper_nodes) + 1)]


def process_names(cluster: LocalCluster) -> list[str]:
    return (zookeeper_names(cluster) + [h.name for h in cluster.controllers.values()]
            + [h.name for h in cluster.brokers.values()])


def start_hosts(cluster: LocalCluster) -> None:
    """Create the hosts (removing what a killed run left) and move every handle onto its own."""
    opts: HostsOptions = cluster.hosts_options
    if cluster.external_zookeeper is not None:
        raise hostlib.HostsError("--hosts runs ZooKeeper on hosts of its own: a ZooKeeper "
                                 "on this machine's loopback (--zookeeper) is not reachable "
                                 "from them")
    running = hostlib.apply(cluster.data_dir, process_names(cluster), opts.racks,
                            opts.latency_ms, opts.loss_pct, python=cluster.python,
                            log_dir=_logs(cluster))
    cluster.running_hosts = running
    for h in [*cluster.controllers.values(), *cluster.brokers.values()]:
        host = running.plan.host(h.name)
        h.host, h.netns, h.rack = host.address, host.netns, host.rack


def _logs(cluster: LocalCluster) -> Path:
    d = cluster.data_dir / "logs"
    d.mkdir(parents=True, exist_ok=True)
    return d


def stop_hosts(cluster: LocalCluster) -> None:
    running, cluster.running_hosts = cluster.running_hosts, None
    if running is not None:
        running.close()


def wrap(cluster: LocalCluster, name: str, cmd: list[str]) -> list[str]:
    """``cmd`` as it runs on process ``name``'s host (unchanged without --hosts)."""
    running = cluster.running_hosts
    return running.plan.wrap(name, cmd) if running is not None else cmd


def zookeeper_kwargs(cluster: LocalCluster) -> dict:
    """Extra arguments for the ZooKeeperServer (``host``, ``command_prefix``) or the
    ZooKeeperEnsemble (``hosts``, ``command_prefixes``) on the cluster's hosts."""
    running = cluster.running_hosts
    if running is None:
        return {}
    members = [running.plan.host(n) for n in zookeeper_names(cluster)]
    prefixes = [["ip", "netns", "exec", m.netns] for m in members]
    if cluster.zookeeper_nodes > 1:
        return {"hosts": [m.address for m in members], "command_prefixes": prefixes}
    return {"host": members[0].address, "command_prefix": prefixes[0]}


def netns_of(cluster: LocalCluster, name: str) -> str | None:
    running = cluster.running_hosts
    return running.plan.host(name).netns if running is not None else None


def describe(cluster: LocalCluster) -> dict | None:
    """cluster.json's ``hosts``: the plan (bridge, namespaces, addresses, racks, shaping)."""
    running = cluster.running_hosts
    return running.plan.to_json() if running is not None else None


def cleanup_after_down(data_dir: Path, log=print) -> None:
    """``cluster down``: after the processes stopped, remove the hosts a supervisor that did
    not stop them (killed) left, whatever still runs in them included."""
    if hostlib.recorded_plan(data_dir) is None and not any(
            hostlib.leftovers(data_dir).values()):
        return
    gone = hostlib.cleanup_stale(data_dir, allow_processes=True)
    if gone:
        log(f"Removed the hosts left behind: {', '.join(gone)}")


def on_hosts(cluster) -> bool:
    """Whether a cluster (a LocalCluster, or a running one attached by its data dir) runs on
    hosts of its own: asked for, or recorded in its cluster.json."""
    if getattr(cluster, "hosts_options", None) is not None:
        return True
    import json
    try:
        info = json.loads(Path(cluster.cluster_json_path).read_text(encoding="utf-8"))
    except (OSError, ValueError, AttributeError):
        return False
    return bool(info.get("hosts"))

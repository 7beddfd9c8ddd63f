"""The LocalCluster side of its ZooKeeper: start what the cluster runs (a standalone server, an
ensemble of ``zookeeper_nodes`` members, or nothing for an external connect string), make the
chroot with the cluster's ACL, and describe the servers for ``cluster.json``.

Kept apart from harness/local_cluster.py, which only calls in here (as it calls
harness/cluster_hosts.py and harness/cluster_security.py); the servers themselves are
harness/zk_server.py and harness/zk_ensemble.py.
"""

from __future__ import annotations

from typing import Any

from harness import cluster_hosts


def start(cluster: Any) -> str:
    """Start the cluster's ZooKeeper and return the connect string its processes use: the
    servers' hosts with the cluster's chroot, made if missing (a chroot already in an external
    connect string is used as given)."""
    from harness.zk_ensemble import ZooKeeperEnsemble
    from harness.zk_server import ZooKeeperServer
    from harness.zk_sessions import ensure_chroot
    if cluster.zookeeper_nodes > 1:
        if cluster.zookeeper_ensemble is None:  # ports kept across stop/start of the cluster
            cluster.zookeeper_ensemble = ZooKeeperEnsemble(
                cluster.data_dir / "zookeeper", cluster.zookeeper_nodes,
                tick_time_ms=cluster.zk_tick_time_ms, max_session_timeout_ms=60_000,
                log_dir=cluster.data_dir / "logs", **cluster_hosts.zookeeper_kwargs(cluster))
        cluster.zookeeper_ensemble.start(cluster.startup_timeout_s)
        hosts = cluster.zookeeper_ensemble.hosts
    elif cluster.external_zookeeper is None:
        cluster.zookeeper_server = ZooKeeperServer(
            cluster.data_dir / "zookeeper", tick_time_ms=cluster.zk_tick_time_ms,
            max_session_timeout_ms=60_000,
            log_file=cluster.data_dir / "logs" / "zookeeper.log",
            **cluster_hosts.zookeeper_kwargs(cluster))
        cluster.zookeeper_server.start()
        hosts = cluster.zookeeper_server.hosts
    else:
        hosts = cluster.external_zookeeper
    security = cluster.zk_security
    chroot_security = {"auth_data": security.auth_data, "acl": security.chroot_acls()}
    base, slash, existing_chroot = hosts.partition("/")
    if slash:  # the connect string already carries a chroot: use it as given
        return ensure_chroot(base, "/" + existing_chroot.rstrip("/"), **chroot_security)
    if cluster.chroot:
        return ensure_chroot(base, cluster.chroot, **chroot_security)
    return base


def describe_nodes(cluster: Any) -> list[dict]:
    """The ZooKeeper servers this cluster runs (none for an external one): id (myid; None
    for a standalone server), client address, pid, config and log files. ``namespace``
    is the network namespace a member runs in: None while every process shares the
    host's network."""
    if cluster.zookeeper_ensemble is not None:
        servers = list(cluster.zookeeper_ensemble.members.values())
    elif cluster.zookeeper_server is not None:
        servers = [cluster.zookeeper_server]
    else:
        return []
    out = []
    for z in servers:
        peer = next((p for p in z.peers if p.myid == z.myid), None)
        out.append({"id": z.myid, "address": z.hosts,
                    "pid": z.pid if z.is_running() else None,
                    "config_file": str(z.config_file), "log_file": str(z.log_file),
                    "quorum_port": peer.quorum_port if peer else None,
                    "election_port": peer.election_port if peer else None,
                    "namespace": cluster_hosts.netns_of(cluster, f"zookeeper-{z.myid or 1}")})
    return out

"""``replog cluster up --hosts``: real network namespaces, a real bridge, real inter-rack delay
(as root). A cluster on 2 racks 5 ms apart: a TCP handshake between racks takes at least two
one-way delays and one within a rack far less (a behavioural check of the delay, not a speed
target); replicas are placed across racks; acks=all produce and consume from the host work
across namespaces; and nothing is left behind - after a stop, after ``cluster down`` of a
killed supervisor, and after a new ``cluster up`` over what a killed one left."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from harness import hosts as hostlib
from harness.cluster_hosts import HostsOptions
from harness.local_cluster import REPO_ROOT, LocalCluster
from tests.admin.test_integration import exited, replog
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.skipif(
    hostlib.unavailable() is not None, reason=f"{hostlib.unavailable()}")]

LATENCY_MS = 5.0


def _connect_ms(netns: str, address: str, tries: int = 5) -> float:
    """The fastest of ``tries`` TCP handshakes from inside ``netns`` to ``address``."""
    host, port = address.rsplit(":", 1)
    code = ("import socket, time\nbest = 1e9\n"
            f"for _ in range({tries}):\n"
            "    t = time.perf_counter()\n"
            f"    socket.create_connection(({host!r}, {port}), timeout=5).close()\n"
            "    best = min(best, time.perf_counter() - t)\n"
            "print(best * 1000)\n")
    out = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", code],
                         capture_output=True, text=True, check=True, timeout=60)
    return float(out.stdout)


_RECEIVER = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((ADDR, 7999))
s.settimeout(1.5)
print("ready", flush=True)
n = 0
try:
    while True:
        s.recv(64)
        n += 1
except OSError:
    pass
print(n)
"""
# A datagram dropped on the sender's own output is refused there (EPERM): not delivered.
_SENDER = """
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(N):
    try:
        s.sendto(b"x", (ADDR, 7999))
    except OSError:
        pass
    time.sleep(0.001)
"""


def _udp_delivered(src_ns: str, dst_ns: str, dst_addr: str, n: int = 200) -> int:
    """How many of ``n`` datagrams sent from ``src_ns`` arrive at ``dst_addr`` in ``dst_ns``."""
    recv = subprocess.Popen(["ip", "netns", "exec", dst_ns, sys.executable, "-c",
                             f"ADDR = {dst_addr!r}\n{_RECEIVER}"],
                            stdout=subprocess.PIPE, text=True)
    assert recv.stdout.readline().strip() == "ready"
    subprocess.run(["ip", "netns", "exec", src_ns, sys.executable, "-c",
                    f"ADDR = {dst_addr!r}\nN = {n}\n{_SENDER}"], check=True, timeout=30)
    return int(recv.communicate(timeout=30)[0])


def _nemeses(cluster: LocalCluster) -> None:
    """The host nemeses of chaos/host_nemesis.py on this cluster, each checked on the wire and
    healed."""
    import asyncio

    from chaos.host_nemesis import (
        HostCutNemesis,
        LinkDelayNemesis,
        LinkLossNemesis,
        RackCutNemesis,
    )
    from chaos.nemesis import ClusterProcesses
    from chaos.schedule import Fault

    procs = ClusterProcesses(cluster, "racked")
    b = {i: cluster.broker(i) for i in range(1, 5)}

    def fault(nem, *target):
        n = nem(procs, {})
        assert n.unavailable() is None
        asyncio.run(n.start(Fault(0, 0.0, n.name, target, 1.0)))
        return n

    # one direction: broker-1's datagrams to broker-3 are lost, broker-3's to broker-1 arrive
    n = fault(HostCutNemesis, "broker-1", "broker-3")
    assert _udp_delivered(b[1].netns, b[3].netns, b[3].host) == 0
    assert _udp_delivered(b[3].netns, b[1].netns, b[1].host) == 200
    asyncio.run(n.heal())
    assert _udp_delivered(b[1].netns, b[3].netns, b[3].host) == 200

    # rack-2 (brokers 2 and 4) cut off from rack-1 both ways; within it and from here: fine
    n = fault(RackCutNemesis, "rack-2")
    assert _udp_delivered(b[2].netns, b[1].netns, b[1].host) == 0
    assert _udp_delivered(b[1].netns, b[2].netns, b[2].host) == 0
    assert _udp_delivered(b[2].netns, b[4].netns, b[4].host) == 200
    socket.create_connection((b[2].host, b[2].port), timeout=5).close()
    asyncio.run(n.heal())
    assert _udp_delivered(b[1].netns, b[2].netns, b[2].host) == 200

    # half of broker-3's packets lost, both ways (200 tries: 60..140 but for ~1e-8)
    n = fault(LinkLossNemesis, "broker-3", "50")
    assert 60 <= _udp_delivered(b[1].netns, b[3].netns, b[3].host) <= 140
    asyncio.run(n.heal())
    assert _udp_delivered(b[1].netns, b[3].netns, b[3].host) == 200

    # a 40 ms spike on broker-3's link: within its rack a handshake pays it twice
    n = fault(LinkDelayNemesis, "broker-3", "40")
    assert _connect_ms(b[1].netns, b[3].address) >= 80
    asyncio.run(n.heal())
    assert _connect_ms(b[1].netns, b[3].address) < LATENCY_MS / 2
    assert all(p.poll() is not None for p in n.delayers) or not n.delayers


def _nothing_left(data_dir) -> None:
    tag = hostlib.cluster_tag(data_dir)
    assert not [n for n in hostlib.netns_list() if tag in n]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                           check=True).stdout
    assert f"replog-{tag}" not in links
    ruleset = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True,
                             check=True).stdout
    assert "replog" not in ruleset and "NFQUEUE" not in ruleset
    assert not (data_dir / hostlib.HOSTS_JSON).exists()


def test_two_racks_five_ms_apart(tmp_path):
    data = tmp_path / "data"
    cluster = LocalCluster(data, brokers=4, controllers=1, log_dirs_per_broker=1,
                           hosts=HostsOptions(racks=2, latency_ms=LATENCY_MS))
    try:
        cluster.start()
        b = {i: cluster.broker(i) for i in range(1, 5)}
        assert {i: h.rack for i, h in b.items()} == {1: "rack-1", 2: "rack-2", 3: "rack-1",
                                                     4: "rack-2"}
        # every process binds and advertises its own address, in its own namespace
        info = json.loads(cluster.cluster_json_path.read_text())
        addresses = {p["address"].split(":")[0] for p in info["brokers"] + info["controllers"]}
        addresses |= {m["address"].split(":")[0] for m in info["zookeeper_nodes"]}
        assert len(addresses) == 6 and all(a.startswith("10.77.") for a in addresses)
        assert all(m["namespace"] for m in info["zookeeper_nodes"])
        for p in info["brokers"]:
            assert psutil.Process(p["pid"]).cmdline()[1:3] == ["-m", "admin.cli"]
            ns = os.readlink(f"/proc/{p['pid']}/ns/net")
            assert ns != os.readlink("/proc/self/ns/net")
        across = _connect_ms(b[1].netns, b[2].address)
        within = _connect_ms(b[1].netns, b[3].address)
        assert across >= 2 * LATENCY_MS, (across, within)
        assert within < LATENCY_MS / 2, (across, within)
        # the host reaches every process directly (no delay on the host's own link)
        socket.create_connection((b[2].host, b[2].port), timeout=5).close()
        delayers = [p.pid for p in cluster.running_hosts.delayers.values()]
        assert len(delayers) == 6  # every host has hosts in the other rack

        bs = cluster.bootstrap_servers
        assert replog("topics", "create", "--bootstrap-server", bs, "--topic", "racked",
                      "--partitions", "4", "--replication-factor", "2").returncode == 0
        out = replog("topics", "describe", "--bootstrap-server", bs, "--topic", "racked")
        rows = [line for line in out.stdout.decode().splitlines() if "Partition:" in line]
        assert len(rows) == 4
        for row in rows:
            replicas = row.split("Replicas: ")[1].split()[0].split(",")
            assert {b[int(r)].rack for r in replicas} == {"rack-1", "rack-2"}, row
        lines = b"".join(b"line %d\n" % i for i in range(50))
        p = replog("produce", "--bootstrap-server", bs, "--topic", "racked", "--acks", "all",
                   "--request-timeout-ms", "30000", stdin=lines)
        assert p.returncode == 0, p.stderr.decode()
        p = replog("consume", "--bootstrap-server", bs, "--topic", "racked",
                   "--from-beginning", "--max-messages", "50", "--timeout-ms", "30000")
        assert p.returncode == 0, p.stderr.decode()
        assert sorted(p.stdout.decode().splitlines()) == sorted(f"line {i}" for i in range(50))
        _nemeses(cluster)
    finally:
        cluster.stop(graceful=False)
    _nothing_left(data)
    assert all(exited(p) for p in delayers)


def _cluster_up(data, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    up = subprocess.Popen([sys.executable, "-m", "admin.cli", "cluster", "up", "--brokers", "2",
                           "--log-dirs-per-broker", "1", "--hosts", "--racks", "2",
                           "--inter-rack-latency-ms", "1", "--data-dir", str(data), *extra],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO_ROOT)
    deadline = time.monotonic() + 120
    seen = []
    while not any(x.startswith("Press Ctrl-C") for x in seen):
        line = up.stdout.readline().decode()
        if (not line and up.poll() is not None) or time.monotonic() > deadline:
            up.kill()
            raise AssertionError(f"cluster up exited: {seen} {up.stderr.read().decode()}")
        seen.append(line)
    return up


def _pids(data) -> list[int]:
    info = json.loads((data / "cluster.json").read_text())
    return [p["pid"] for p in info["brokers"] + info["controllers"] + info["zookeeper_nodes"]]


@pytest.mark.soak  # ~28 s; make soak (make test keeps the 2-rack test and its cleanup check)
def test_a_killed_cluster_up_leaves_nothing_after_down_or_a_new_up(tmp_path):
    data = tmp_path / "data"
    tag = hostlib.cluster_tag(data)
    # SIGKILL the supervisor: its processes and hosts stay; cluster down removes them all.
    up = _cluster_up(data)
    up.kill()
    up.wait()
    left = [n for n in hostlib.netns_list() if tag in n]
    assert len(left) == 5  # ZooKeeper, a controller, 2 brokers, the switch
    delayers = [p for n in left for p in hostlib.netns_pids(n)
                if "harness.netdelay" in " ".join(psutil.Process(p).cmdline())]
    assert len(delayers) == 4
    down = replog("cluster", "down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr.decode()
    _nothing_left(data)
    assert all(exited(p) for p in delayers)

    # A crash that took the processes too (a killed process group, a host reboot without
    # the namespaces' processes): a new cluster up removes the leftovers and starts.
    up = _cluster_up(data)
    pids = _pids(data)
    up.kill()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status()
                               != psutil.STATUS_ZOMBIE for p in pids), what="the kill")
    up.wait()
    assert [n for n in hostlib.netns_list() if tag in n]  # left behind
    up = _cluster_up(data)
    try:
        assert set(_pids(data)).isdisjoint(pids)
    finally:
        down = replog("cluster", "down", "--data-dir", str(data))
        up.wait(60)
    assert down.returncode == 0, down.stderr.decode()
    _nothing_left(data)

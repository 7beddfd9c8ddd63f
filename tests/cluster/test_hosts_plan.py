"""The hosts plan (harness/hosts.py) and the delayer's netlink messages (harness/netdelay.py):
pure, so they run anywhere, fast - which commands for which topology, what teardown removes,
and the refusals of bad options."""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest

from harness import hosts, netdelay
from harness.local_cluster import REPO_ROOT

PROCS = ["zookeeper-1", "controller-100", "broker-1", "broker-2", "broker-3", "broker-4"]


def _plan(**kw):
    return hosts.plan("abc123", 7, PROCS, python="/py", **kw)


def _text(cmds) -> list[str]:
    return [" ".join(c) for c in cmds]


def test_each_process_gets_its_own_namespace_address_and_port_on_the_bridge():
    p = _plan()
    assert [h.netns for h in p.hosts] == [
        "replog-abc123-zookeeper1", "replog-abc123-controller100", "replog-abc123-broker1",
        "replog-abc123-broker2", "replog-abc123-broker3", "replog-abc123-broker4"]
    assert [h.address for h in p.hosts] == [f"10.77.7.{10 + i}" for i in range(6)]
    assert [h.port for h in p.hosts] == ["p-z1", "p-c100", "p-b1", "p-b2", "p-b3", "p-b4"]
    assert p.gateway == "10.77.7.1" and p.uplink == "replog-abc123"
    assert all(h.rack is None for h in p.hosts)
    setup = _text(p.setup_commands())
    # the bridge lives in the switch namespace; the host's veth has the gateway address
    assert "ip -n replog-abc123-net link add replog0 type bridge" in setup
    assert "ip addr add 10.77.7.1/24 dev replog-abc123" in setup
    for h in p.hosts:
        assert f"ip netns add {h.netns}" in setup
        assert (f"ip link add {h.port} netns replog-abc123-net type veth peer name eth0 "
                f"netns {h.netns}") in setup
        assert f"ip -n {h.netns} addr add {h.address}/24 dev eth0" in setup
        assert f"ip -n {h.netns} link set lo up" in setup
    # nothing leaves the cluster's /24: no route, no shaping without racks
    assert not any("route" in c or "NFQUEUE" in c or "nft" in c for c in setup)
    assert p.delayer_command(p.hosts[0]) is None


def test_racks_round_robin_per_role_and_delay_only_to_other_racks():
    p = _plan(racks=2, latency_ms=5)
    racks = {h.name: h.rack for h in p.hosts}
    assert racks == {"zookeeper-1": "rack-1", "controller-100": "rack-1", "broker-1": "rack-1",
                     "broker-2": "rack-2", "broker-3": "rack-1", "broker-4": "rack-2"}
    b1 = p.host("broker-1")
    rules = [c for c in p.rack_commands(b1)]
    assert rules == [["ip", "netns", "exec", b1.netns, "iptables", "-w", "-A", "OUTPUT", "-d",
                      "10.77.7.13/32,10.77.7.15/32", "-j", "NFQUEUE", "--queue-num", "1",
                      "--queue-bypass"]]
    assert p.delayer_command(b1) == ["ip", "netns", "exec", b1.netns, "/py", "-m",
                                     "harness.netdelay", "--queue", "1", "--delay-ms", "5"]
    assert all(r in _text(p.setup_commands()) for r in _text(rules))


def test_a_rack_with_every_host_has_nothing_to_delay():
    p = hosts.plan("abc123", 7, ["broker-1"], racks=2, latency_ms=5)
    assert p.rack_commands(p.hosts[0]) == [] and p.delayer_command(p.hosts[0]) is None


def test_inter_rack_loss_is_an_nft_numgen_drop():
    p = _plan(racks=2, loss_pct=1.5)
    b2 = p.host("broker-2")
    cmds = _text(p.rack_commands(b2))
    assert cmds[-1] == (f"ip netns exec {b2.netns} nft add rule inet replog_rack output ip "
                        "daddr { 10.77.7.10, 10.77.7.11, 10.77.7.12, 10.77.7.14 } numgen "
                        "random mod 10000 < 150 drop")
    assert not any("NFQUEUE" in c for c in cmds) and p.delayer_command(b2) is None


def test_teardown_removes_every_namespace_the_switch_and_the_hosts_veth():
    p = _plan(racks=2, latency_ms=5)
    assert _text(p.teardown_commands()) == (
        [f"ip netns delete {h.netns}" for h in p.hosts]
        + ["ip netns delete replog-abc123-net", "ip link delete replog-abc123"])


def test_the_plan_is_recorded_and_read_back():
    p = _plan(racks=2, latency_ms=5, loss_pct=1)
    assert hosts.HostsPlan.from_json(p.to_json()) == p
    assert p.wrap("broker-2", ["python", "-m", "x"]) == [
        "ip", "netns", "exec", "replog-abc123-broker2", "python", "-m", "x"]


@pytest.mark.parametrize("kw, error", [
    ({"racks": 0}, "--racks must be at least 1"),
    ({"latency_ms": 5}, "need --racks 2 or more"),
    ({"racks": 2, "loss_pct": 101}, "within 0-100"),
    ({"racks": 2, "latency_ms": -1}, "must be >= 0"),
])
def test_bad_options_are_refused(kw, error):
    with pytest.raises(hosts.HostsError, match=error):
        _plan(**kw)


def test_an_unknown_process_name_is_refused():
    with pytest.raises(hosts.HostsError, match="not a process name"):
        hosts.plan("abc123", 7, ["prometheus"])


def test_the_cluster_tag_follows_the_data_dir(tmp_path):
    assert hosts.cluster_tag(tmp_path) == hosts.cluster_tag(tmp_path / "." )
    assert hosts.cluster_tag(tmp_path / "a") != hosts.cluster_tag(tmp_path / "b")


def test_netdelay_reads_packet_ids_and_writes_verdicts():
    # An NFQNL_MSG_PACKET as the kernel sends it: nlmsghdr, nfgenmsg, NFQA_PACKET_HDR.
    attr = struct.pack("=HH", 11, 1) + struct.pack("!IHB", 4242, 0x0800, 3) + b"\0"
    body = struct.pack("=BBH", 2, 0, 0) + attr
    msg = struct.pack("=IHHII", 16 + len(body), 3 << 8, 0, 0, 0) + body
    assert netdelay.packet_ids(msg + msg) == [4242, 4242]
    v = netdelay.verdict_message(1, 4242)
    length, kind = struct.unpack_from("=IH", v)
    assert length == len(v) and kind == (3 << 8) | 1
    assert struct.unpack_from("!II", v, 24) == (netdelay.NF_ACCEPT, 4242)


def _cli(*args, **kw):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-m", "admin.cli", "cluster", "up", *args],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=60,
                          check=False, **kw)


def test_rack_options_without_hosts_are_refused_in_one_line(tmp_path):
    r = _cli("--racks", "2", "--data-dir", str(tmp_path / "d"))
    assert r.returncode != 0 and "need --hosts" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "d").exists()


def test_hosts_without_root_is_refused_in_one_line(tmp_path, monkeypatch):
    # Not root cannot be had for real inside a root test run (the venv's interpreter lives in
    # root's home): the check reads the effective uid, so the test gives it another.
    import argparse

    from admin import cluster_cmd
    from common.errors import ReplogError
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    parser = argparse.ArgumentParser()
    cluster_cmd.add_parsers(parser.add_subparsers())
    args = parser.parse_args(["cluster", "up", "--hosts", "--data-dir", str(tmp_path / "d")])
    with pytest.raises(ReplogError, match=r"^--hosts needs root \(it creates network"):
        args.func(args)
    assert not (tmp_path / "d").exists()


def test_a_host_cut_drops_one_direction_only_inside_the_first_host():
    p = _plan(racks=2)
    cmds = _text(p.cut_commands("broker-1", "zookeeper-1"))
    assert all(c.startswith("ip netns exec replog-abc123-broker1 nft ") for c in cmds)
    assert cmds[-1].endswith("nft add rule inet replog_chaos output ip daddr { 10.77.7.10 } "
                             "drop")
    assert not any("replog-abc123-zookeeper1" in c for c in cmds)


def test_a_rack_cut_drops_both_ways_between_the_rack_and_the_others_only():
    p = _plan(racks=2)
    cmds = _text(p.rack_cut_commands("rack-2"))
    rack2 = ["replog-abc123-broker2", "replog-abc123-broker4"]
    assert {c.split()[3] for c in cmds} == set(rack2)
    others = "{ 10.77.7.10, 10.77.7.11, 10.77.7.12, 10.77.7.14 }"
    for ns in rack2:
        assert (f"ip netns exec {ns} nft add rule inet replog_chaos output ip daddr {others} "
                "drop") in cmds
        assert (f"ip netns exec {ns} nft add rule inet replog_chaos input ip saddr {others} "
                "drop") in cmds
    with pytest.raises(hosts.HostsError, match="no host in rack-3"):
        p.rack_cut_commands("rack-3")


def test_link_loss_and_delay_cover_the_hosts_link_both_ways():
    p = _plan(racks=2, latency_ms=5)
    loss = _text(p.link_loss_commands("controller-100", 12.5))
    ns = "ip netns exec replog-abc123-controller100"
    assert (f"{ns} nft add rule inet replog_chaos output ip daddr {{ 10.77.7.0/24 }} numgen "
            "random mod 10000 < 1250 drop") in loss
    assert (f"{ns} nft add rule inet replog_chaos input ip saddr {{ 10.77.7.0/24 }} numgen "
            "random mod 10000 < 1250 drop") in loss
    delay = _text(p.link_delay_commands("controller-100"))
    # the mangle table: before the filter table's inter-rack queue, so the spike adds to it
    assert delay == [(f"{ns} iptables -w -t mangle -A OUTPUT -d 10.77.7.0/24 -j NFQUEUE "
                     "--queue-num 2 --queue-bypass"),
                     (f"{ns} iptables -w -t mangle -A INPUT -s 10.77.7.0/24 -j NFQUEUE "
                     "--queue-num 2 --queue-bypass")]
    assert p.delayer_command(p.host("controller-100"), hosts.SPIKE_QUEUE, 300)[-4:] == [
        "--queue", "2", "--delay-ms", "300"]
    heal = _text(p.chaos_heal_commands())
    for h in p.hosts:
        assert f"ip netns exec {h.netns} nft delete table inet replog_chaos" in heal
        assert f"ip netns exec {h.netns} iptables -w -t mangle -F OUTPUT" in heal


def test_host_nemeses_are_chosen_by_name_or_as_hosts_and_all_is_unchanged():
    from chaos.schedule import HOST_NEMESES, NEMESES, Topology, make_schedule, parse_nemeses
    assert parse_nemeses("all") == tuple(NEMESES)
    assert parse_nemeses("hosts") == tuple(HOST_NEMESES)
    assert parse_nemeses("kill,rack-cut") == ("kill", "rack-cut")
    s = make_schedule(7, 120, parse_nemeses("hosts"), Topology(racks=3))
    seen = {f.nemesis for f in s.faults}
    assert seen == set(HOST_NEMESES), seen
    for f in s.faults:
        if f.nemesis == "rack-cut":
            assert f.target[0] in ("rack-1", "rack-2", "rack-3")
        if f.nemesis == "link-delay":
            assert 100 <= int(f.target[1]) <= 800
        if f.nemesis == "host-cut":
            assert f.target[0] != f.target[1]
    assert make_schedule(7, 120, parse_nemeses("hosts"), Topology(racks=3)) == s

"""The compose cluster runs a 3-node ZooKeeper ensemble: three services with distinct myids, one
zoo.cfg naming all three, and every broker's and controller's zookeeper.connect listing every
member. Only the files are read: no Docker runs here (tests/observability/test_compose.py runs
the cluster)."""

from __future__ import annotations

import re
from itertools import pairwise

from common.config import build_config, parse_override
from common.properties import parse_properties_text
from tests.test_compose_kafka_listener import CONFIG_IN_IMAGE, REPO, compose_services

MEMBER_SCRIPT = CONFIG_IN_IMAGE + "zookeeper-member.sh"


def _zoo_cfg() -> dict[str, str]:
    text = (REPO / "docker" / "zoo.cfg").read_text()
    return dict(line.split("=", 1) for line in text.splitlines()
                if line.strip() and not line.startswith("#"))


def _process_config(command: list[str]):
    """The config a ``broker|controller --config FILE --override k=v ...`` command starts with."""
    config_file = command[command.index("--config") + 1]
    path = REPO / "docker" / config_file[len(CONFIG_IN_IMAGE):]
    entries = parse_properties_text(path.read_text(), str(path))
    entries += [parse_override(v) for k, v in pairwise(command) if k == "--override"]
    return build_config(entries)


def test_compose_runs_three_zookeeper_members_with_distinct_myids():
    services = compose_services()
    members = {name: s["command"] for name, s in services.items()
               if name.startswith("zookeeper")}
    assert sorted(members) == ["zookeeper-1", "zookeeper-2", "zookeeper-3"], sorted(members)
    myids = {}
    for name, command in members.items():
        assert command[:2] == ["sh", MEMBER_SCRIPT], command
        myids[name] = int(command[2])
    assert myids == {"zookeeper-1": 1, "zookeeper-2": 2, "zookeeper-3": 3}
    # the script writes that id where QuorumPeerMain reads it: the config's dataDir/myid
    cfg = _zoo_cfg()
    script = (REPO / "docker" / "zookeeper-member.sh").read_text()
    assert f'> {cfg["dataDir"]}/myid' in script and "QuorumPeerMain" in script
    assert CONFIG_IN_IMAGE + "zoo.cfg" in script
    # one zoo.cfg names every member (quorum and election ports) by its compose name
    servers = {int(k.split(".")[1]): v for k, v in cfg.items() if k.startswith("server.")}
    assert {i: v.split(":")[0] for i, v in servers.items()} == \
        {i: f"zookeeper-{i}" for i in (1, 2, 3)}
    assert all(re.fullmatch(r"zookeeper-\d:\d+:\d+", v) for v in servers.values()), servers
    assert {"initLimit", "syncLimit", "clientPort"} <= cfg.keys()


def test_every_replog_process_connects_to_every_member():
    services = compose_services()
    port = _zoo_cfg()["clientPort"]
    want = {f"zookeeper-{i}:{port}" for i in (1, 2, 3)}
    processes = {n: s["command"] for n, s in services.items()
                 if n.startswith(("broker-", "controller-"))}
    assert len(processes) == 5, sorted(processes)
    for name, command in processes.items():
        connect = _process_config(command)["zookeeper.connect"]
        servers, _, chroot = connect.partition("/")
        assert set(servers.split(",")) == want, (name, connect)
        assert chroot == "replog", (name, connect)
    text = (REPO / "docker-compose.yml").read_text()
    # replog waits for every member to serve (a quorum), not for a service that is gone
    assert "zookeeper: { condition" not in text
    assert all(f"zookeeper-{i}: {{ condition: service_healthy }}" in text for i in (1, 2, 3))

"""The compose cluster publishes each broker's Kafka-protocol listener on the host: every broker
in docker-compose.yml has a listener named in ``kafka.listener.names`` (docs/kafka-protocol.md),
advertised as 127.0.0.1:<port> with that port published on the host's loopback, each broker
on its own port, while replication stays on a gRPC listener. Only the files are read: no
Docker runs here (tests/observability/test_compose.py runs the cluster).

Each broker's configuration is what its process would start with: docker/broker.properties with
the service's ``--override`` arguments, validated by replog's own config loader, so a listener
the broker would refuse fails here too.

docker-compose.yml keeps every ``command`` and ``ports`` value a one-line-or-more flow list of
double-quoted strings (JSON's syntax): that is what this test reads, without a YAML library.
"""

from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path

from common.config import build_config, parse_override
from common.listeners import listener_config
from common.properties import parse_properties_text

REPO = Path(__file__).resolve().parent.parent
COMPOSE = REPO / "docker-compose.yml"
CONFIG_IN_IMAGE = "/opt/replog/docker/"  # docker/ is mounted there (the services' volumes)


def _flow_list(lines: list[str], i: int, key: str) -> list[str]:
    """The JSON-style flow list that starts after ``key:`` on line ``i``."""
    text = lines[i].split(f"{key}:", 1)[1]
    while text.count("[") > text.count("]"):
        i += 1
        text += lines[i]
    try:
        value = json.loads(text.strip())
    except json.JSONDecodeError as e:
        raise AssertionError(f"docker-compose.yml line {i + 1}: {key} is not a flow list of "
                             f"double-quoted strings ({e})") from None
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), text
    return value


def compose_services() -> dict[str, dict[str, list[str]]]:
    """Each service's ``command`` and ``ports`` (absent: an empty list)."""
    lines = COMPOSE.read_text().splitlines()
    services: dict[str, dict[str, list[str]]] = {}
    in_services, current = False, None
    for i, line in enumerate(lines):
        if re.match(r"^\S", line):  # a top-level key
            in_services = line.startswith("services:")
            current = None
            continue
        if not in_services:
            continue
        m = re.match(r"^  ([A-Za-z0-9_.-]+):\s*$", line)
        if m:
            current = services.setdefault(m.group(1), {"command": [], "ports": []})
            continue
        m = re.match(r"^    (command|ports):", line)
        if m and current is not None:
            current[m.group(1)] = _flow_list(lines, i, m.group(1))
    return services


def broker_config(command: list[str]):
    """The config a ``broker --config FILE --override k=v ...`` command starts with."""
    assert command[0] == "broker", command
    config_file = command[command.index("--config") + 1]
    assert config_file.startswith(CONFIG_IN_IMAGE), config_file
    path = REPO / "docker" / config_file[len(CONFIG_IN_IMAGE):]
    entries = parse_properties_text(path.read_text(), str(path))
    entries += [parse_override(v) for k, v in pairwise(command) if k == "--override"]
    return build_config(entries)


def published(ports: list[str]) -> dict[int, tuple[str, int]]:
    """container port -> (host address, host port) of ``HOST_IP:HOST_PORT:CONTAINER_PORT``."""
    out = {}
    for spec in ports:
        m = re.fullmatch(r"([\d.]+):(\d+):(\d+)", spec)
        assert m, f"{spec!r}: publish as HOST_IP:HOST_PORT:CONTAINER_PORT"
        out[int(m.group(3))] = (m.group(1), int(m.group(2)))
    return out


def brokers() -> dict[str, dict[str, list[str]]]:
    out = {name: s for name, s in compose_services().items()
           if s["command"][:1] == ["broker"]}
    assert len(out) == 3, sorted(out)
    return out


def test_every_broker_publishes_and_advertises_a_kafka_listener_on_its_own_port():
    host_ports = []
    for name, service in brokers().items():
        cfg = listener_config(broker_config(service["command"]))
        kafka = [e for e in cfg.advertised if cfg.is_kafka(e.listener)]
        assert len(kafka) == 1, f"{name}: advertised Kafka listeners {kafka}"
        advertised = kafka[0]
        bound = next(e for e in cfg.listeners if e.listener == advertised.listener)
        # A client on the host connects to the advertised address, which Docker forwards to
        # the port the broker binds, on every interface of the container.
        assert advertised.host == "127.0.0.1", f"{name}: {advertised}"
        assert bound.host in ("0.0.0.0", ""), f"{name}: {bound}"
        ports = published(service["ports"])
        assert ports.get(bound.port) == ("127.0.0.1", advertised.port), \
            f"{name}: {advertised.listener} port {bound.port} is not published as " \
            f"127.0.0.1:{advertised.port} ({service['ports']})"
        # Replication and controller traffic stay on gRPC.
        assert not cfg.is_kafka(cfg.inter_broker_listener_name), name
        host_ports.append(advertised.port)
    assert len(set(host_ports)) == len(host_ports), host_ports


def test_everything_compose_publishes_is_on_loopback_and_on_distinct_ports():
    host_ports = []
    for name, service in compose_services().items():
        for address, port in published(service["ports"]).values():
            assert address == "127.0.0.1", f"{name} publishes on {address}"
            host_ports.append(port)
    assert len(set(host_ports)) == len(host_ports), sorted(host_ports)

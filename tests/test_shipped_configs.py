"""The compose cluster's shipped configs keep the rules controller and brokers share equal
(the brokers' min.insync.replicas=2 against a controller left at the
default 1 made the controller's ELR rule differ from every leader's)."""

from __future__ import annotations

from pathlib import Path

from common.properties import parse_properties_text

DOCKER = Path(__file__).resolve().parent.parent / "docker"
SHARED_RULES = ("min.insync.replicas", "unclean.leader.election.enable",
                "eligible.leader.replicas.enable")


def _props(name: str) -> dict[str, str]:
    path = DOCKER / name
    return {k: v for k, v, _ in parse_properties_text(path.read_text(), str(path))}


def test_compose_controller_and_brokers_read_the_same_shared_rules() -> None:
    broker, controller = _props("broker.properties"), _props("controller.properties")
    for key in SHARED_RULES:
        assert broker.get(key) == controller.get(key), key
    assert broker["min.insync.replicas"] == "2"

"""A malformed ``/controller``, ``/config/topics/<t>`` or ``/config/brokers/<id>`` on real
ZooKeeper, read by a real broker: one log line naming the znode, the broker keeps serving, and
a later good value is picked up. Before, ``MalformedZnode`` escaped the broker's controller
watch and its config reads (an unhandled task error, a controller kept from a znode that no
longer named it, a retry loop logging the same unreadable topic config every few seconds)."""

from __future__ import annotations

import json

import pytest

from client import AdminClient, Producer
from client.errors import KafkaError
from common import zk_layout as zl
from harness.testing import *  # the real-cluster fixtures (cluster_factory)
from tests.cluster.helpers import eventually

pytestmark = pytest.mark.integration

TOPIC = "configured"
GARBAGE = b"\xff{not json"


def _events(c, name: str) -> list[dict]:
    path = c.broker(1).event_log_file
    return [e for e in map(json.loads, path.read_text().splitlines())
            if e.get("event") == name]


def _notify(zk, entity_type: str, name: str) -> None:
    """A change notification, as IncrementalAlterConfigs writes beside the entity znode."""
    zk.create(f"{zl.CONFIG_CHANGES}/{zl.CONFIG_CHANGE_PREFIX}",
              zl.encode_config_change(entity_type, name), sequence=True)


async def _produce(c, value: bytes) -> None:
    async with Producer(c.bootstrap_servers, acks="all", request_timeout_ms=5000,
                        delivery_timeout_ms=10000, retries=0) as prod:
        await (await prod.send(TOPIC, value, partition=0))


async def test_malformed_config_and_controller_znodes_are_logged_and_skipped(zk_server,
                                                                             cluster_factory):
    c = cluster_factory(brokers=1, log_dirs_per_broker=1)
    zk = c.zk_client()
    async with AdminClient(c.bootstrap_servers, request_timeout_ms=5000) as admin:
        await admin.create_topic(TOPIC, 1, 1)
        await _produce(c, b"before")

        # /config/topics/<t>: skipped with one line, the broker keeps serving the topic
        topic_path = zl.topic_config_path(TOPIC)
        zk.set(topic_path, GARBAGE)
        _notify(zk, "topics", TOPIC)
        await eventually(lambda: _events(c, "topic_config_malformed"), timeout=10)
        await _produce(c, b"x" * 2000)
        # DescribeConfigs refuses the resource with a line naming the znode
        got = (await admin.describe_configs([("topics", TOPIC)]))[("topics", TOPIC)]
        assert isinstance(got, KafkaError) and topic_path in str(got), got
        # a later good value is applied: max.message.bytes now refuses the same record
        zk.set(topic_path, zl.encode_topic_config({"max.message.bytes": "512"}))
        _notify(zk, "topics", TOPIC)

        async def too_large() -> bool:
            try:
                await _produce(c, b"x" * 2000)
            except KafkaError:
                return True
            return False
        await eventually(too_large, timeout=10)
        (line,) = _events(c, "topic_config_malformed")  # one line, no retry loop
        assert topic_path in line["error"]

        # /config/brokers/<id>: skipped with one line, the broker keeps serving
        broker_path = zl.entity_config_path("brokers", "1")
        zk.ensure_path(broker_path)
        zk.set(broker_path, GARBAGE)
        _notify(zk, "brokers", "1")
        await eventually(lambda: _events(c, "config_znode_malformed"), timeout=10)
        assert broker_path in _events(c, "config_znode_malformed")[0]["error"]
        await _produce(c, b"after broker config")

        # /controller: no controller is known while it is unreadable, the broker serves on,
        # and the good value written back is picked up by the watch
        good, _ = zk.get(zl.CONTROLLER)
        controller_id = zl.decode_controller(good).controller_id
        zk.set(zl.CONTROLLER, GARBAGE)
        await eventually(lambda: _events(c, "controller_znode_malformed"), timeout=10)
        assert _events(c, "controller_znode_malformed")[0]["znode"] == zl.CONTROLLER
        assert (await admin.describe_cluster_metadata()).controller is None
        await _produce(c, b"after controller")
        zk.set(zl.CONTROLLER, good)

        async def controller_known() -> bool:
            known = (await admin.describe_cluster_metadata()).controller
            return known is not None and known.id == controller_id
        await eventually(controller_known, timeout=10)

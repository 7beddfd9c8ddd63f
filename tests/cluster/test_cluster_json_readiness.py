"""``cluster.json`` appears only once the cluster serves: every broker
registered, in every broker's metadata with the active controller, every Kafka listener
accepting. Until then the description is ``cluster.starting.json`` with ``"ready": false``. A
script that waits for cluster.json, as users do with ``replog cluster up &``, can create a
topic of replication factor 3 the moment it appears."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import pytest

from client import AdminClient
from harness.local_cluster import CLUSTER_JSON, CLUSTER_STARTING_JSON
from tests.polling import wait_until


@pytest.mark.integration
def test_cluster_json_appears_only_when_the_cluster_serves(cluster_factory):
    c = cluster_factory(brokers=3, start=False)
    starting: list[dict] = []
    failed: list[BaseException] = []

    def start():
        try:
            c.start()
        except BaseException as e:  # noqa: BLE001 - reported below
            failed.append(e)
    t = threading.Thread(target=start, daemon=True)
    t.start()
    path, starting_path = c.data_dir / CLUSTER_JSON, c.data_dir / CLUSTER_STARTING_JSON

    def appeared() -> bool:
        """Records every cluster.starting.json seen on the way (what a script reads)."""
        assert not failed, failed
        if path.exists():
            return True
        try:
            starting.append(json.loads(starting_path.read_text()))
        except (OSError, ValueError):
            pass
        return False
    wait_until(appeared, 120, "cluster.json to appear", interval=0.01)
    info = json.loads(path.read_text())
    # the moment it appears: ready, and a topic of replication factor 3 can be created
    assert info["ready"] is True
    assert starting and all(s["ready"] is False for s in starting)
    assert not starting_path.exists()

    async def create():
        async with AdminClient(info["bootstrap_servers"], request_timeout_ms=10000) as admin:
            return await admin.create_topic("at-once", 1, 3)
    assert asyncio.run(create()).replication_factor == 3
    for b in info["brokers"]:
        host, port = b["kafka_address"].rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=5).close()
    t.join(60)
    c.stop()
    assert json.loads(path.read_text())["ready"] is False  # stopped: said so

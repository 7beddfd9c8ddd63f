"""Numbers read from ZooKeeper names and config values take ASCII digits only. str.isdigit()
also takes '²' (int() then raises a bare ValueError) and '١' (int() reads it as 1): a child
'/brokers/ids/²' made the controller resign at every failover (read_broker_ids), and a
throttled-replicas value '١:1' throttled partition 1."""

from __future__ import annotations

import pytest

from broker.replication_quota import parse_throttled_partitions
from common.dynamic_config import check_topic_config
from common.errors import ConfigError
from common.names import ascii_digits
from controller.zk_store import ZkStore


@pytest.mark.parametrize("text, ok", [("0", True), ("123", True), ("", False), ("²", False),
                                      ("١", False), ("1²", False), ("-1", False), (" 1", False)])
def test_ascii_digits(text, ok):
    assert ascii_digits(text) is ok


class _Children:
    def __init__(self, children):
        self.children = children

    async def get_children(self, path, watch=None):
        return self.children


async def test_a_hostile_broker_id_child_is_ignored():
    store = ZkStore.__new__(ZkStore)
    store.zk = _Children(["2", "²", "١", "1", "x"])
    assert await store.read_broker_ids() == [1, 2]


def test_throttled_replicas_take_ascii_partition_and_broker_ids():
    assert parse_throttled_partitions("١:1,2:1", 1) == frozenset({2})
    with pytest.raises(ConfigError):
        check_topic_config("leader.replication.throttled.replicas", "²:1")

"""ClusterView's reads of partition states, topic assignments and /restart_partitions entries
(harness/cluster_view.py), which the lab and bench read the cluster through, on a real
ZooKeeper: what the controller wrote, decoded, and a bounded wait - never an endless one -
when the znode is missing or ZooKeeper does not answer."""

from __future__ import annotations

import pytest
from kazoo.exceptions import NoNodeError

from common import zk_layout
from harness.cluster_view import ClusterView


class _Cluster:
    """What ClusterView's ZooKeeper reads need of a LocalCluster: its shared client."""

    def __init__(self, zk):
        self._zk = zk

    def zk_client(self):
        return self._zk


def test_reads_what_the_controller_wrote(zk):
    state = zk_layout.LeaderAndIsr(leader=2, leader_epoch=3, isr=(2, 1), controller_epoch=4)
    zk.create(zk_layout.partition_state_path("t", 0), zk_layout.encode_partition_state(state),
              makepath=True)
    zk.set(zk_layout.partition_state_path("t", 0), zk_layout.encode_partition_state(state))
    zk.set(zk_layout.topic_path("t"), zk_layout.encode_topic(zk_layout.TopicAssignment(
        "t", "id-1", {0: [2, 1]}, adding_replicas={0: [1]})))
    zk.create(zk_layout.RESTART_PARTITIONS + "/restart-", b"{}", makepath=True, sequence=True)
    view = ClusterView(_Cluster(zk))
    got = view.partition_state("t", 0)
    assert (got.leader, got.leader_epoch, got.isr, got.partition_epoch) == (2, 3, (2, 1), 1)
    assert view.topic_assignment("t").adding_replicas == {0: [1]}
    assert [n.startswith("restart-") for n in view.restart_entries()] == [True]


def test_a_missing_partition_raises_rather_than_waits(zk):
    with pytest.raises(NoNodeError):
        ClusterView(_Cluster(zk)).partition_state("nope", 0, timeout=1.0)

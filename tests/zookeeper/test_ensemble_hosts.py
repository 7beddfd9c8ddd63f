"""The ensemble's faults on real hosts: a 3-member ZooKeeper ensemble, 2 controllers and 4
brokers, every process in its own network namespace, brokers on 2 racks 5 ms apart (one way),
under acks=all load (RF 3, min.insync.replicas=2, so every write crosses the racks).

The same claims, and the very same test bodies, as tests/zookeeper/test_ensemble_faults.py, which
proves them on loopback in make test (this test's two fast siblings: the leader kill and the
lost quorum); here they run on the shape of the capability's acceptance, where the sessions move
between members over a real link and the quorum's own traffic crosses hosts:

- killing the ZooKeeper leader changes no controller (same /controller, same epoch, no
  resignation), re-registers no broker, and no acks=all write waits longer than one session
  timeout;
- killing a majority stops topic creation (REQUEST_TIMED_OUT naming the lost connection,
  nothing of the topic written) and elections (a dead leader is not replaced) while produce
  to the leaders with an intact ISR goes on;
- restoring it brings the election and topic creation back, in the same controller epoch, and
  every acknowledged record is read back at its offset.
"""

from __future__ import annotations

import json

import pytest

from harness import hosts as hostlib
from harness.cluster_hosts import HostsOptions
from tests.zookeeper.test_ensemble_faults import (
    test_a_lost_quorum_stops_topic_creation_and_elections_but_not_produce as lost_quorum,
)
from tests.zookeeper.test_ensemble_faults import (
    test_killing_the_zookeeper_leader_changes_no_controller_and_costs_no_session as leader_kill,
)

pytestmark = [pytest.mark.integration, pytest.mark.skipif(
    hostlib.unavailable() is not None, reason=f"{hostlib.unavailable()}")]

SHAPE = {"brokers": 4, "controllers": 2, "log_dirs_per_broker": 1,
         "hosts": HostsOptions(racks=2, latency_ms=5)}


# make soak: ~51 s of wall time on hosts (two clusters of 9 namespaces and 3 JVMs each);
# make test proves the same on loopback: tests/zookeeper/test_ensemble_faults.py's
# test_killing_the_zookeeper_leader_... and test_a_lost_quorum_stops_topic_creation_...
@pytest.mark.soak
async def test_leader_kill_and_lost_quorum_on_two_racks(cluster_factory):
    made = []

    def on_hosts(**kwargs):
        """cluster_factory, every cluster in the acceptance's shape (the ensemble of 3 is
        asked for by the loopback tests themselves)."""
        c = cluster_factory(**{**kwargs, **SHAPE})
        made.append(c)
        assert kwargs["zookeeper_nodes"] == 3
        assert {h.rack for h in c.brokers.values()} == {"rack-1", "rack-2"}
        info = json.loads(c.cluster_json_path.read_text())
        assert len({m["namespace"] for m in info["zookeeper_nodes"]}) == 3
        assert len(c.controllers) == 2
        return c

    await leader_kill(on_hosts)
    made[0].stop(graceful=False)  # one cluster on the machine at a time
    await lost_quorum(on_hosts)

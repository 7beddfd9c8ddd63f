"""A move in flight meeting another change of the same partition: the topic deleted under it,
or its target set reaching the ISR through an election instead of an AlterPartition. Through
the controller core over the in-memory store, as tests/controller/test_reassignment.py."""

from __future__ import annotations

import pytest

from common.names import TopicPartition
from common.zk_layout import decode_reassignment, encode_reassignment
from controller import decisions as D
from controller import events as E
from tests.controller.test_reassignment import T0, _deleted, _setup
from tests.sim.driver import Driver


def _admin_entries(d: Driver) -> dict:
    data = d.tree.reassign_partitions
    return {} if data is None else {TopicPartition(t, p): r
                                    for t, p, r in decode_reassignment(data)}


def test_deleting_a_topic_mid_move_clears_its_admin_entries() -> None:
    """Deletion wins over a move in flight (KRaft's controller deletes the partitions with
    their move; the move's replicas, TRS and ORS, all get StopReplica(delete)). Its
    /admin/reassign_partitions entry named a target no controller works towards any more:
    left there, the next controller resumed it against a topic re-created under that name."""
    d = Driver()
    d.elect()
    _setup(d)
    other = TopicPartition("u", 0)
    d.request(E.CreateTopics(topics=(E.NewTopic("u", assignments={0: [1, 2]}),)))
    d.run()
    d.tree.write_reassign_partitions(encode_reassignment(
        [("t", 0, [4, 5, 2]), ("u", 0, [1, 3])]))
    d.run()
    assert d.tree.topics["t"].adding_replicas == {0: [4, 5]}  # waiting for 4 and 5
    d.request(E.DeleteTopics(topics=("t",)))
    d.run()
    assert {(r, T0) for r in (1, 2, 3, 4, 5)} <= _deleted(d)  # RS: TRS and ORS
    assert set(_admin_entries(d)) == {other}  # the other topic's move goes on
    assert set(d.core.ctx.admin_reassignments) == {other}
    for _, broker, errors in list(d.stop_replica_answers()):
        d.post(E.StopReplicaResponse(broker_id=broker, errors=errors))
    d.run()
    assert "t" not in d.tree.topics
    # The topic is created again, and a new controller takes over: nothing moves it.
    d.request(E.CreateTopics(topics=(E.NewTopic("t", assignments={0: [1, 2, 3]}),)))
    d.run()
    d.crash()
    d.elect()
    d.run()
    a = d.tree.topics["t"]
    assert a.partitions[0] == [1, 2, 3] and not a.adding_replicas and not a.removing_replicas


def test_a_new_controller_does_not_resume_the_move_of_a_topic_being_deleted() -> None:
    """The topic znode still lists AR and RR while the deletion runs: a controller taking
    over then resumed the move (step 2: a new leader epoch, LeaderAndIsr with is_new to AR),
    asking brokers to create the replicas the deletion is removing."""
    d = Driver()
    d.elect()
    _setup(d)
    d.request(E.AlterReassignments(items=((T0, (4, 5, 2)),)))
    d.run()
    d.request(E.DeleteTopics(topics=("t",)))
    d.run()
    d.crash()
    start = len(d.sent)
    d.elect()
    d.run()
    assert [(s.broker_id, p.partition) for s in d.sent[start:] if s.kind == "LeaderAndIsr"
            for p in s.request.partition_states if p.topic == "t"] == []
    for _, broker, errors in list(d.stop_replica_answers(start)):
        d.post(E.StopReplicaResponse(broker_id=broker, errors=errors))
    d.run()
    assert "t" not in d.tree.topics


@pytest.mark.parametrize("how", ["offline_unclean_election", "elect_leaders_unclean"])
def test_a_target_set_that_reaches_the_isr_through_an_election_completes_at_once(
        how: str) -> None:
    """Step 3 waits until TRS is in the ISR. An unclean election sets the ISR to the new
    leader alone: when that is all of TRS, no AlterPartition will ever come (the leader has
    nobody to add), and the move must go on to steps 4-7 at once, as after AlterPartition."""
    d = Driver({"unclean.leader.election.enable": how == "offline_unclean_election"})
    d.elect()
    _setup(d)
    d.request(E.AlterReassignments(items=((T0, (4,)),)))
    d.run()
    assert d.tree.topics["t"].adding_replicas == {0: [4]}  # 4 never caught up
    for b in (1, 2, 3):  # every replica in the ISR dies
        d.kill(b)
        d.run()
    if how == "elect_leaders_unclean":
        d.request(E.ElectLeaders(election_type=D.ElectionType.UNCLEAN, partitions=(T0,)))
        d.run()
    s = d.tree.states[T0]
    assert (s.leader, list(s.isr)) == (4, [4])  # elected uncleanly
    a = d.tree.topics["t"]
    assert (a.partitions[0], a.adding_replicas, a.removing_replicas) == ([4], {}, {})

"""Kill the controller after every effect of an operation; a new controller, built only from
the store, must finish it with the same result as the uninterrupted run.

Each operation runs once uninterrupted to count its effects, then once per effect index n
with `crash_after(n)`: the core dies after carrying out n effects (its in-memory state and
queued events are lost, its session expires), a new controller loads the store, and the
clients do what real ones do - a broker retries ControlledShutdown and AlterPartition that got
no answer, an admin retries DeleteTopics, brokers answer StopReplica. The final partition
states, topics and deletion queue must equal the uninterrupted run's (the controller epoch
stamped in each state is the only field allowed to differ).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from common import zk_layout as L
from common.names import TopicPartition
from controller import decisions as D
from controller import events as E
from tests.sim.driver import Crashed, Driver

Setup = Callable[[Driver], None]
Action = Callable[[Driver], "E.Event | None"]


def _cluster(brokers: int, topics: dict[str, tuple[int, int]]) -> Setup:
    """Brokers 1..n, then topics name -> (partitions, replication factor)."""
    def setup(d: Driver) -> None:
        for b in range(1, brokers + 1):
            d.register(b)
        d.run()
        for name, (parts, rf) in topics.items():
            assignment = {p: [(p + i) % brokers + 1 for i in range(rf)] for p in range(parts)}
            d.request(E.CreateTopics(topics=(E.NewTopic(name, assignments=assignment),)))
        d.run()
    return setup


def _ack_stop_replicas(d: Driver, acked: set[int]) -> bool:
    """Brokers answer every StopReplica(delete) they were sent (once each)."""
    posted = False
    for i, broker, errors in d.stop_replica_answers():
        if i not in acked:
            acked.add(i)
            d.post(E.StopReplicaResponse(broker_id=broker, errors=errors))
            posted = True
    return posted


def _answer_log_queries(d: Driver, answered: set[tuple[int, int]]) -> bool:
    """Brokers answer every GetReplicaLogInfo they were sent (once each; KIP-966): broker b's
    log of every partition ends at 10 * b, so the choice is the same whoever asks."""
    posted = False
    for _i, q in d.log_queries():
        key = (d.core.ctx.epoch, q.query_id)
        if key not in answered:
            answered.add(key)
            d.post(E.ReplicaLogInfoResponse(
                query_id=q.query_id, broker_id=q.broker_id, broker_epoch=q.broker_epoch,
                answers={tp: D.ReplicaLogInfo(1, 10 * q.broker_id) for tp, _ in q.partitions}))
            posted = True
    return posted


def _finish(d: Driver, retry: E.Event | None, rid: int | None) -> None:
    """Settle: answer StopReplicas and GetReplicaLogInfos, and re-send a request whose
    answer never came."""
    acked: set[int] = set()
    answered: set[tuple[int, int]] = set()
    for _ in range(50):
        d.run()
        if retry is not None and rid is not None and rid not in d.replies:
            rid = d.request(retry)
            continue
        if not _ack_stop_replicas(d, acked) and not _answer_log_queries(d, answered):
            return
    raise AssertionError("did not settle")


def _store(d: Driver) -> dict:
    t = d.tree
    return {
        "states": {tp: (s.leader, s.leader_epoch, tuple(s.isr), s.partition_epoch,
                        s.leader_recovery_state) for tp, s in sorted(t.states.items())},
        "topics": sorted(t.topics),
        "delete_topics": sorted(t.delete_topics),
        "restart_entries": sorted(t.restart_entries),
    }


def _run(setup: Setup, action: Action, crash_at: int | None,
         config: dict | None = None) -> tuple[dict, int, bool]:
    """(final store, effects the action took, whether the controller crashed)."""
    d = Driver(config)
    d.elect()
    setup(d)
    before = d.effects_done
    if crash_at is not None:
        d.crash_after(crash_at)
    retry = action(d)
    rid = d.request(retry) if retry is not None else None
    crashed = False
    try:
        d.run()
    except Crashed:
        crashed = True
    taken = d.effects_done - before
    if crashed:
        d.elect()
    _finish(d, retry, rid)
    return _store(d), taken, crashed


def _kill_broker(b: int) -> Action:
    def act(d: Driver):
        d.kill(b)
    return act


def _controlled_shutdown(b: int) -> Action:
    return lambda d: E.ControlledShutdown(broker_id=b)


def _delete(topic: str) -> Action:
    return lambda d: E.DeleteTopics(topics=(topic,))


def _shrink_isr(tp: TopicPartition, drop: int) -> Action:
    def act(d: Driver):
        s = d.core.ctx.leadership[tp]
        isr = tuple((r, d.core.ctx.broker_epoch(r)) for r in s.isr if r != drop)
        return E.AlterPartition(broker_id=s.leader, broker_epoch=d.core.ctx.broker_epoch(s.leader),
                                items=(D.AlterPartitionItem(tp, s.leader_epoch, isr,
                                                            s.partition_epoch),))
    return act


def _restart(broker: int, topic: str, partitions: int) -> Action:
    """Broker `broker` lost its replicas of `topic` with a log dir (design.md#jbod-step-2-4)."""
    def act(d: Driver):
        d.tree.add_restart_entry(L.encode_restart_entry(L.RestartEntry(
            broker, "/d1", tuple((topic, p) for p in range(partitions)))))
    return act


def _all_die_then_return_uncleanly(d: Driver) -> None:
    """Every replica dies (the last ones stay in the ELR), two return after an unclean
    shutdown (into LastKnownELR): the partitions wait for a recovery."""
    for b in (1, 2, 3):
        d.kill(b)
        d.run()
    for b in (1, 2):
        d.register(b, clean_shutdown=False)
        d.run()


def _register_uncleanly(b: int) -> Action:
    def act(d: Driver):
        d.register(b, clean_shutdown=False)
    return act


def _then(*setups: Setup) -> Setup:
    def setup(d: Driver) -> None:
        for s in setups:
            s(d)
    return setup


# KIP-966 with the Unclean Recovery Manager (Balanced: once every LastKnownELR member is back)
ELR_BALANCED = {"eligible.leader.replicas.enable": True, "min.insync.replicas": 2,
                "unclean.recovery.strategy": "Balanced"}

SCENARIOS = {
    "broker_failure_100_partitions": (_cluster(4, {"t": (100, 3)}), _kill_broker(1)),
    "controlled_shutdown": (_cluster(3, {"t": (12, 3), "u": (4, 2)}), _controlled_shutdown(2)),
    "topic_deletion": (_cluster(3, {"t": (6, 3), "keep": (2, 2)}), _delete("t")),
    # the grown topic znode is written before the new partitions' states: a controller that
    # dies in between leaves them to the next one's failover; the admin's retry then finds
    # the count reached (INVALID_PARTITIONS) and the states are the same
    "create_partitions": (_cluster(3, {"t": (2, 3)}),
                          lambda d: E.CreatePartitions(topics=(E.NewPartitions("t", 6),))),
    "alter_partition": (_cluster(3, {"t": (3, 3)}), _shrink_isr(TopicPartition("t", 0), 3)),
    "restart_partitions": (_cluster(3, {"t": (12, 3), "u": (2, 1)}), _restart(1, "t", 12)),
    "unclean_recovery": (_then(_cluster(3, {"t": (12, 3)}), _all_die_then_return_uncleanly),
                         _register_uncleanly(3), ELR_BALANCED),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_failover_after_every_effect_reaches_the_same_state(name: str) -> None:
    setup, action, *config = SCENARIOS[name]
    cfg = config[0] if config else None
    expected, total, crashed = _run(setup, action, None, cfg)
    assert not crashed and total > 3
    for n in range(total):
        got, _, crashed = _run(setup, action, n, cfg)
        assert crashed, f"crash-after {n} did not crash"
        if name in EPOCHS_MAY_MOVE:
            got, want = _without_epochs(got, expected), _without_epochs(expected, expected)
            assert got == want, f"{name}: failover after effect {n} of {total} differs"
            continue
        assert got == expected, f"{name}: failover after effect {n} of {total} differs"


# A restart applied again writes once more, if only to move the epochs on (it fences an
# AlterPartition proposed from the lost replica's fetches, decisions/restarts.py): the leader,
# ISR and recovery state must be the same, the epochs no lower.
EPOCHS_MAY_MOVE = {"restart_partitions"}


def _without_epochs(got: dict, expected: dict) -> dict:
    states = {}
    for tp, (leader, leader_epoch, isr, partition_epoch, recovery) in got["states"].items():
        _, want_leader_epoch, _, want_partition_epoch, _ = expected["states"][tp]
        states[tp] = (leader, isr, recovery, leader_epoch >= want_leader_epoch,
                      partition_epoch >= want_partition_epoch)
    return {**got, "states": states}


def test_the_uninterrupted_runs_change_something() -> None:
    """Guard against a vacuous comparison: each operation changes the store."""
    for name, (setup, action, *config) in SCENARIOS.items():
        cfg = config[0] if config else None
        d = Driver(cfg)
        d.elect()
        setup(d)
        before = _store(d)
        after, _, _ = _run(setup, action, None, cfg)
        assert after != before, name

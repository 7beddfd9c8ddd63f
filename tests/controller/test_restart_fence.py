"""The /restart_partitions fence (a late duplicate entry must not take a replica that rejoined
the ISR for an empty one): `stale_restart` over every short partition history, the
AlterPartition record it reads (`IsrRejoins`), and the entry's epochs on the wire.
The core-level scenario is testdata/restart_fence.txt."""

from __future__ import annotations

import itertools
import json

import pytest

from common import zk_layout as zl
from common.names import TopicPartition
from controller import decisions as D
from controller.context import ControllerContext
from controller.decisions.base import Decision, PartitionWrite

TP = TopicPartition("t", 0)
B = 3  # the broker that lost its replica

# One partition-state change (each bumps the partition epoch), as seen from broker B:
OTHER = "other"      # B's membership unchanged (another follower, an election, ...)
REMOVED = "removed"  # B leaves the ISR (a shrink, B died)
RESTARTED = "restarted"  # a restart of B's replica applied: B out, told to re-create it
READDED = "readded"  # AlterPartition re-admits B: its leader saw it caught up
EVENTS = (OTHER, REMOVED, RESTARTED, READDED)


def _histories(max_len: int):
    for n in range(max_len + 1):
        yield from itertools.product(EVENTS, repeat=n)


def _oracle(history, lost_at: int) -> bool:
    """Ignore the entry iff the replica B has in the ISR now is one re-created after the loss
    it reports: the last restart applied came after the epoch B lost the replica at (-1:
    unfenced), and AlterPartition re-admitted B after that restart. A re-admission without a
    restart before it vouches for the lost replica (an expansion proposed from its fetches,
    in flight at the loss: the cluster simulation's jbod seeds 595, 724, 844)."""
    restarts = [epoch for epoch, ev in enumerate(history, start=1) if ev == RESTARTED]
    return lost_at >= 0 and bool(restarts) and restarts[-1] > lost_at and any(
        ev == READDED and epoch > restarts[-1] for epoch, ev in enumerate(history, start=1))


def test_stale_restart_agrees_with_the_rule_over_every_history_of_up_to_five_changes():
    checked = 0
    for history in _histories(5):
        current = len(history)  # epoch 0 is the created state; each change adds one
        readded = [epoch for epoch, ev in enumerate(history, start=1) if ev == READDED]
        restarted = [epoch for epoch, ev in enumerate(history, start=1) if ev == RESTARTED]
        rejoined_at = readded[-1] if readded else None  # what the core records
        restarted_at = restarted[-1] if restarted else None
        for lost_at in range(-1, current + 1):  # -1: an entry from before the fence
            assert D.stale_restart(lost_at, rejoined_at, current, restarted_at) == \
                _oracle(history, lost_at), (history, lost_at)
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("lost_at, restarted_at, rejoined_at, current, stale", [
    (0, 1, None, 5, False),  # never re-admitted since this controller started: apply
    (2, None, 2, 2, False),  # re-admitted at the very state the broker lost it in: apply
    (2, 3, 4, 4, True),      # restarted, then re-admitted: the ISR member is the new replica
    (2, None, 3, 3, False),  # re-admitted after the loss, never restarted: an expansion in
                             # flight at the loss vouched for the lost replica - apply
    (2, 4, 3, 4, False),     # restarted after the re-admission: nothing vouches for it
    (-1, 1, 3, 3, False),    # unfenced (old broker): apply
    (2, 3, 7, 5, False),     # a record newer than the state: not this history, apply
    (5, 1, 3, 9, False),     # lost after the re-admission (its epoch lagged, or a second loss)
])
def test_stale_restart_cases(lost_at, restarted_at, rejoined_at, current, stale):
    assert D.stale_restart(lost_at, rejoined_at, current, restarted_at) is stale


def _ctx(topic_id: str = "id-1") -> ControllerContext:
    ctx = ControllerContext(9, epoch=1)
    ctx.add_topic(zl.TopicAssignment("t", topic_id, {0: [1, 2, 3]}), {})
    return ctx


def _state(isr, epoch: int) -> zl.LeaderAndIsr:
    return zl.LeaderAndIsr(1, 0, tuple(isr), 1, epoch)


def _write(old_isr, new_isr, epoch: int) -> Decision:
    return Decision(writes={TP: PartitionWrite(TP, _state(old_isr, epoch - 1),
                                               _state(new_isr, epoch))})


def test_isr_rejoins_records_additions_of_applied_writes_only():
    ctx, r = _ctx(), D.IsrRejoins()
    r.observe(ctx, _write((1, 2), (1, 2, 3), 4), failed={TP})  # refused: nothing happened
    assert r.rejoined_at(ctx, TP, 3) is None
    r.observe(ctx, _write((1, 2), (1, 2, 3), 4), failed=())
    assert (r.rejoined_at(ctx, TP, 3), r.rejoined_at(ctx, TP, 1)) == (4, None)
    r.observe(ctx, _write((1, 2, 3), (1, 3), 5), failed=())  # a shrink re-admits nobody
    assert r.rejoined_at(ctx, TP, 3) == 4
    r.observe(ctx, _write((1,), (1, 3), 7), failed=())
    assert r.rejoined_at(ctx, TP, 3) == 7


def test_isr_rejoins_does_not_fence_a_recreated_topic_of_the_same_name():
    r = D.IsrRejoins()
    r.observe(_ctx("old-id"), _write((1,), (1, 3), 6), failed=())
    assert r.rejoined_at(_ctx("new-id"), TP, 3) is None


def test_stale_restarts_reads_each_partitions_epoch_from_the_entry():
    ctx, r = _ctx(), D.IsrRejoins()
    ctx.add_topic(zl.TopicAssignment("u", "id-u", {0: [1, 3]}), {})
    u0 = TopicPartition("u", 0)
    ctx.leadership[TP] = _state((1, 3), 4)
    ctx.leadership[u0] = _state((1, 3), 4)
    r.observe(ctx, _write((1,), (1, 3), 4), failed=())
    r.observe(ctx, Decision(writes={u0: PartitionWrite(u0, _state((1,), 3), _state((1, 3), 4))}),
              failed=())
    entry = zl.RestartEntry(B, "/d0", (("t", 0), ("u", 0)), 7, (2, 4))
    assert D.stale_restarts(ctx, r, entry) == {}  # re-admitted, but never restarted
    ctx.leadership[TP] = ctx.leadership[u0] = _state((1,), 3)
    r.restarted(ctx, B, [TP, u0])
    ctx.leadership[TP] = ctx.leadership[u0] = _state((1, 3), 4)
    assert D.stale_restarts(ctx, r, entry) == {
        TP: "stale: lost at partition epoch 2, restarted at 3, back in the ISR at 4"}
    assert D.stale_restarts(ctx, r, zl.RestartEntry(B, "/d0", (("t", 0), ("u", 0)), 7)) == {}


def test_a_stale_partition_is_only_sent_its_state_and_the_others_are_restarted():
    ctx = _ctx()
    ctx.live_brokers = {b: zl.BrokerRegistration(b, "h", 1, epoch=b) for b in (1, 2, 3)}
    ctx.leadership[TP] = _state((1, 2, 3), 4)
    d = D.restart_partitions(ctx, B, [TP], stale=[TP])
    assert not d.writes and d.leader_and_isr == {B: {TP: False}}
    d = D.restart_partitions(ctx, B, [TP])
    assert d.writes[TP].new.isr == (1, 2) and d.leader_and_isr[B] == {TP: True}


# ------------------------------------------------------------------------- the entry's epochs

def test_the_entry_carries_each_partitions_epoch_and_reads_back():
    e = zl.RestartEntry(1, "/d1", (("t", 0), ("t", 2), ("u", 1)), 7, (4, -1, 9))
    data = zl.encode_restart_entry(e)
    assert json.loads(data)["partitions"] == [
        {"topic": "t", "partitions": [0, 2], "partition_epochs": [4, -1]},
        {"topic": "u", "partitions": [1], "partition_epochs": [9]}]
    back = zl.decode_restart_entry(data)
    assert back == e
    assert (back.partition_epoch("t", 0), back.partition_epoch("u", 1)) == (4, 9)
    assert back.partition_epoch("t", 2) == back.partition_epoch("t", 9) == -1


def test_an_entry_without_epochs_reads_as_unfenced_and_writes_as_before():
    old = (b'{"version":1,"broker":1,"log_dir":"/d1","broker_epoch":7,'
           b'"partitions":[{"topic":"t","partitions":[0,2]}]}')
    e = zl.decode_restart_entry(old)
    assert e == zl.RestartEntry(1, "/d1", (("t", 0), ("t", 2)), 7)
    assert e.partition_epochs == () and e.partition_epoch("t", 0) == -1
    # an entry without epochs is written as before the fence
    assert json.loads(zl.encode_restart_entry(e)) == json.loads(old)


@pytest.mark.parametrize("epochs", ['[1]', '"4"', '[1,true]', 'null'])
def test_unreadable_epochs_read_as_unfenced_not_as_an_invalid_entry(epochs):
    data = ('{"broker":1,"log_dir":"/d1","partitions":[{"topic":"t","partitions":[0,2],'
            f'"partition_epochs":{epochs}}}]}}').encode()
    e = zl.decode_restart_entry(data)  # dropping it would never restart a lost replica
    assert e.partitions == (("t", 0), ("t", 2))
    assert e.partition_epoch("t", 0) in (-1, 1) and e.partition_epoch("t", 2) == -1


def test_a_partition_named_twice_keeps_its_higher_epoch():
    data = (b'{"broker":1,"log_dir":"/d1","partitions":[{"topic":"t","partitions":[0],'
            b'"partition_epochs":[3]},{"topic":"t","partitions":[0],"partition_epochs":[8]}]}')
    assert zl.decode_restart_entry(data).partition_epoch("t", 0) == 8


def test_epochs_must_match_the_partitions():
    with pytest.raises(ValueError):
        zl.RestartEntry(1, "/d1", (("t", 0), ("t", 1)), 7, (3,))


def test_the_controller_simulation_finds_an_unfenced_late_duplicate(monkeypatch):
    """The simulation's duplicate entries and their invariant are not vacuous: without the
    fence, a re-admitted broker is taken out of the ISR within a few hundred seeds."""
    from tests.sim.sim import InvariantViolation, run_seed
    monkeypatch.setattr(D, "stale_restarts", lambda *a: {})
    with pytest.raises(InvariantViolation, match="late duplicate restart entry"):
        for seed in range(300):
            run_seed(seed, 20)

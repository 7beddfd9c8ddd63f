"""broker/replica_core.py: one partition's replication state, event by event (no I/O, no
loop). Each test names the rule of the core's docstring it holds to."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.replica_core import (
    EPOCH_START_PENDING,
    AdvanceHighWatermark,
    AlterPartitionAnswer,
    Appended,
    BecomeFollower,
    EpochStartWritten,
    FollowerFetch,
    IsrChangeWanted,
    LeaderAndIsr,
    LogEvent,
    ProposalDropped,
    ProposeIsr,
    ReplicaCore,
    StopReplica,
    Transitioned,
    WakeFetch,
    WakeProduce,
)
from common.controller_requests import LeaderAndIsrPartitionState
from common.errors import ErrorCode

ROOT = Path(__file__).resolve().parents[2]


def state(leader=1, leader_epoch=5, isr=(1, 2, 3), replicas=(1, 2, 3), partition_epoch=5,
          elr=(), recovery=0) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(topic="t", partition=0, controller_epoch=1, leader=leader,
                                      leader_epoch=leader_epoch, isr=isr,
                                      partition_epoch=partition_epoch, replicas=replicas,
                                      elr=elr, leader_recovery_state=recovery)


def leader(isr=(1, 2, 3), replicas=(1, 2, 3), min_isr=1, leo=10, elr=()) -> ReplicaCore:
    c = ReplicaCore(1, min_isr=min_isr)
    c.step(LeaderAndIsr(state(isr=isr, replicas=replicas, elr=elr), 0, leo, 0))
    c.step(EpochStartWritten(0))
    return c


def fetch(c: ReplicaCore, b: int, offset: int, leo=10, hw=0, now=1, expand=True, epoch=1,
          pending_id=None):
    return c.step(FollowerFetch(b, epoch, offset, 0, now, leo, hw, pending_id, expand))


def hw_of(effects) -> int | None:
    return next((e.hw for e in effects if isinstance(e, AdvanceHighWatermark)), None)


def answer(c: ReplicaCore, p: ProposeIsr, error=ErrorCode.NONE, isr=None, leo=10, hw=0,
           leader_id=1, elr=()):
    return c.step(AlterPartitionAnswer(
        p.new_isr, p.kind, (c.leader_epoch, c.partition_epoch) != (p.leader_epoch,
                                                                   p.partition_epoch),
        p.broker_epochs, error, leader_id, c.leader_epoch,
        p.new_isr if isr is None else isr, c.partition_epoch + 1, 0, elr, leo, hw))


# ---------------------------------------------------------------------- leadership


def test_leadership_sets_the_epoch_start_pending_until_it_is_written():
    c = ReplicaCore(1)
    out = c.step(LeaderAndIsr(state(), 0, 10, 0))
    [t] = [e.transition for e in out if isinstance(e, Transitioned)]
    assert t.lead and t.reset_followers and t.write_epoch_start
    assert c.is_leader and c.leader_epoch_start_offset == EPOCH_START_PENDING
    assert set(c.followers) == {2, 3} and WakeProduce() in out
    # a caught-up follower cannot join before the epoch start is written (can_join_isr)
    c.isr = (1,)
    fetch(c, 2, 10, hw=10, expand=False)
    assert not c.isr_expansion_candidate(2, 10)
    c.step(EpochStartWritten(10))
    assert c.isr_expansion_candidate(2, 10)


def test_an_isr_only_update_keeps_follower_states_a_new_epoch_resets_them():
    c = leader()
    fetch(c, 2, 7)
    c.step(LeaderAndIsr(state(partition_epoch=6), 0, 10, 0))  # same epoch: ISR-only update
    assert c.followers[2].log_end_offset == 7
    c.step(LeaderAndIsr(state(leader_epoch=6, partition_epoch=7), 0, 10, 0))
    assert c.followers[2].log_end_offset == -1


def test_becoming_a_follower_drops_followers_and_the_pending_isr_and_wakes_everyone():
    c = leader()
    c.step(IsrChangeWanted((1, 2), "shrink"))
    out = c.step(LeaderAndIsr(state(leader=2, leader_epoch=6), 0, 10, 0))
    [t] = [e.transition for e in out if isinstance(e, Transitioned)]
    assert t.follow and t.fetch and not c.is_leader
    assert c.followers == {} and c.pending_isr is None
    assert WakeProduce() in out and WakeFetch() in out


def test_stop_replica_is_neither_leader_nor_follower_until_the_next_state():
    c = leader()
    out = c.step(StopReplica())
    assert c.stopped and not c.is_leader and WakeFetch() in out
    assert c.step(Appended(20, 0)) == []
    c.step(LeaderAndIsr(state(leader_epoch=6), 0, 10, 0))
    assert c.is_leader and not c.stopped


def test_become_follower_on_a_lost_dir():
    c = leader()
    assert c.step(BecomeFollower()) == [WakeProduce(), WakeFetch()]
    assert c.followers == {}


# ---------------------------------------------------------------------- HW


def test_hw_is_the_minimum_leo_over_the_isr():
    c = leader()
    assert hw_of(fetch(c, 2, 6)) is None  # 3 has not fetched: it holds the HW
    assert hw_of(fetch(c, 3, 4)) == 4
    assert hw_of(fetch(c, 3, 9, hw=4)) == 6


def test_hw_never_goes_backwards():
    c = leader(isr=(1, 2), replicas=(1, 2))
    assert hw_of(fetch(c, 2, 8)) == 8
    assert c.new_high_watermark(10, 8) is None
    # a follower that truncated reports a lower offset: nothing moves
    assert hw_of(fetch(c, 2, 3, hw=8)) is None


@pytest.mark.parametrize("isr,replicas,min_isr,moves", [
    ((1,), (1, 2, 3), 2, False),   # under min ISR: frozen
    ((1, 2), (1, 2, 3), 2, True),
    ((1,), (1,), 2, True),         # RF 1 below min ISR: effective min ISR is 1 (KIP-966)
    ((1, 2), (1, 2), 3, True),     # RF 2, min ISR 3: effective 2
    ((1,), (1, 2), 3, False),      # effective 2, ISR 1
])
def test_hw_under_min_isr_with_the_effective_min_isr(isr, replicas, min_isr, moves):
    c = leader(isr=isr, replicas=replicas, min_isr=min_isr)
    for b in isr[1:]:
        fetch(c, b, 10, expand=False)
    assert c.effective_min_isr == min(min_isr, len(replicas))
    assert (c.new_high_watermark(10, 0) is not None) is moves
    assert c.under_min_isr is (len(isr) < c.effective_min_isr)


def test_hw_stays_frozen_while_the_controller_lists_an_elr():
    c = leader(isr=(1,), elr=(2, 3))
    assert c.step(Appended(10, 0)) == []
    c.step(LeaderAndIsr(state(isr=(1,), partition_epoch=6), 0, 10, 0))
    assert c.elr == () and c.new_high_watermark(10, 0) == 10


def test_the_freeze_reads_the_committed_isr_the_minimum_the_maximal_one():
    c = leader(isr=(1, 2), min_isr=2)
    fetch(c, 2, 10, expand=False)
    fetch(c, 3, 4, expand=False)
    c.pending_isr = (1, 2, 3)  # an expansion of 3 in flight
    assert c.new_high_watermark(10, 0) == 4  # bounded by 3's LEO (maximal ISR)
    c.isr, c.pending_isr = (1,), (1, 3)
    assert c.new_high_watermark(10, 0) is None  # committed ISR 1 < min ISR 2: frozen


# ---------------------------------------------------------------------- follower fetches


def test_expansion_comes_before_the_hw_in_one_fetch():
    """Rule 1: the proposal sets the pending ISR before the HW is computed, so the HW waits
    for the follower being added (seeds 77 and 78 of the truncation profile)."""
    c = leader(isr=(1,), replicas=(1, 2, 3))
    out = fetch(c, 3, 6, hw=4)  # past the HW: may join
    assert [type(e) for e in out] == [ProposeIsr, AdvanceHighWatermark, WakeProduce]
    assert out[0].new_isr == (1, 3) and c.pending_isr == (1, 3)
    assert out[1].hw == 6  # not 10: 3 is in the maximal ISR


def test_a_stale_incarnation_or_a_fetch_beyond_the_leo_changes_nothing():
    c = leader()
    fetch(c, 2, 5, epoch=7)
    assert fetch(c, 2, 9, epoch=6) == []  # KIP-903: an older broker epoch
    assert c.followers[2].log_end_offset == 5
    assert fetch(c, 2, 11, epoch=7) == []  # beyond the LEO
    assert fetch(c, 9, 5) == []  # not a replica


def test_pending_reads_are_recorded_only_when_eligible():
    c = leader()
    fetch(c, 2, 10, pending_id=1)  # first fetch: last_fetch_leader_leo unknown (-1) -> eligible
    assert c.followers[2].pending_fetches == {1: 10}
    fetch(c, 2, 3, leo=20, pending_id=2)  # behind the LEO it saw last time: not eligible
    assert 2 not in c.followers[2].pending_fetches


# ---------------------------------------------------------------------- ISR proposals


def test_one_proposal_in_flight():
    c = leader()
    [p] = c.step(IsrChangeWanted((1, 2), "shrink"))
    assert p.kind == "shrink" and p.leader_epoch == 5 and p.partition_epoch == 5
    assert c.step(IsrChangeWanted((1,), "shrink")) == []
    assert c.out_of_sync(10, 10_000, 1_000) == set()  # no shrink considered while pending
    assert c.maximal_isr == (1, 2, 3)


def test_relinquish_replaces_a_pending_change():
    c = leader()
    c.step(IsrChangeWanted((1, 2), "shrink"))
    [p] = c.step(IsrChangeWanted((2, 3, 1), "relinquish"))
    assert c.pending_isr == (2, 3, 1)
    out = answer(c, p, error=ErrorCode.NEW_LEADER_ELECTED, leader_id=2)
    assert [e.name for e in out if isinstance(e, LogEvent)] == ["leadership_relinquished"]
    assert c.pending_isr is None


def test_an_accepted_shrink_applies_the_controllers_isr_and_moves_the_hw():
    c = leader(min_isr=2)
    fetch(c, 2, 10, expand=False)
    fetch(c, 3, 2, expand=False)
    assert c.new_high_watermark(10, 0) == 2
    [p] = c.step(IsrChangeWanted((1, 2), "shrink"))
    out = answer(c, p, hw=2)
    assert c.isr == (1, 2) and c.pending_isr is None and c.partition_epoch == 6
    assert [type(e) for e in out] == [LogEvent, AdvanceHighWatermark, WakeProduce]
    assert out[0].name == "isr_shrink" and out[1].hw == 10


def test_an_expansion_that_is_refused_is_not_proposed_again_for_that_broker_epoch():
    c = leader(isr=(1,))
    [p, *_] = fetch(c, 3, 10, hw=10, epoch=13)
    out = answer(c, p, error=ErrorCode.INELIGIBLE_REPLICA)
    assert c.refused_expansions == {3: 13} and c.pending_isr is None and c.isr == (1,)
    assert [e.name for e in out] == ["isr_update_failed"]
    assert not any(isinstance(e, ProposeIsr) for e in fetch(c, 3, 10, hw=10, epoch=13))
    # a new incarnation may be proposed
    assert any(isinstance(e, ProposeIsr) for e in fetch(c, 3, 10, hw=10, epoch=14))


def test_a_stale_answer_or_a_dropped_proposal_changes_nothing_else():
    c = leader()
    [p] = c.step(IsrChangeWanted((1, 2), "shrink"))
    c.step(LeaderAndIsr(state(partition_epoch=6), 0, 10, 0))  # the epoch moved
    assert c.pending_isr is None
    assert answer(c, p) == [] and c.isr == (1, 2, 3)
    [q] = c.step(IsrChangeWanted((1, 3), "shrink"))
    c.step(ProposalDropped((9,)))  # not ours
    assert c.pending_isr == (1, 3)
    c.step(ProposalDropped(q.new_isr))
    assert c.pending_isr is None


def test_an_answer_naming_another_leader_is_not_applied():
    c = leader()
    [p] = c.step(IsrChangeWanted((1, 2), "shrink"))
    assert answer(c, p, leader_id=2) == [] and c.isr == (1, 2, 3)


def test_recovered_reports_the_recovery_state_and_keeps_the_isr():
    c = ReplicaCore(1)
    c.step(LeaderAndIsr(state(recovery=1), 0, 10, 0))
    assert c.leader_recovery_state == 1
    [p] = c.step(IsrChangeWanted(c.isr, "recovered"))
    out = answer(c, p)
    assert c.leader_recovery_state == 0
    assert [e.name for e in out] == ["leader_recovered"]


def test_the_broker_epochs_of_a_proposal_are_those_of_proposal_time():
    c = leader(isr=(1, 2))
    fetch(c, 2, 10, epoch=22, expand=False)
    [p] = c.step(IsrChangeWanted((1, 2, 3), "expand"))
    assert p.broker_epochs == (-1, 22, -1)  # the leader itself and 3 unknown


def test_every_event_sequence_keeps_the_invariants():
    """Exhaustive over short sequences: the HW never decreases, a pending ISR only exists on
    a leader, the maximal ISR contains the ISR, and a proposal is never made while one is
    pending."""
    events = [  # (core, the log's HW as the shell holds it)
        lambda c, hw: fetch(c, 2, 10, hw=hw),
        lambda c, hw: fetch(c, 3, 4, hw=hw),
        lambda c, hw: c.step(IsrChangeWanted((1, 2), "shrink")),
        lambda c, hw: c.step(LeaderAndIsr(state(partition_epoch=c.partition_epoch + 1), 0, 10,
                                          hw)),
        lambda c, hw: c.step(LeaderAndIsr(state(leader=2, leader_epoch=c.leader_epoch + 1), 0,
                                          10, hw)),
        lambda c, hw: c.step(StopReplica()),
        lambda c, hw: c.step(Appended(10, hw)),
    ]
    for seq in itertools.product(range(len(events)), repeat=4):
        c, hw = leader(min_isr=2), 0
        for i in seq:
            pending_before = c.pending_isr
            out = events[i](c, hw)
            new = hw_of(out)
            if new is not None:
                assert new > hw
                hw = new
            proposals = [e for e in out if isinstance(e, ProposeIsr)]
            assert not (proposals and pending_before is not None and c.is_leader
                        and proposals[0].kind != "relinquish" and i != 3 and i != 4)
            assert c.pending_isr is None or c.is_leader
            assert set(c.isr) <= set(c.maximal_isr)


def test_the_core_imports_no_asyncio_and_no_grpc():
    """Pure core: importing it (and all it loads) brings in no event loop, no channel and no
    generated code, in a fresh interpreter."""
    probe = ("import sys, broker.replica_core; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('asyncio', 'grpc') "
             "or m.endswith(('_pb2', '_pb2_grpc'))))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]"

"""The leader's HW against min ISR, on a real Partition and Log.

Kafka's Partition.maybeIncrementLeaderHW takes the minimum LEO over the *maximal* ISR (the
committed ISR plus an expansion in flight), but freezes the HW while the *committed* ISR is below
the effective min ISR, min(min.insync.replicas, RF) (KIP-966: ELR vouches only for what was
committed while the ISR was at min ISR). Produce admission (NOT_ENOUGH_REPLICAS) uses
min.insync.replicas as configured.
"""

from __future__ import annotations

import pytest

from broker import fencing
from broker.delayed_produce import ProduceWait, produce_wait
from broker.partition import Partition
from broker.storage.log import Log
from common.errors import ErrorCode
from common.names import TopicPartition
from tests.storage.helpers import batch

TP = TopicPartition("t", 0)


def leader(tmp_path, *, isr, replicas, min_isr, leo=10) -> Partition:
    p = Partition(TP, 1)
    p.log = Log.open(str(tmp_path), TP)
    p.apply_state(leader=1, leader_epoch=5, partition_epoch=5, controller_epoch=1, isr=isr,
                  replicas=replicas)
    p.min_isr = min_isr
    p.become_leader(now_ms=0, new_epoch=True)
    p.leader_epoch_start_offset = 0
    p.log.append_as_leader(batch(leo), 5)
    return p


def test_hw_does_not_advance_on_an_uncommitted_isr_expansion(tmp_path) -> None:
    """Defect 1's shape: RF 3, min ISR 2, ISR shrunk to [1] (the controller put 2 in the ELR),
    follower 3 caught up and proposed: until the controller commits [1, 3], the HW must not
    move - if the expansion never lands and 1 dies, 2 is elected cleanly from the ELR without
    the records the HW would have exposed."""
    p = leader(tmp_path, isr=(1,), replicas=(1, 2, 3), min_isr=2)
    p.pending_isr = (1, 3)
    p.record_follower_fetch(3, 10, 0, now_ms=1, broker_epoch=1)
    assert p.maybe_advance_hw() is False
    assert p.high_watermark == 0
    # acks=all written meanwhile is not acknowledged either (DelayedProduce's view)
    assert produce_wait(p, 5, 10, lambda o: 5, 1.0) is ProduceWait.ISR_TOO_SMALL
    # once committed, the HW moves to the min LEO over the ISR
    p.isr, p.pending_isr = (1, 3), None
    assert p.maybe_advance_hw() is True
    assert p.high_watermark == 10


def test_a_pending_expansion_still_holds_the_hw_at_the_joining_replica(tmp_path) -> None:
    """The maximal ISR still bounds the HW from below (Kafka: a replica being added must have
    what the HW exposes once it is in the ISR)."""
    p = leader(tmp_path, isr=(1, 2), replicas=(1, 2, 3), min_isr=2)
    p.pending_isr = (1, 2, 3)
    p.record_follower_fetch(2, 10, 0, now_ms=1, broker_epoch=1)
    p.record_follower_fetch(3, 4, 0, now_ms=1, broker_epoch=1)
    p.maybe_advance_hw()
    assert p.high_watermark == 4


@pytest.mark.parametrize("rf, configured", [(1, 2), (2, 3), (1, 3)])
def test_a_topic_whose_rf_is_below_min_isr_still_advances_its_hw(tmp_path, rf, configured):
    """Defect 3: the freeze uses min(min.insync.replicas, RF), so acks=1 records of an RF-1
    topic on brokers with min.insync.replicas=2 become readable; acks=all is refused up front
    with NOT_ENOUGH_REPLICAS as in Kafka."""
    replicas = tuple(range(1, rf + 1))
    p = leader(tmp_path, isr=replicas, replicas=replicas, min_isr=configured)
    for b in replicas[1:]:
        p.record_follower_fetch(b, 10, 0, now_ms=1, broker_epoch=1)
    p.maybe_advance_hw()
    assert p.high_watermark == 10
    assert fencing.produce_error(p, True, -1) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert fencing.produce_error(p, True, 1) is None


def test_under_min_isr_counts_against_the_effective_min_isr(tmp_path) -> None:
    p = leader(tmp_path, isr=(1,), replicas=(1,), min_isr=2)
    assert not p.under_min_isr
    q = leader(tmp_path / "q", isr=(1,), replicas=(1, 2), min_isr=2)
    assert q.under_min_isr


def test_a_follower_proposed_for_the_isr_bounds_the_hw_it_was_admitted_under(tmp_path) -> None:
    """design.md#sim-finding-h: the leader must propose a caught-up
    follower (setting the pending ISR) *before* it moves the HW, as Kafka's
    updateFollowerFetchState runs maybeExpandIsr before maybeIncrementLeaderHW. Here the HW
    lags at 4 (follower 2's fetch at 10 was recorded, the HW not yet recomputed); follower 3
    fetches at 6, enough to join against HW 4. Moving the HW first took it to 10, and the
    expansion then put 3 in the ISR without offsets 6..9."""
    p = leader(tmp_path, isr=(1, 2), replicas=(1, 2, 3), min_isr=1)
    p.record_follower_fetch(2, 4, 0, now_ms=1, broker_epoch=1)
    p.maybe_advance_hw()
    p.record_follower_fetch(2, 10, 0, now_ms=2, broker_epoch=1)  # HW not recomputed yet
    assert p.high_watermark == 4
    proposed = []

    def propose(part, proposal):  # AlterPartitionManager.enqueue: the core set the pending ISR
        proposed.append(proposal.new_isr[-1])
        assert part.pending_isr == proposal.new_isr

    p.on_follower_fetch(3, 1, 6, 0, now_ms=3, propose_expansion=propose)
    assert proposed == [3]
    assert p.high_watermark == 6


def test_the_hw_stays_frozen_while_the_controller_holds_an_elr(tmp_path) -> None:
    """Controller and leader hear of a min.insync.replicas change separately. Here
    the leader already reads the decrease (min ISR 1: ISR [1] would commit) while the
    controller's state still lists the ELR {2, 3}; committing now would expose records that a
    clean election of 2 or 3 loses. The HW moves only once a state without ELR arrives."""
    from common.controller_requests import LeaderAndIsrPartitionState
    p = leader(tmp_path, isr=(1,), replicas=(1, 2, 3), min_isr=1)
    p.apply_state(leader=1, leader_epoch=5, partition_epoch=6, controller_epoch=1, isr=(1,),
                  replicas=(1, 2, 3), elr=(2, 3))
    assert p.maybe_advance_hw() is False
    assert p.high_watermark == 0
    # the controller's recheck after the decrease clears the ELR (a new partition epoch)
    p.apply_leader_and_isr(LeaderAndIsrPartitionState(
        topic=TP.topic, partition=TP.partition, controller_epoch=1, leader=1, leader_epoch=5,
        partition_epoch=7, isr=(1,), replicas=(1, 2, 3)), now_ms=5)
    assert p.elr == ()
    assert p.high_watermark == 10

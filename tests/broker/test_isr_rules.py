"""The leader's ISR / HW rules (pure): tables of fetch histories and expected outcomes."""

import pytest

from broker.isr import (
    FollowerState,
    can_join_isr,
    is_caught_up,
    new_high_watermark,
    out_of_sync_replicas,
    reset_for_new_leadership,
    update_fetch_state,
)

LAG = 10_000


def replay(history, start_caught_up=0):
    """history: (time, fetch_offset, leader_leo) per follower fetch."""
    f = FollowerState(2, last_caught_up_time_ms=start_caught_up)
    for t, off, leo in history:
        update_fetch_state(f, off, 0, t, leo)
    return f


@pytest.mark.parametrize("history, now, leader_leo, in_sync", [
    # fetched at the leader's LEO: caught up at that fetch
    ([(1000, 50, 50)], 1000 + LAG, 50, True),
    ([(1000, 50, 50)], 1000 + LAG + 1, 60, False),
    # behind, but at the LEO the leader had at the previous fetch: caught up as of that fetch
    ([(1000, 40, 50), (2000, 50, 70)], 1000 + LAG, 70, True),
    ([(1000, 40, 50), (2000, 50, 70)], 1000 + LAG + 1, 70, False),
    # always behind the previous LEO: never caught up
    ([(1000, 10, 50), (2000, 20, 70), (3000, 30, 90)], 3000, 90, True),  # within lag of 0
    ([(1000, 10, 50), (2000, 20, 70), (3000, 30, 90)], LAG + 1, 90, False),
    # a follower whose LEO equals the leader's is in sync however long ago it fetched
    ([(1000, 50, 50)], 1000 + 10 * LAG, 50, True),
])
def test_caught_up_table(history, now, leader_leo, in_sync):
    f = replay(history)
    assert is_caught_up(f, leader_leo, now, LAG) is in_sync


def test_last_caught_up_time_never_moves_back():
    f = replay([(5000, 50, 50), (6000, 10, 60)])
    assert f.last_caught_up_time_ms == 5000


def test_out_of_sync_excludes_leader_and_reports_missing_followers():
    followers = {2: replay([(1000, 50, 50)]), 3: replay([(1000, 50, 50)])}
    followers[3].log_end_offset = 40
    assert out_of_sync_replicas((1, 2, 3), 1, followers, 60, 1000 + LAG + 1, LAG) == {2, 3}
    assert out_of_sync_replicas((1, 2, 3), 1, followers, 50, 1000 + LAG + 1, LAG) == {3}
    assert out_of_sync_replicas((1, 2, 4), 1, followers, 50, 1000, LAG) == {4}


def test_new_leader_treats_isr_members_as_caught_up_now():
    f = FollowerState(2)
    reset_for_new_leadership(f, 7000, in_isr=True)
    assert is_caught_up(f, 100, 7000 + LAG, LAG)
    g = FollowerState(3)
    reset_for_new_leadership(g, 7000, in_isr=False)
    assert not is_caught_up(g, 100, LAG + 1, LAG)


@pytest.mark.parametrize("leo, hw, epoch_start, ok", [
    (100, 100, 90, True), (99, 100, 90, False), (100, 100, 101, False), (-1, 0, 0, False),
    (120, 100, 120, True),
])
def test_can_join_isr(leo, hw, epoch_start, ok):
    f = FollowerState(2, log_end_offset=leo)
    assert can_join_isr(f, hw, epoch_start) is ok


@pytest.mark.parametrize("isr, leos, min_isr, current, expected", [
    ((1, 2, 3), {2: 80, 3: 90}, 1, 50, 80),      # min LEO over the ISR
    ((1, 2), {2: 80, 3: 10}, 1, 50, 80),         # followers outside the ISR do not count
    ((1,), {}, 1, 50, 100),                      # alone in the ISR: the leader's LEO
    ((1,), {}, 2, 50, 50),                       # below min.insync.replicas: frozen
    ((1, 2, 3), {2: 40, 3: 90}, 1, 50, 50),      # never backwards
    ((1, 2), {2: -1}, 1, 50, 50),                # an ISR member that has not fetched holds it
])
def test_high_watermark(isr, leos, min_isr, current, expected):
    followers = {b: FollowerState(b, log_end_offset=o) for b, o in leos.items()}
    assert new_high_watermark(current, 100, isr, 1, followers, min_isr) == expected


# --------------------------------------------------------------- design.md#kip-501

from broker.isr import (  # noqa: E402
    complete_pending_fetch,
    pending_fetch_eligible,
    relinquish_isr,
    should_relinquish,
)


@pytest.mark.parametrize("history, pending_at, now, leader_leo, flag, in_sync", [
    # caught up at t=1000, then a fetch at the previous LEO is being read slowly
    ([(1000, 50, 50)], 50, 1000 + LAG + 5000, 80, True, True),
    ([(1000, 50, 50)], 50, 1000 + LAG + 5000, 80, False, False),  # flag off: Kafka's rule
    # the pending fetch is behind the LEO the leader had at the previous fetch: not eligible
    ([(1000, 40, 50)], 40, 1000 + LAG + 5000, 80, True, False),
    # no pending fetch: the flag changes nothing
    ([(1000, 50, 50)], None, 1000 + LAG + 5000, 80, True, False),
])
def test_pending_fetch_in_sync_table(history, pending_at, now, leader_leo, flag, in_sync):
    f = replay(history)
    if pending_at is not None and pending_fetch_eligible(f, pending_at):
        f.pending_fetches[1] = pending_at
    assert is_caught_up(f, leader_leo, now, LAG, pending_reads_in_sync=flag) is in_sync


def test_completed_slow_read_counts_from_its_completion_time():
    f = replay([(1000, 50, 50)])
    f.pending_fetches[7] = 50
    complete_pending_fetch(f, 7, 9000)
    assert f.pending_fetches == {} and f.last_caught_up_time_ms == 9000
    complete_pending_fetch(f, 7, 12000)  # already removed (e.g. the read failed earlier)
    assert f.last_caught_up_time_ms == 9000


def test_out_of_sync_honours_pending_fetches_only_with_the_flag():
    followers = {2: replay([(1000, 50, 50)])}
    followers[2].pending_fetches[1] = 50
    now = 1000 + LAG + 1
    assert out_of_sync_replicas((1, 2), 1, followers, 80, now, LAG) == {2}
    assert out_of_sync_replicas((1, 2), 1, followers, 80, now, LAG,
                                pending_reads_in_sync=True) == set()


def test_relinquish_rules():
    assert should_relinquish(600, 500, True)
    assert not should_relinquish(400, 500, True)
    assert not should_relinquish(6000, 500, False)  # flag off: Kafka never relinquishes
    assert relinquish_isr((1, 2, 3), 1) == (2, 3, 1)
    assert relinquish_isr((2, 1, 3), 1) == (2, 3, 1)

"""Leader selectors as tables: (assignment, ISR, live, shutting down, policy) -> election."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.selectors import (
    Election,
    controlled_shutdown_leader,
    initial_leader,
    offline_leader,
    preferred_leader,
    reassigned_leader,
    relinquished_leader,
    restarted_leader,
)

E = Election


@pytest.mark.parametrize("assignment,isr,live,down,unclean,expected", [
    # first live ISR member in *assignment* order, not ISR order
    ([1, 2, 3], [3, 2, 1], {1, 2, 3}, set(), False, E(1, (3, 2, 1))),
    ([1, 2, 3], [3, 2], {2, 3}, set(), False, E(2, (3, 2))),
    # the new ISR keeps only live members, in ISR order
    ([1, 2, 3], [1, 2, 3], {2, 3}, set(), False, E(2, (2, 3))),
    ([1, 2, 3], [1, 3], {2, 3}, set(), False, E(3, (3,))),
    # no live ISR member: offline unless unclean
    ([1, 2, 3], [1], {2, 3}, set(), False, None),
    ([1, 2, 3], [1], {2, 3}, set(), True, E(2, (2,), unclean=True)),
    ([1, 2, 3], [1], set(), set(), True, None),
    # shutting-down brokers are not eligible, clean or unclean
    ([1, 2, 3], [1, 2], {1, 2, 3}, {1}, False, E(2, (2,))),
    ([1, 2, 3], [1], {1, 2, 3}, {1}, False, None),
    ([1, 2, 3], [1], {1, 2, 3}, {1, 2}, True, E(3, (3,), unclean=True)),
    # an ISR member that is not in the assignment is never elected
    ([1, 2], [9], {1, 2, 9}, set(), False, None),
])
def test_offline_leader(assignment, isr, live, down, unclean, expected):
    assert offline_leader(assignment, isr, live, down, unclean) == expected


@pytest.mark.parametrize("assignment,isr,live,down,expected", [
    ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}, E(2, (2, 3))),
    ([1, 2, 3], [1, 3], {1, 2, 3}, {1}, E(3, (3,))),
    ([1, 2, 3], [1], {1, 2, 3}, {1}, None),                # no other ISR member: remains
    ([1, 2, 3], [1, 2, 3], {1, 3}, {1}, E(3, (2, 3))),     # dead 2 is skipped (ISR filter is
    #                                                        for shutting-down brokers only)
    ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1, 2}, E(3, (3,))),
    ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1, 2, 3}, None),
])
def test_controlled_shutdown_leader(assignment, isr, live, down, expected):
    assert controlled_shutdown_leader(assignment, isr, live, down) == expected


@pytest.mark.parametrize("assignment,isr,live,down,excluded,expected", [
    ([1, 2, 3], [2, 3, 1], {1, 2, 3}, set(), set(), E(1, (2, 3, 1))),
    ([1, 2, 3], [2, 3], {1, 2, 3}, set(), set(), None),    # not in ISR
    ([1, 2, 3], [2, 3, 1], {2, 3}, set(), set(), None),    # dead
    ([1, 2, 3], [2, 3, 1], {1, 2, 3}, {1}, set(), None),   # shutting down
    ([1, 2, 3], [2, 3, 1], {1, 2, 3}, set(), {1}, None),   # design.md#kip-501 cool-down
    ([1, 2, 3], [2, 3, 1], {1, 2, 3}, set(), {2}, E(1, (2, 3, 1))),
    ([], [], {1}, set(), set(), None),
])
def test_preferred_leader(assignment, isr, live, down, excluded, expected):
    assert preferred_leader(assignment, isr, live, down, excluded) == expected


@pytest.mark.parametrize("new_isr,sender,live,down,expected", [
    ([2, 3, 1], 1, {1, 2, 3}, set(), E(2, (2, 3, 1))),
    ([2, 3, 1], 1, {1, 3}, set(), E(3, (2, 3, 1))),
    ([2, 3, 1], 1, {1, 2, 3}, {2}, E(3, (2, 3, 1))),
    ([1], 1, {1, 2, 3}, set(), None),
    ([2, 1], 1, {1}, set(), None),
])
def test_relinquished_leader(new_isr, sender, live, down, expected):
    assert relinquished_leader(new_isr, sender, live, down) == expected


@pytest.mark.parametrize("target,isr,live,expected", [
    ([4, 5, 6], [1, 2, 3, 4, 5, 6], {1, 2, 3, 4, 5, 6}, E(4, (1, 2, 3, 4, 5, 6))),
    ([4, 5, 6], [1, 2, 3, 5], {1, 2, 3, 4, 5, 6}, E(5, (1, 2, 3, 5))),
    ([4, 5, 6], [1, 2, 3], {1, 2, 3, 4, 5, 6}, None),
])
def test_reassigned_leader(target, isr, live, expected):
    assert reassigned_leader(target, isr, live, set()) == expected


@pytest.mark.parametrize("assignment,isr,leader,restarted,live,unclean,expected", [
    # design.md#jbod a) the restarted broker led: new ISR = ISR - b, leader = first of AR in it
    ([1, 2, 3], [1, 2, 3], 1, 1, {1, 2, 3}, False, E(2, (2, 3))),
    ([1, 2, 3], [1, 3], 1, 1, {1, 2, 3}, False, E(3, (3,))),
    # b) it followed: the leader stays, b leaves the ISR
    ([1, 2, 3], [1, 2, 3], 1, 2, {1, 2, 3}, False, E(1, (1, 3))),
    # the new ISR is empty: like an offline election
    ([1, 2, 3], [1], 1, 1, {1, 2, 3}, False, None),
    ([1, 2, 3], [1], 1, 1, {1, 2, 3}, True, E(2, (2,), unclean=True)),
])
def test_restarted_leader(assignment, isr, leader, restarted, live, unclean, expected):
    assert restarted_leader(assignment, isr, leader, restarted, live, set(), unclean) == expected


def test_initial_leader():
    assert initial_leader([3, 1, 2], {1, 2, 3}) == E(3, (3, 1, 2))
    assert initial_leader([3, 1, 2], {1, 2}) == E(1, (1, 2))
    assert initial_leader([3], {1}) is None


brokers = st.integers(0, 6)


@given(assignment=st.lists(brokers, min_size=1, max_size=5, unique=True),
       isr=st.lists(brokers, max_size=5, unique=True),
       live=st.sets(brokers), down=st.sets(brokers), unclean=st.booleans())
def test_selector_invariants(assignment, isr, live, down, unclean):
    """Whatever they are given, selectors elect an eligible assigned replica, the new leader is
    in the new ISR, and a clean election never puts a non-ISR member in the ISR."""
    for e in (offline_leader(assignment, isr, live, down, unclean),
              controlled_shutdown_leader(assignment, isr, live, down),
              preferred_leader(assignment, isr, live, down)):
        if e is None:
            continue
        assert e.leader in assignment and e.leader in live and e.leader not in down
        assert e.leader in e.isr
        if not e.unclean:
            assert set(e.isr) <= set(isr)
        else:
            assert unclean and e.isr == (e.leader,) and not set(isr) & (live - down) & set(
                assignment)

"""KIP-227 incremental fetch sessions (broker/fetch_session.py): the leader's cache and the
follower's handler, alone and against each other over random histories."""

import dataclasses
import random

import pytest

from broker.fetch_session import (
    INITIAL_EPOCH,
    FetchSessionCache,
    FetchSessionHandler,
    next_epoch,
)
from broker.replica_types import FetchPartitionRequest, FetchResult
from common.errors import ErrorCode
from common.names import TopicPartition

T = [TopicPartition("t", i) for i in range(6)]


def fp(tp, offset=0, epoch=0):
    return FetchPartitionRequest(tp, offset, 1 << 20, epoch, None, 0)


def res(hw=0, records=b"", error=ErrorCode.NONE, diverging=None, log_start=0):
    return FetchResult(error, hw, log_start, records, diverging)


def full(cache, parts, replica=2, session_id=0):
    ctx = cache.new_context(replica, session_id, INITIAL_EPOCH, parts, [])
    assert not isinstance(ctx, tuple)
    return ctx


def test_sessionless_fetch_creates_nothing_and_answers_every_partition():
    cache = FetchSessionCache()
    parts = [fp(tp) for tp in T[:3]]
    ctx = cache.new_context(-1, 0, None, parts, [])
    assert ctx.session_id == 0 and ctx.parts == parts
    assert [f for f, _ in ctx.answer([res()] * 3)] == parts
    assert cache.sessions == {}


def test_incremental_fetch_serves_the_whole_session_and_answers_only_news():
    cache = FetchSessionCache()
    ctx = full(cache, [fp(tp) for tp in T[:5]])
    assert ctx.session_id != 0
    assert len(ctx.answer([res(hw=10)] * 5)) == 5  # a full fetch answers everything
    # The follower moved on in partition 1 only; nothing else is on the wire.
    ctx = cache.new_context(2, ctx.session_id, 1, [fp(T[1], offset=10)], [])
    assert [(f.tp, f.fetch_offset) for f in ctx.parts] == \
        [(T[0], 0), (T[1], 10), (T[2], 0), (T[3], 0), (T[4], 0)]
    answered = ctx.answer([res(hw=10), res(hw=12), res(hw=10, records=b"x"),
                           res(hw=10, error=ErrorCode.NOT_LEADER_OR_FOLLOWER),
                           res(hw=10, log_start=4)])
    # unchanged partition 0 is left out; a new HW, records, an error, a new log start are not
    assert [f.tp for f, _ in answered] == [T[1], T[2], T[3], T[4]]
    ctx = cache.new_context(2, ctx.session_id, 2, [], [])
    # partition 2 returned records last time, so it moved behind the others (KIP-227's
    # fairness under a response size limit)
    assert [f.tp for f in ctx.parts] == [T[0], T[1], T[3], T[4], T[2]]
    answered = ctx.answer([res(hw=10), res(hw=12),
                           res(hw=10, error=ErrorCode.NOT_LEADER_OR_FOLLOWER),
                           res(hw=10, log_start=4), res(hw=10)])
    assert [f.tp for f, _ in answered] == [T[3]]  # the error is repeated until it clears


def test_diverging_epoch_is_always_answered():
    cache = FetchSessionCache()
    ctx = full(cache, [fp(T[0])])
    ctx.answer([res(hw=5)])
    ctx = cache.new_context(2, ctx.session_id, 1, [], [])
    assert len(ctx.answer([res(hw=5, diverging=(3, 4))])) == 1


@pytest.mark.parametrize("field, value", [
    ("fetch_offset", 7), ("max_bytes", 1 << 10), ("current_leader_epoch", 3),
    ("last_fetched_epoch", 2), ("log_start_offset", 5),
])
def test_a_changed_fetch_state_is_answered_even_when_the_hw_has_not_moved(field, value):
    """Kafka's CachedPartition: the follower may have dropped the answer that carried this HW
    (its fetcher state was replaced mid-flight, broker/fetcher.py), and its next fetch state
    differs; an unchanged HW must not leave that partition out of the answer."""
    cache = FetchSessionCache()
    ctx = full(cache, [fp(T[0]), fp(T[1])])
    ctx.answer([res(hw=10)] * 2)
    ctx = cache.new_context(2, ctx.session_id, 1, [dataclasses.replace(fp(T[0]), **{field: value})], [])
    assert [f.tp for f, _ in ctx.answer([res(hw=10)] * 2)] == [T[0]]
    ctx = cache.new_context(2, ctx.session_id, 2, [], [])
    assert ctx.answer([res(hw=10)] * 2) == []  # answered once, then quiet again


def test_forgotten_partitions_leave_the_session():
    cache = FetchSessionCache()
    ctx = full(cache, [fp(tp) for tp in T[:3]])
    ctx.answer([res()] * 3)
    ctx = cache.new_context(2, ctx.session_id, 1, [fp(T[4])], [T[0], T[5]])
    assert [f.tp for f in ctx.parts] == [T[1], T[2], T[4]]


def test_partition_forgotten_while_a_fetch_was_parked_is_not_answered():
    cache = FetchSessionCache()
    first = full(cache, [fp(tp) for tp in T[:2]])
    first.answer([res()] * 2)
    parked = cache.new_context(2, first.session_id, 1, [], [])
    cache.sessions[first.session_id].partitions.pop(T[0])
    assert [f.tp for f, _ in parked.answer([res(records=b"x"), res(records=b"y")])] == [T[1]]


@pytest.mark.parametrize("session_epoch, replica, expected", [
    (5, 2, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
    (1, 3, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),  # another follower's session
])
def test_wrong_epoch_or_follower_is_refused_and_changes_nothing(session_epoch, replica,
                                                               expected):
    cache = FetchSessionCache()
    ctx = full(cache, [fp(T[0])])
    err = cache.new_context(replica, ctx.session_id, session_epoch, [fp(T[1])], [T[0]])
    assert isinstance(err, tuple) and err[0] == expected
    s = cache.sessions[ctx.session_id]
    assert list(s.partitions) == [T[0]] and s.epoch == 1


def test_unknown_session_is_not_found():
    err = FetchSessionCache().new_context(2, 12345, 1, [], [])
    assert err[0] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_initial_epoch_with_an_old_id_closes_it_and_final_epoch_closes_without_a_new_one():
    cache = FetchSessionCache()
    old = full(cache, [fp(T[0])])
    new = full(cache, [fp(T[0])], session_id=old.session_id)
    assert list(cache.sessions) == [new.session_id] and new.session_id != old.session_id
    ctx = cache.new_context(2, new.session_id, -1, [fp(T[0])], [])
    assert ctx.session_id == 0 and cache.sessions == {}


def test_least_recently_used_session_is_evicted_when_the_cache_is_full():
    evicted = []
    cache = FetchSessionCache(max_slots=2, on_evict=lambda: evicted.append(1))
    a, b = full(cache, [fp(T[0])], replica=1), full(cache, [fp(T[0])], replica=2)
    assert not isinstance(cache.new_context(1, a.session_id, 1, [], []), tuple)  # a used last
    c = full(cache, [fp(T[0])], replica=3)
    assert set(cache.sessions) == {a.session_id, c.session_id} and evicted == [1]
    assert cache.new_context(2, b.session_id, 1, [], [])[0] == \
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_no_slots_means_every_fetch_is_full():
    cache = FetchSessionCache(max_slots=0)
    ctx = full(cache, [fp(T[0])])
    assert ctx.session_id == 0 and cache.sessions == {}


def test_epochs_wrap_to_one_never_to_initial():
    assert next_epoch(0) == 1 and next_epoch(2**31 - 1) == 1


def test_handler_sends_only_changes_and_forgets_dropped_partitions():
    h = FetchSessionHandler()
    sid, epoch, send, forget = h.build({T[0]: 1, T[1]: 1})
    assert (sid, epoch, send, forget) == (0, INITIAL_EPOCH, [T[0], T[1]], [])
    h.on_response(ErrorCode.NONE, 77)
    assert h.build({T[0]: 1, T[1]: 2, T[2]: 1}) == (77, 1, [T[1], T[2]], [])
    h.on_response(ErrorCode.NONE, 77)
    assert h.build({T[0]: 1}) == (77, 2, [], [T[1], T[2]])


def test_handler_starts_over_after_a_failed_request_or_a_session_error():
    h = FetchSessionHandler()
    h.build({T[0]: 1})
    h.on_response(ErrorCode.NONE, 77)
    h.build({T[0]: 2})
    h.on_error()  # unknown whether the leader applied it: full, closing session 77
    assert h.build({T[0]: 2}) == (77, INITIAL_EPOCH, [T[0]], [])
    h.on_response(ErrorCode.NONE, 78)
    h.build({T[0]: 2})
    h.on_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 78)
    assert h.build({T[0]: 2}) == (0, INITIAL_EPOCH, [T[0]], [])
    h.on_response(ErrorCode.NONE, 0)  # the leader kept no session: full fetches go on
    assert h.build({T[0]: 3}) == (0, INITIAL_EPOCH, [T[0]], [])


@pytest.mark.parametrize("seed", range(200))
def test_follower_and_leader_agree_over_random_histories(seed):
    """Over random fetch-state changes, lost requests, lost answers, answers the fetcher
    drops, evictions and leader restarts: the leader always serves exactly the partitions and
    fetch states the follower wants, and the follower always knows each partition's latest HW
    and log start - what sessionless full fetches would give it."""
    rng = random.Random(seed)
    cache = FetchSessionCache(max_slots=rng.choice([1, 2, 1000]), rng=rng)
    h = FetchSessionHandler()
    # the follower's fetch state per partition: (leader epoch, fetch offset)
    state = {tp: (0, rng.randrange(3)) for tp in T}
    leader = {tp: (rng.randrange(3), rng.randrange(2)) for tp in T}  # HW, log start
    known: dict = {}
    for _ in range(60):
        for tp in T:
            if rng.random() < 0.2:
                state[tp] = (state[tp][0], rng.randrange(4))
            if rng.random() < 0.2:
                leader[tp] = (rng.randrange(4), rng.randrange(2))
        wanted = {tp: v for tp, v in state.items() if rng.random() < 0.9}
        sid, epoch, send, forget = h.build(wanted)
        if rng.random() < 0.05:
            cache = FetchSessionCache(max_slots=1000, rng=rng)  # the leader restarted
        if rng.random() < 0.05:
            full(cache, [], replica=9)  # another follower's session may evict this one
        if rng.random() < 0.05:
            h.on_error()  # the request never arrived
            continue
        ctx = cache.new_context(2, sid, epoch, [fp(tp, offset=wanted[tp][1], epoch=wanted[tp][0])
                                             for tp in send],
                                forget)
        if isinstance(ctx, tuple):
            h.on_response(ctx[0], sid)
            continue
        assert {f.tp: (f.current_leader_epoch, f.fetch_offset) for f in ctx.parts} == wanted
        # now and then an error that carries the HW (OFFSET_OUT_OF_RANGE does)
        errors = {f.tp for f in ctx.parts if rng.random() < 0.1}
        answered = ctx.answer([res(hw=leader[f.tp][0], log_start=leader[f.tp][1],
                                   error=ErrorCode.OFFSET_OUT_OF_RANGE if f.tp in errors
                                   else ErrorCode.NONE) for f in ctx.parts])
        assert errors <= {f.tp for f, _ in answered}  # errors are always answered
        if rng.random() < 0.05:
            h.on_error()  # the answer was lost: the session's record of it must not matter
            known = {}
            continue
        h.on_response(ErrorCode.NONE, ctx.session_id)
        if epoch == INITIAL_EPOCH:
            known = {}
        # As broker/fetcher.py: a LeaderAndIsr replaced the partition's fetch state (a new
        # leader epoch, so never an earlier state again) while the answer was in flight: the
        # answer is dropped and the follower keeps what it knew.
        dropped = {f.tp for f in ctx.parts if rng.random() < 0.1}
        for tp in dropped:
            state[tp] = (state[tp][0] + 1, state[tp][1])
        answered = [(f, r) for f, r in answered if f.tp not in dropped]
        for f, r in answered:
            # an error answer tells the follower nothing it may keep
            known[f.tp] = (r.high_watermark, r.log_start_offset) \
                if r.error == ErrorCode.NONE else None
        wanted = {tp: v for tp, v in wanted.items() if tp not in errors | dropped}
        assert {tp: known.get(tp) for tp in wanted} == {tp: leader[tp] for tp in wanted}

"""harness/polling.py: the one wait loop returns the condition's first truthy value, gives up
with the caller's error or a WaitTimedOut naming what it waited for, and lets only the
exceptions it was told to ignore count as "not yet"."""

from __future__ import annotations

import pytest

from harness.polling import Deadline, WaitTimedOut, async_wait_until, poll, wait_until


def _counter(truthy_from: int, value="ready"):
    calls = {"n": 0}

    def cond():
        calls["n"] += 1
        return value if calls["n"] >= truthy_from else 0
    return cond, calls


def test_wait_until_returns_first_truthy_value():
    cond, calls = _counter(3, value={"leader": 2})
    assert wait_until(cond, 10, interval=0) == {"leader": 2}
    assert calls["n"] == 3


def test_wait_until_raises_wait_timed_out_naming_what_and_last_value():
    with pytest.raises(WaitTimedOut, match=r"waiting for the leader \(last: 0\)"):
        wait_until(lambda: 0, 0.01, "the leader", interval=0)
    assert issubclass(WaitTimedOut, AssertionError)  # a test that waits fails as an assertion


def test_wait_until_raises_the_callers_error_with_the_last_value():
    class ClusterError(Exception):
        pass
    with pytest.raises(ClusterError, match="last None"):
        wait_until(lambda: None, 0.01, interval=0,
                   timed_out=lambda last: ClusterError(f"last {last}"))


def test_an_exception_ends_the_wait_unless_ignored():
    def boom():
        raise ConnectionError("refused")
    with pytest.raises(ConnectionError):
        wait_until(boom, 10, interval=0)
    with pytest.raises(WaitTimedOut, match="refused"):
        wait_until(boom, 0.01, interval=0, ignore=(ConnectionError,))


def test_poll_returns_none_on_time_out_even_after_ignored_exceptions():
    def boom():
        raise OSError("down")
    assert poll(lambda: False, 0.01, interval=0) is None
    assert poll(boom, 0.01, interval=0, ignore=(OSError,)) is None
    cond, _ = _counter(2)
    assert poll(cond, 10, interval=0) == "ready"


async def test_async_wait_until_awaits_coroutine_conditions():
    cond, calls = _counter(2, value=7)

    async def acond():
        return cond()
    assert await async_wait_until(acond, 10, interval=0) == 7
    assert calls["n"] == 2
    with pytest.raises(TimeoutError, match="never"):
        await async_wait_until(lambda: None, 0.01, interval=0,
                               timed_out=lambda _: TimeoutError("never"))


def test_deadline_remaining_keeps_its_floor():
    d = Deadline(0)
    assert d.expired()
    assert d.remaining() == 0
    assert d.remaining(floor=1.0) == 1.0
    assert Deadline(60).remaining() > 1

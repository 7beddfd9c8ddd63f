"""The fault file's clock rule (the chaos runner's clock nemesis): it moves the wall clock the
replica manager reads, and nothing else."""

from __future__ import annotations

import asyncio
import json

import pytest

from broker.fault_injection import InjectedClock, apply_rules, parse_rules, watch_fault_file
from broker.servicer import leader_and_isr_request
from broker.storage.fileops import FaultInjectingFileOps
from common.observability import configure_event_log
from tests.broker.inprocess import TP, leader_and_isr
from tests.polling import async_wait_until
from tests.storage.helpers import batch


def test_clock_rule_sets_the_offset_and_an_empty_list_clears_it():
    clock = InjectedClock(wall_ms=lambda: 1_000_000)
    fo = FaultInjectingFileOps()
    apply_rules(fo, parse_rules('[{"clock_offset_ms": -45000}, {"path": "/x", "delay_ms": 5}]'),
                clock)
    assert clock() == 955_000
    apply_rules(fo, parse_rules("[]"), clock)
    assert clock() == 1_000_000


@pytest.mark.parametrize("text", [
    '[{"clock_offset_ms": 1}, {"clock_offset_ms": 2}]',
    '[{"clock_offset_ms": "soon"}]',
    '[{"clock_offset_ms": 1.5}]',
    '[{"clock_offset_ms": 1, "path": "/x"}]',
])
def test_bad_clock_rules_are_refused(text):
    with pytest.raises(ValueError):
        parse_rules(text)


async def test_the_watcher_applies_the_clock_rule_when_the_file_changes(tmp_path):
    path = tmp_path / "faults.json"
    clock = InjectedClock(wall_ms=lambda: 0)
    events = configure_event_log(str(tmp_path / "events.json"), "broker", broker=1)
    task = asyncio.ensure_future(watch_fault_file(str(path), FaultInjectingFileOps(), events,
                                                  interval_s=0.01, clock=clock))
    try:
        path.write_text(json.dumps([{"clock_offset_ms": 30000}]))
        await async_wait_until(lambda: clock() == 30000)
        path.write_text("[]")
        await async_wait_until(lambda: clock() == 0)
    finally:
        task.cancel()


async def test_a_leader_whose_clock_jumps_past_the_lag_time_shrinks_its_isr(nodes):
    """What the nemesis does to a leader: a follower that is behind the LEO and fetched a
    moment ago looks replica.lag.time.max.ms out of date, and the isr-expiration round proposes
    it out (a follower at the LEO stays in, as Kafka's Replica.isCaughtUp has it)."""
    a, b = nodes
    clock = InjectedClock()
    a.rm.clock = clock
    shrinks = []
    a.rm.alter_partition = type("Recorder", (), {
        "shrink_isr": lambda self, p, out, now: shrinks.append(sorted(out)),
        "expand_isr": lambda self, p, f: None, "enqueue": lambda self, p, e: None})()
    await a.rm.leader_and_isr(leader_and_isr_request(leader_and_isr(a, 1, 1, [1, 2], [1, 2],
                                                                     [a, b])))
    p = a.rm.partitions[TP]
    p.record_follower_fetch(2, 0, 0, clock(), 102)  # caught up at offset 0 ...
    await a.lm.run(TP, p.log.append_as_leader, batch(2), 1)  # ... then a write it lacks
    a.rm.maybe_shrink_isr()
    assert shrinks == []  # behind, but caught up within the lag time
    clock.offset_ms = a.rm.lag_max_ms + 1000
    a.rm.maybe_shrink_isr()
    assert shrinks == [[2]]

"""The group coordinator's shell (broker/group/coordinator.py) over an in-memory `GroupLog`:
the core stepped from one task, appends answered after they are "committed", loads read from
the log start, leadership changes turned into BecameCoordinator/ResignedCoordinator, and the
timer stepping Tick. The log here stands behind the real `GroupLog` interface; the broker's
own (ReplicaManagerLog over the replica manager) is exercised by tests/kafka/test_groups.py
on real processes."""
from __future__ import annotations

import asyncio

from broker.group import events as E
from broker.group.config import GroupConfig
from broker.group.coordinator import OFFSETS_TOPIC, GroupCoordinator
from common import records as rec
from common.errors import ErrorCode
from common.names import TopicPartition


class MemoryLog:
    """A GroupLog: one list of records per partition; an append may be held or failed."""

    def __init__(self):
        self.logs: dict[TopicPartition, list[E.LogRecord]] = {}
        self.callback = None
        self.fail_with: ErrorCode | None = None
        self.appends = 0

    async def append(self, tp, batch, timeout_ms):
        self.appends += 1
        await asyncio.sleep(0)
        if self.fail_with is not None:
            return self.fail_with, -1
        log = self.logs.setdefault(tp, [])
        base = len(log)
        for i, r in enumerate(rec.decode_all(batch)):
            log.append(E.LogRecord(base + i, r.key, r.value))
        return ErrorCode.NONE, base

    async def read_all(self, tp, max_bytes):
        await asyncio.sleep(0)
        return list(self.logs.get(tp, []))

    def on_leadership_change(self, callback):
        self.callback = callback


def tp(p: int) -> TopicPartition:
    return TopicPartition(OFFSETS_TOPIC, p)


def commit(group: str, offset: int) -> E.OffsetCommit:
    return E.OffsetCommit(group_id=group, topics=(("t", (E.CommitPartition(0, offset),)),),
                          api_version=8)


def fetch(group: str) -> E.OffsetFetch:
    return E.OffsetFetch(groups=(E.FetchGroup(group, (("t", (0,)),)),), api_version=8)


async def _until_served(c: GroupCoordinator, group: str):
    for _ in range(200):
        r = await c.call(fetch(group))
        if r.groups[0].error is ErrorCode.NONE:
            return r
        await asyncio.sleep(0.005)
    raise AssertionError(f"{group} never served: {r}")


def test_commit_is_answered_after_its_append_and_survives_a_move():
    async def go():
        log = MemoryLog()
        c = GroupCoordinator(log, GroupConfig(num_partitions=4))
        c.start()
        p = c.partition_for("g")
        # not the leader yet: NOT_COORDINATOR
        r = await c.call(commit("g", 5))
        assert r.topics[0][1][0].error is ErrorCode.NOT_COORDINATOR
        log.callback({tp(p): 1}, {})
        await _until_served(c, "g")
        r = await c.call(commit("g", 5))
        assert r.topics[0][1][0].error is ErrorCode.NONE
        assert len(log.logs[tp(p)]) == 1  # answered once its record was in the log
        r = await c.call(fetch("g"))
        assert r.groups[0].topics[0][1][0].offset == 5
        # resign, then lead again: the offset is read back from the log
        log.callback({}, {tp(p): 2})
        r = await c.call(fetch("g"))
        assert r.groups[0].error is ErrorCode.NOT_COORDINATOR
        log.callback({tp(p): 3}, {})
        r = await _until_served(c, "g")
        assert r.groups[0].topics[0][1][0].offset == 5
        # other topics' leadership is not the coordinator's business
        log.callback({TopicPartition("other", p): 9}, {TopicPartition("other", p): 9})
        await c.stop()
    asyncio.run(go())


def test_a_failed_append_fails_the_commit_with_a_coordinator_error():
    async def go():
        log = MemoryLog()
        c = GroupCoordinator(log, GroupConfig(num_partitions=1))
        c.start()
        log.callback({tp(0): 0}, {})
        await _until_served(c, "g")
        log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
        r = await c.call(commit("g", 1))
        assert r.topics[0][1][0].error is ErrorCode.NOT_COORDINATOR
        await c.stop()
    asyncio.run(go())


def test_the_timer_expires_a_member_without_heartbeats():
    async def go():
        now = [1_000_000]
        log = MemoryLog()
        c = GroupCoordinator(log, GroupConfig(num_partitions=1, initial_rebalance_delay_ms=0,
                                              min_session_timeout_ms=10),
                             clock=lambda: now[0])
        c.start()
        log.callback({tp(0): 0}, {})
        await _until_served(c, "g")
        join = E.JoinGroup(group_id="g", session_timeout_ms=50,
                           rebalance_timeout_ms=50, protocols=(E.Protocol("range", b""),),
                           api_version=3)
        r = await c.call(join)
        assert r.error is ErrorCode.NONE, r
        member = r.member_id
        await c.call(E.SyncGroup(group_id="g", generation_id=r.generation_id,
                                 member_id=member, assignments=((member, b"x"),),
                                 api_version=3))
        # no heartbeat: once the clock passes the session timeout the timer removes it
        now[0] += 1_000
        c._wake.set()
        for _ in range(200):
            hb = await c.call(E.Heartbeat(group_id="g", generation_id=r.generation_id,
                                          member_id=member, api_version=3))
            if hb.error is ErrorCode.UNKNOWN_MEMBER_ID:
                break
            await asyncio.sleep(0.005)
        assert hb.error is ErrorCode.UNKNOWN_MEMBER_ID
        await c.stop()
    asyncio.run(go())

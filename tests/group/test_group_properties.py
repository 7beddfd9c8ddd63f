"""Random event sequences against the group coordinator core (broker/group/core.py): whatever
the members, the clock, the appends and the partition's leadership do, the state machine keeps
its invariants (tests/group/invariants.py: Stable implies every member has an assignment, one
leader and it is a member, static ids map to their members, ...), generations never go back,
every transition is one of the table's (a refused one raises), every request is answered
exactly once, an assignment reaches each member byte for byte, and the offsets in memory are
what a new coordinator would load from the log (unless a tombstone's append failed: the
coordinator does not revert a deletion, as Kafka's does not)."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from broker.group import consumer_protocol as cp
from broker.group import effects as X
from broker.group import events as E
from broker.group.config import GroupConfig
from broker.group.core import GroupCoordinatorCore
from broker.group.records import partition_for
from common.errors import ErrorCode
from tests.group.invariants import violations

_REACHED = {"group_stable", "group_static_member_replaced", "group_member_removed",
            "group_deleted", "group_offsets_expired", "group_join_completed",
            "coordinator_unloaded", "group_pending_member_expired"}
GROUPS = ("a", "b")  # partitions 1 and 0 of 2
assert {partition_for(g, 2) for g in GROUPS} == {0, 1}
PROTOCOLS = (("range",), ("cooperative-sticky", "range"), ("roundrobin",))
TOPICS = (("t",), ("t", "u"))


class Shell:
    def __init__(self) -> None:
        self.now = 0
        self.n = 0
        self.core = GroupCoordinatorCore(
            GroupConfig(num_partitions=2, initial_rebalance_delay_ms=1000,
                        offsets_retention_ms=30_000, retention_check_interval_ms=20_000),
            member_id_suffix=self._suffix)
        self.logs: dict[int, list[E.LogRecord]] = defaultdict(list)
        self.held: list[X.Append] = []
        self.rid = 0
        self.requests: dict[int, E.Request] = {}
        self.answered: set[int] = set()
        self.members: dict[str, list[str]] = defaultdict(list)  # ids the core handed out
        self.latest: dict[tuple[str, int], str] = {}  # (group, client) -> its latest id
        self.assigned: dict[tuple[str, int], dict[str, bytes]] = {}  # (group, gen) -> leader's
        self.generations: dict[str, tuple[object, int]] = {}  # group -> (object, generation)
        # partitions where a tombstone's append failed: the coordinator forgot the offsets or
        # group already, the log still has them until the next load (Kafka's behaviour:
        # GroupMetadataManager.cleanupGroupMetadata does not revert; docs/groups.md)
        self.tombstone_lost: set[int] = set()

    def _suffix(self) -> str:
        self.n += 1
        return str(self.n)

    # ------------------------------------------------------------------ the shell's side

    def step(self, ev: E.Event) -> None:
        for eff in self.core.step(ev):
            if isinstance(eff, X.Answer):
                self.on_answer(eff)
            elif isinstance(eff, X.Append):
                self.held.append(eff)
            elif isinstance(eff, X.Emit) and eff.name in _REACHED:
                event(eff.name)  # --hypothesis-show-statistics: how often each is reached
            elif isinstance(eff, X.LoadPartition):
                self.step(E.LoadRecords(eff.partition, eff.epoch,
                                        tuple(self.logs[eff.partition]), now_ms=self.now))
                self.step(E.LoadCompleted(eff.partition, eff.epoch, now_ms=self.now))
        self.check()

    def request(self, ev: E.Request) -> None:
        self.requests[ev.request_id] = ev
        self.step(ev)

    def next_rid(self) -> int:
        self.rid += 1
        return self.rid

    def complete(self, eff: X.Append, ok: bool) -> None:
        log = self.logs[eff.partition]
        base = len(log)
        if not ok and any(r.tombstone for r in eff.records):
            self.tombstone_lost.add(eff.partition)
        if ok:
            for r in eff.records:
                k, v = r.encode()
                log.append(E.LogRecord(len(log), k, v))
        self.step(E.AppendCompleted(eff.append_id,
                                    ErrorCode.NONE if ok else ErrorCode.NOT_ENOUGH_REPLICAS,
                                    base if ok else -1, now_ms=self.now))

    def on_answer(self, eff: X.Answer) -> None:
        assert eff.request_id not in self.answered, f"r{eff.request_id} answered twice"
        self.answered.add(eff.request_id)
        req, r = self.requests[eff.request_id], eff.response
        if isinstance(r, X.JoinGroupResponse) and r.member_id:
            assert isinstance(req, E.JoinGroup)
            if r.member_id not in self.members[req.group_id]:
                self.members[req.group_id].append(r.member_id)
            self.latest[(req.group_id, int(req.client_id[1:]))] = r.member_id
            if r.error is ErrorCode.NONE:
                for m in r.members:  # the leader's: metadata exactly as each member sent it
                    assert m.metadata in {p.metadata for p in _protocols_of_all(self)}
        if isinstance(r, X.SyncGroupResponse) and r.error is ErrorCode.NONE:
            assert isinstance(req, E.SyncGroup)
            given = self.assigned.get((req.group_id, req.generation_id))
            if given is not None and req.group_instance_id is None and \
                    req.member_id in given:
                assert r.assignment == given[req.member_id], "assignment changed on its way"

    def check(self) -> None:
        assert violations(self.core) == []
        for gid, g in self.core.groups.items():
            seen = self.generations.get(gid)
            # while it stays loaded (a reload starts from the log's generation)
            assert seen is None or seen[0] is not g or g.generation_id >= seen[1], \
                "generation went back"
            self.generations[gid] = (g, g.generation_id)

    # ------------------------------------------------------------------ actions

    def member(self, group: str, i: int) -> str:
        """-1: no member id; 0-3: client i's latest id; 4+: any id ever handed out."""
        if i < 0:
            return ""
        if i < 4:
            return self.latest.get((group, i), "")
        ids = self.members[group]
        return ids[i % len(ids)] if ids else ""

    def generation(self, group: str, stale: bool) -> int:
        g = self.core.groups.get(group)
        return (g.generation_id if g else 0) - (1 if stale else 0)

    def act(self, a: tuple) -> None:
        kind = a[0]
        if kind == "lead":
            self.step(E.BecameCoordinator(a[1], a[2], now_ms=self.now))
        elif kind == "resign":
            self.step(E.ResignedCoordinator(a[1], None, now_ms=self.now))
            # appends of the old leadership end before a new one starts (the new leader epoch
            # fences them): they land, or not, now
            for eff in [h for h in self.held if h.partition == a[1]]:
                self.held.remove(eff)
                self.complete(eff, a[2])
        elif kind == "tick":
            self.now += a[1]
            self.step(E.Tick(now_ms=self.now))
        elif kind == "complete":
            if self.held:
                self.complete(self.held.pop(0), a[1])
        elif kind == "rejoin":  # client i joins with its latest id, if any (eager protocol)
            _, g, client = a
            meta = cp.encode_subscription(TOPICS[0], version=1)
            self.request(E.JoinGroup(
                g, member_id=self.latest.get((g, client), ""), client_id=f"c{client}",
                session_timeout_ms=6000 + 2000 * client, rebalance_timeout_ms=10_000,
                protocols=(E.Protocol("range", meta),), request_id=self.next_rid(),
                api_version=4, now_ms=self.now))
        elif kind == "converge":  # a well-behaved round: rejoin, wait, sync, store
            g = a[1]
            for client in range(4):
                if (g, client) in self.latest:
                    self.act(("rejoin", g, client))
            self.act(("tick", 1000))
            group = self.core.groups.get(g)
            if group is not None and group.leader_id is not None:
                leader = next(c for (gg, c), mid in self.latest.items()
                              if gg == g and mid == group.leader_id) \
                    if group.leader_id in self.latest.values() else None
                if leader is not None:
                    self.act(("sync", g, leader, False, None))
                for client in range(4):
                    if client != leader and (g, client) in self.latest:
                        self.act(("sync", g, client, False, None))
            while self.held:
                self.complete(self.held.pop(0), True)
        elif kind == "join":
            _, g, client, mi, instance, version, pi, ti = a
            meta = cp.encode_subscription(TOPICS[ti], version=1)
            self.request(E.JoinGroup(
                g, member_id=self.member(g, mi), group_instance_id=instance,
                client_id=f"c{client}", session_timeout_ms=6000 + 2000 * client,
                rebalance_timeout_ms=10_000, protocols=tuple(
                    E.Protocol(n, meta) for n in PROTOCOLS[pi]),
                request_id=self.next_rid(), api_version=version, now_ms=self.now))
        elif kind == "sync":
            _, g, mi, stale, instance = a
            group = self.core.groups.get(g)
            assignment = tuple(
                (mid, cp.encode_assignment({"t": [k]}))
                for k, mid in enumerate(group.members if group else ()))
            gen = self.generation(g, stale)
            me = self.member(g, mi)
            if group is not None and group.is_leader(me):
                self.assigned.setdefault((g, gen), dict(assignment))
            self.request(E.SyncGroup(g, gen, me, instance, assignments=assignment,
                                     request_id=self.next_rid(), now_ms=self.now))
        elif kind == "heartbeat":
            _, g, mi, stale, instance = a
            self.request(E.Heartbeat(g, self.generation(g, stale), self.member(g, mi),
                                     instance, request_id=self.next_rid(), now_ms=self.now))
        elif kind == "leave":
            _, g, mi, instance = a
            ident = E.MemberIdentity("", instance) if instance else \
                E.MemberIdentity(self.member(g, mi))
            self.request(E.LeaveGroup(g, (ident,), request_id=self.next_rid(),
                                      now_ms=self.now))
        elif kind == "commit":
            _, g, mi, simple, offset, topic = a
            self.request(E.OffsetCommit(
                g, -1 if simple else self.generation(g, False),
                "" if simple else self.member(g, mi),
                topics=((topic, (E.CommitPartition(0, offset),)),),
                request_id=self.next_rid(), api_version=8, now_ms=self.now))
        elif kind == "fetch":
            self.request(E.OffsetFetch((E.FetchGroup(a[1]),), require_stable=a[2],
                                       request_id=self.next_rid(), now_ms=self.now))
        elif kind == "delete":
            self.request(E.DeleteGroups((a[1],), request_id=self.next_rid(), now_ms=self.now))
        elif kind == "offset_delete":
            self.request(E.OffsetDelete(a[1], (("u", (0,)), ("t", (0,))),
                                        request_id=self.next_rid(), now_ms=self.now))
        elif kind == "list":
            self.request(E.ListGroups(("stable", "empty") if a[1] else (),
                                      request_id=self.next_rid(), now_ms=self.now))
        elif kind == "describe":
            self.request(E.DescribeGroups(GROUPS, request_id=self.next_rid(), now_ms=self.now))

    # ------------------------------------------------------------------ the end

    def finish(self) -> None:
        while self.held:
            self.complete(self.held.pop(0), True)
        self.step(E.Tick(now_ms=self.now))
        while self.held:  # what the last Tick appended (offset expiry)
            self.complete(self.held.pop(0), True)
        # memory is what a new coordinator would load from the log
        fresh = GroupCoordinatorCore(GroupConfig(num_partitions=2), now_ms=self.now)
        for p in sorted(self.core.owned):
            fresh.step(E.BecameCoordinator(p, 0, now_ms=self.now))
            fresh.step(E.LoadRecords(p, 0, tuple(self.logs[p]), now_ms=self.now))
            fresh.step(E.LoadCompleted(p, 0, now_ms=self.now))
        for gid in GROUPS:
            p = self.core.partition_of(gid)
            if p not in self.core.owned or p in self.tombstone_lost:
                continue
            mine = self.core.groups.get(gid)
            theirs = fresh.groups.get(gid)
            assert (mine.offsets if mine else {}) == (theirs.offsets if theirs else {}), gid
        # giving everything up answers every request and ends every append
        for p in (0, 1):
            self.step(E.ResignedCoordinator(p, None, now_ms=self.now))
        assert self.core.open_requests == frozenset()
        assert self.core.appends_in_flight == frozenset()
        assert set(self.requests) == self.answered


def _protocols_of_all(shell: Shell) -> list[E.Protocol]:
    return [p for r in shell.requests.values() if isinstance(r, E.JoinGroup)
            for p in r.protocols]


_g = st.sampled_from(GROUPS)
_mi = st.sampled_from([-1, 0, 1, 2, 3, 0, 1, 2, 3, 4, 5])
_inst = st.sampled_from([None, None, "i1", "i2"])
ACTIONS = st.one_of(
    st.tuples(st.just("lead"), st.integers(0, 1), st.integers(0, 3)),
    st.tuples(st.just("resign"), st.integers(0, 1), st.booleans()),
    st.tuples(st.just("tick"), st.sampled_from([0, 500, 1000, 3000, 7000, 11000, 31000])),
    st.tuples(st.just("complete"), st.booleans()),
    st.tuples(st.just("complete"), st.just(True)),
    st.tuples(st.just("join"), _g, st.integers(0, 3), _mi, _inst, st.sampled_from([3, 4, 9]),
              st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("rejoin"), _g, st.integers(0, 3)),
    st.tuples(st.just("rejoin"), _g, st.integers(0, 3)),
    st.tuples(st.just("converge"), _g),
    st.tuples(st.just("converge"), _g),
    st.tuples(st.just("sync"), _g, st.integers(0, 3), st.just(False), st.just(None)),
    st.tuples(st.just("sync"), _g, st.integers(0, 3), st.just(False), st.just(None)),
    st.tuples(st.just("complete"), st.just(True)),
    st.tuples(st.just("tick"), st.sampled_from([0, 500, 1000])),
    st.tuples(st.just("sync"), _g, _mi, st.booleans(), st.sampled_from([None, None, "i1"])),
    st.tuples(st.just("heartbeat"), _g, _mi, st.booleans(), st.sampled_from([None, "i1"])),
    st.tuples(st.just("leave"), _g, _mi, _inst),
    st.tuples(st.just("commit"), _g, _mi, st.booleans(), st.integers(0, 9),
              st.sampled_from(["t", "u"])),
    st.tuples(st.just("fetch"), _g, st.booleans()),
    st.tuples(st.just("delete"), _g),
    st.tuples(st.just("offset_delete"), _g),
    st.tuples(st.just("list"), st.booleans()),
    st.tuples(st.just("describe")),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ACTIONS, min_size=5, max_size=80))
def test_random_histories_keep_the_invariants(actions):
    shell = Shell()
    shell.act(("lead", 0, 0))
    shell.act(("lead", 1, 0))
    for a in actions:
        shell.act(a)
    shell.finish()

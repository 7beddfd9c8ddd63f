"""Partition reassignment (design.md#reassignment) through the controller core over the in-memory
store: the validation rules, and a controller killed after *every* effect of a move - while starting
it and while completing it - with the next controller finishing it from the store alone.

The seed's failure cases are named by the step boundary the controller dies at
(decisions/reassignment.py lists them): case 1 after step 1, case 2a after step 2, test 6
"completed up to step 3" after step 3, case 3 after step 4, case 4a after step 5, case 5 after
step 6. The real-process versions (a SIGKILL at the boundary) are in
tests/cluster/test_reassignment.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import encode_reassignment
from controller import decisions as D
from controller import effects as X
from controller import events as E
from controller.context import ControllerContext
from controller.decisions.reassignment import ReplicaAssignment
from tests.sim.driver import Crashed, Driver

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


# ============================================================================ pure rules

def test_reassign_to_keeps_the_original_replicas_as_ors() -> None:
    ra = ReplicaAssignment((1, 2, 3)).reassign_to([3, 4, 5])
    assert ra == ReplicaAssignment((3, 4, 5, 1, 2), adding=(4, 5), removing=(1, 2))
    # ORS is RS - AR in RS's order (Kafka's originReplicas): the set, not the order, of the
    # original replicas survives a move whose target overlaps them
    assert ra.target == (3, 4, 5) and ra.origin == (3, 1, 2)
    # a new target mid-move is measured against the original replicas, not the moving set
    again = ra.reassign_to([1, 6])
    assert again == ReplicaAssignment((1, 6, 3, 2), adding=(6,), removing=(3, 2))
    # a cancel is a move back to the origin: nothing adding or removing
    assert ra.reassign_to(ra.origin) == ReplicaAssignment((3, 1, 2))


def _ctx() -> ControllerContext:
    d = Driver()
    d.elect()
    for b in (1, 2, 3, 4):
        d.register(b)
    d.run()
    d.request(E.CreateTopics(topics=(E.NewTopic("t", assignments={0: [1, 2], 1: [2, 3]}),)))
    d.run()
    return d.core.ctx


@pytest.mark.parametrize("items, tp, code", [
    (((T0, (1, 2)),), T0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),      # the same replicas
    (((T0, (1, 9)),), T0, ErrorCode.BROKER_NOT_AVAILABLE),            # a dead broker
    (((T0, (3, 3)),), T0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),      # a repeated replica
    (((T0, ()),), T0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),          # empty
    (((TopicPartition("t", 7), (1, 2)),), TopicPartition("t", 7),
     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),                           # no such partition
    (((T0, None),), T0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),       # nothing to cancel
    (((T0, (3, 4)), (T0, (2, 4))), T0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # twice
])
def test_an_invalid_partition_rejects_the_whole_request(items, tp, code) -> None:
    ctx = _ctx()
    planned, errors = D.plan_reassignments(ctx, [*items, (T1, (3, 4))])
    assert planned == {}
    assert errors[tp].error == code and errors[tp].message
    assert errors[T1].error == ErrorCode.INVALID_REQUEST  # valid, but not started


def test_a_valid_request_plans_every_partition() -> None:
    ctx = _ctx()
    planned, errors = D.plan_reassignments(ctx, [(T0, (3, 4)), (T1, (2, 4))])
    assert errors == {}
    assert planned[T0] == ReplicaAssignment((3, 4, 1, 2), (3, 4), (1, 2))
    assert planned[T1] == ReplicaAssignment((2, 4, 3), (4,), (3,))


def test_failover_clears_admin_entries_already_complete_seed_case_5() -> None:
    ctx = _ctx()
    resume, clear = D.admin_entries_to_start(
        ctx, {T0: (1, 2), T1: (3, 4), TopicPartition("gone", 0): (1,)})
    assert clear[T0].error == ErrorCode.NONE  # complete: cleared as done
    assert clear[TopicPartition("gone", 0)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert resume == {T1: ReplicaAssignment((3, 4, 2), (4,), (2,))}


# ============================================================================ crash after every effect

Setup = Callable[[Driver], None]


def _setup(d: Driver) -> None:
    for b in (1, 2, 3, 4, 5):
        d.register(b)
    d.run()
    d.request(E.CreateTopics(topics=(E.NewTopic(
        "t", assignments={0: [1, 2, 3], 1: [2, 3, 4]}),)))
    d.run()


def _catch_up(d: Driver) -> bool:
    """Followers catch up: each moving partition's leader asks to add every live replica to
    the ISR (what a real leader does as they reach its log end). Returns whether it asked."""
    ctx = d.core.ctx
    asked = False
    for tp in ctx.reassigning_partitions():
        s = ctx.leadership.get(tp)
        if s is None or s.leader not in ctx.live_brokers:
            continue
        isr = [r for r in ctx.replicas(tp) if r in s.isr or r in ctx.live_brokers]
        if set(isr) == set(s.isr):
            continue
        d.request(E.AlterPartition(
            broker_id=s.leader, broker_epoch=ctx.broker_epoch(s.leader),
            items=(D.AlterPartitionItem(tp, s.leader_epoch,
                                        tuple((r, ctx.broker_epoch(r)) for r in isr),
                                        s.partition_epoch),)))
        asked = True
    return asked


def _settle(d: Driver) -> None:
    for _ in range(50):
        if d.core is None:
            d.elect()
        try:
            d.run()
            if not _catch_up(d):
                return
            d.run()
        except Crashed:
            continue
    raise AssertionError("the move did not settle")


def _outcome(d: Driver) -> dict:
    """What must be the same however often the controller died: the assignments (with no
    move left in flight), the admin path, and each partition's leader and ISR members (the
    leader and partition epochs may differ: a resumed step bumps them again)."""
    t = d.tree
    return {
        "assignments": {name: (dict(a.partitions), dict(a.adding_replicas),
                               dict(a.removing_replicas)) for name, a in t.topics.items()},
        "admin": t.reassign_partitions,
        "leaders": {tp: (s.leader, sorted(s.isr)) for tp, s in sorted(t.states.items())},
    }


def _deleted(d: Driver) -> set[tuple[int, TopicPartition]]:
    return {(s.broker_id, TopicPartition(p.topic, p.partition)) for s in d.sent
            if s.kind == "StopReplica" for p in s.request.partition_states
            if p.delete_partition}


Action = Callable[[Driver], None]


class _Rpc:
    """AlterPartitionReassignments from a client that re-sends it when the controller died
    before answering (as the admin client does on NOT_CONTROLLER / UNAVAILABLE)."""

    def __init__(self, *items):
        self.event = E.AlterReassignments(items=tuple(items))
        self.rid: int | None = None

    def __call__(self, d: Driver) -> None:
        self.rid = d.request(self.event)

    def retry(self, d: Driver) -> None:
        if self.rid is not None and self.rid not in d.replies:
            self.rid = d.request(self.event)


def _rpc(*items) -> Action:
    return _Rpc(*items)


def _admin(*entries) -> Action:
    return lambda d: d.tree.write_reassign_partitions(encode_reassignment(entries))


MOVES = {
    # seed test 1: the leader (1) stays; 4 is added, 3 removed
    "leader_in_rar": _rpc((T0, (1, 2, 4))),
    # seed test 2: the leader (1) leaves
    "leader_not_in_rar": _rpc((T0, (2, 3, 4))),
    # seed test 3: RAR disjoint from AR, two partitions at once, through the admin path
    "rar_disjoint_admin_path": _admin(("t", 0, [4, 5, 2]), ("t", 1, [5, 1])),
}


def _run(action: Action, crash_in: str | None, n: int | None,
         refused: list[X.Emit]) -> tuple[Driver, int]:
    """A move from the start (crash_in "start": the controller dies after n effects of the
    request) or - crash_in "complete" - dying after n effects of the first catch-up, which
    runs steps 3-7. Returns the settled driver and the effects of the crashed phase."""
    d = Driver()
    d.on_effect = lambda eff: refused.append(eff) if (
        isinstance(eff, X.Emit) and eff.name == "invalid_state_transition") else None
    d.elect()
    _setup(d)
    before = d.effects_done
    if crash_in == "start":
        d.crash_after(n)
    action(d)
    try:
        d.run()
    except Crashed:
        d.elect()
        d.run()
        if isinstance(action, _Rpc):
            action.retry(d)
            d.run()
    taken = d.effects_done - before
    if crash_in == "complete":
        before = d.effects_done
        d.crash_after(n)
        _catch_up(d)
        try:
            d.run()
        except Crashed:
            pass
        taken = d.effects_done - before
    _settle(d)
    return d, taken


@pytest.mark.parametrize("phase", ["start", "complete"])
@pytest.mark.parametrize("name", sorted(MOVES))
def test_a_controller_killed_after_every_effect_of_a_move_is_finished_by_the_next(
        name: str, phase: str) -> None:
    action = MOVES[name]
    refused: list[X.Emit] = []
    expected, total = _run(action, None if phase == "start" else "complete", 10**9, refused)
    want = _outcome(expected)
    assert want["admin"] is None
    assert all(not add and not rem for _, add, rem in want["assignments"].values())
    assert total > 3
    for n in range(total):
        d, _ = _run(action, phase, n, refused)
        assert _outcome(d) == want, f"{name}: controller killed after effect {n} of {total}"
        # the removed replicas were told to delete their files by some controller
        for topic, (parts, _, _) in want["assignments"].items():
            before = {0: [1, 2, 3], 1: [2, 3, 4]}
            for p, replicas in parts.items():
                for r in set(before[p]) - set(replicas):
                    assert (r, TopicPartition(topic, p)) in _deleted(d), (name, n, r, p)
    assert refused == []


def _step_boundaries(action: Action) -> dict[int, int]:
    """step -> how many effects of the catch-up phase were carried out when it ended."""
    d = Driver()
    d.elect()
    _setup(d)
    action(d)
    d.run()
    at: dict[int, int] = {}
    base = d.effects_done
    d.on_effect = lambda eff: at.setdefault(eff.fields["step"], d.effects_done - base + 1) \
        if isinstance(eff, X.Emit) and eff.name == "reassignment_step" else None
    _catch_up(d)
    d.run()
    return at


@pytest.mark.parametrize("case, step", [
    ("seed_test_6_completed_up_to_step_3", 3),
    ("seed_case_3_between_steps_4_and_5", 4),
    ("seed_case_4a_between_steps_5_and_6", 5),
    ("seed_test_5_completed_up_to_step_6", 6),
])
def test_seed_failure_cases_at_a_step_boundary(case: str, step: int) -> None:
    action = MOVES["leader_not_in_rar"]
    boundary = _step_boundaries(action)[step]
    refused: list[X.Emit] = []
    d, _ = _run(action, "complete", boundary, refused)
    a = d.tree.topics["t"]
    assert a.partitions[0] == [2, 3, 4] and not a.adding_replicas and not a.removing_replicas
    s = d.tree.states[T0]
    assert s.leader in (2, 3, 4) and sorted(s.isr) == [2, 3, 4]
    assert (1, T0) in _deleted(d)
    assert refused == []


@pytest.mark.parametrize("case, step", [
    ("seed_case_1_between_steps_1_and_2", 1),
    ("seed_case_2a_between_steps_2_and_3", 2),
])
def test_seed_failure_cases_while_starting(case: str, step: int) -> None:
    """The new controller finds the move in the topic znode (KIP-455) and resumes it."""
    d = Driver()
    d.elect()
    _setup(d)
    at: dict[int, int] = {}
    d.on_effect = lambda eff: at.setdefault(eff.fields["step"], d.effects_done) \
        if isinstance(eff, X.Emit) and eff.name == "reassignment_step" else None
    base = d.effects_done
    MOVES["leader_in_rar"](d)
    d.run()
    n = at[step] - base
    refused: list[X.Emit] = []
    d, _ = _run(MOVES["leader_in_rar"], "start", n, refused)
    assert d.tree.topics["t"].partitions[0] == [1, 2, 4]
    assert sorted(d.tree.states[T0].isr) == [1, 2, 4] and (3, T0) in _deleted(d)
    assert refused == []


def test_cancel_mid_move_restores_the_original_replicas_and_deletes_the_added() -> None:
    d = Driver()
    d.elect()
    _setup(d)
    d.request(E.AlterReassignments(items=((T0, (4, 5, 1)),)))
    d.run()
    s = d.tree.states[T0]
    # 4 caught up and joined the ISR; 5 did not
    d.request(E.AlterPartition(broker_id=s.leader, broker_epoch=d.core.ctx.broker_epoch(1),
                               items=(D.AlterPartitionItem(
                                   T0, s.leader_epoch,
                                   tuple((r, -1) for r in (*s.isr, 4)), s.partition_epoch),)))
    d.run()
    assert d.tree.topics["t"].adding_replicas == {0: [4, 5]}
    rid = d.request(E.AlterReassignments(items=((T0, None),)))
    d.run()
    assert [r.error_code for r in d.replies[rid].value] == [ErrorCode.NONE]
    a = d.tree.topics["t"]
    assert a.partitions[0] == [1, 2, 3] and not a.adding_replicas and not a.removing_replicas
    assert sorted(d.tree.states[T0].isr) == [1, 2, 3]
    assert {(4, T0), (5, T0)} <= _deleted(d)


def test_list_reassignments_shows_the_moves_in_flight() -> None:
    d = Driver()
    d.elect()
    _setup(d)
    d.request(E.AlterReassignments(items=((T0, (1, 2, 4)), (T1, (5, 3, 4)))))
    d.run()
    rid = d.request(E.ListReassignments())
    d.run()
    assert d.replies[rid].value == [
        E.OngoingReassignment(T0, (1, 2, 4, 3), (4,), (3,)),
        E.OngoingReassignment(T1, (5, 3, 4, 2), (5,), (2,))]

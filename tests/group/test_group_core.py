"""The group coordinator core's rules that the scenario scripts do not show: request
validation (group id, session timeout bounds), the stepping rules it refuses to have broken
(CoreMisuse), what a load does with records it cannot read, and the settings under Kafka's
names."""

from __future__ import annotations

import pytest

from broker.group import effects as X
from broker.group import events as E
from broker.group.config import GroupConfig
from broker.group.core import CoreMisuse, GroupCoordinatorCore
from broker.group.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from broker.group.state import GroupState, InvalidGroupTransition, check_transition
from common.errors import ErrorCode


def loaded(records=(), **cfg) -> GroupCoordinatorCore:
    core = GroupCoordinatorCore(GroupConfig(num_partitions=1, **cfg))
    core.step(E.BecameCoordinator(0, 1))
    core.step(E.LoadRecords(0, 1, tuple(records)))
    core.step(E.LoadCompleted(0, 1))
    return core


def answer(effects):
    (a,) = [e for e in effects if isinstance(e, X.Answer)]
    return a.response


def rec(offset, record: CoordinatorRecord) -> E.LogRecord:
    k, v = record.encode()
    return E.LogRecord(offset, k, v)


P = (E.Protocol("range", b"m"),)


def test_join_validation():
    core = loaded()
    r = answer(core.step(E.JoinGroup("", protocols=P, request_id=1)))
    assert r.error is ErrorCode.INVALID_GROUP_ID
    for timeout in (5999, 1_800_001):  # group.min/max.session.timeout.ms
        r = answer(core.step(E.JoinGroup("g", session_timeout_ms=timeout, protocols=P,
                                         request_id=timeout)))
        assert r.error is ErrorCode.INVALID_SESSION_TIMEOUT
    r = answer(core.step(E.JoinGroup("g", member_id="x-1", protocols=P, request_id=2)))
    assert r.error is ErrorCode.UNKNOWN_MEMBER_ID  # a member id for a group that is not here
    r = answer(core.step(E.JoinGroup("g", protocols=(), request_id=3)))
    assert r.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_the_empty_group_id_is_fine_for_offsets_and_describe():
    core = loaded()
    r = answer(core.step(E.OffsetFetch((E.FetchGroup("", (("t", (0,)),)),), request_id=1)))
    assert r.groups[0].error is ErrorCode.NONE and r.groups[0].topics[0][1][0].offset == -1
    r = answer(core.step(E.DescribeGroups(("",), request_id=2)))
    assert r.groups[0].state == "Dead"
    r = answer(core.step(E.Heartbeat("", 0, "m", request_id=3)))
    assert r.error is ErrorCode.INVALID_GROUP_ID


def test_stepping_rules():
    core = loaded()
    core.step(E.Tick(now_ms=10))
    with pytest.raises(CoreMisuse, match="clock went back"):
        core.step(E.Tick(now_ms=9))
    with pytest.raises(CoreMisuse, match="not in flight"):
        core.step(E.AppendCompleted(77, now_ms=10))
    core.step(E.JoinGroup("g", protocols=P, request_id=5, api_version=3, now_ms=10))
    assert 5 in core.open_requests  # parked for the initial rebalance delay
    with pytest.raises(CoreMisuse, match="already waiting"):
        core.step(E.Heartbeat("g", 0, "m", request_id=5, now_ms=10))
    with pytest.raises(CoreMisuse, match="does not exist"):
        core.step(E.BecameCoordinator(3, 1, now_ms=10))


def test_a_load_skips_records_it_cannot_read_and_other_record_types():
    good = rec(2, CoordinatorRecord(OffsetCommitKey("g", "t", 0),
                                    OffsetCommitValue(9, "", 5)))
    garbage = E.LogRecord(0, b"\x00\x01\x00", b"x")
    kip848 = E.LogRecord(1, b"\x00\x03\x00\x01g", b"\x00\x00")
    core = GroupCoordinatorCore(GroupConfig(num_partitions=1))
    core.step(E.BecameCoordinator(0, 1))
    out = core.step(E.LoadRecords(0, 1, (garbage, kip848, good)))
    assert [e.name for e in out if isinstance(e, X.Emit)] == ["coordinator_load_record_skipped"]
    # records of an older load (its epoch) are ignored
    core.step(E.LoadRecords(0, 0, (rec(3, CoordinatorRecord(OffsetCommitKey("g", "t", 0),
                                                            OffsetCommitValue(1, "", 5))),)))
    out = core.step(E.LoadCompleted(0, 1))
    (done,) = [e for e in out if isinstance(e, X.Emit)]
    assert done.fields["skipped"] == 2 and done.fields["offsets"] == 1
    assert core.groups["g"].offsets[("t", 0)].offset == 9


def test_a_loaded_group_is_stable_with_its_assignment_and_sessions():
    value = GroupMetadataValue("consumer", 7, "range", "m-1", (
        MemberMetadata("m-1", "c", "/h", 10_000, b"sub", b"as", None, 30_000),), 100)
    core = loaded([rec(0, CoordinatorRecord(GroupMetadataKey("g"), value)),
                   rec(1, CoordinatorRecord(GroupMetadataKey("h"), value)),
                   rec(2, CoordinatorRecord(GroupMetadataKey("h")))])  # h deleted
    g = core.groups["g"]
    assert (g.state, g.generation_id, g.leader_id) == (GroupState.Stable, 7, "m-1")
    assert g.members["m-1"].assignment == b"as" and "h" not in core.groups
    assert core.timer_deadline(("heartbeat", "g", "m-1")) == 10_000
    r = answer(core.step(E.SyncGroup("g", 7, "m-1", request_id=1)))
    assert (r.error, r.assignment) == (ErrorCode.NONE, b"as")


def test_a_loaded_group_over_group_max_size_rebalances():
    members = tuple(MemberMetadata(f"m-{i}", "c", "/h", 10_000, b"s", b"a") for i in range(3))
    value = GroupMetadataValue("consumer", 2, "range", "m-0", members, 100)
    core = loaded([rec(0, CoordinatorRecord(GroupMetadataKey("g"), value))], max_size=2)
    assert core.groups["g"].state is GroupState.PreparingRebalance


def test_transitions_outside_the_table_are_refused():
    with pytest.raises(InvalidGroupTransition, match="from Empty to Stable"):
        check_transition("g", GroupState.Empty, GroupState.Stable)
    check_transition("g", GroupState.Dead, GroupState.Dead)


def test_config_from_kafka_property_names():
    cfg = GroupConfig.from_config({"offsets.retention.minutes": "1", "group.max.size": 3,
                                   "unrelated.key": "x"})
    assert cfg.offsets_retention_ms == 60_000 and cfg.max_size == 3
    assert cfg.initial_rebalance_delay_ms == 3000 and cfg.num_partitions == 50
    with pytest.raises(ValueError, match="group.max.size: not an integer"):
        GroupConfig.from_config({"group.max.size": "lots"})
    with pytest.raises(ValueError, match="offsets.topic.num.partitions"):
        GroupConfig.from_config({"offsets.topic.num.partitions": 0})

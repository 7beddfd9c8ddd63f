"""GroupCoordinatorCore: Kafka's classic group coordinator (the ZooKeeper-era GroupCoordinator
and GroupMetadataManager; ClassicGroup in group-coordinator/.../classic/ today) as one
`step(event) -> effects` state machine. No awaits, no sockets, no clock, no log.

    core = GroupCoordinatorCore(GroupConfig.from_config(props), now_ms=clock())
    for effect in core.step(events.BecameCoordinator(partition=7, epoch=3, now_ms=clock())):
        ...  # carry it out (effects.py); step its outcome (LoadRecords, AppendCompleted)
    # and wake it at core.next_deadline_ms with events.Tick(now_ms=...)

Every fact enters here: the group APIs' requests, this broker gaining or losing the leadership
of a __consumer_offsets partition, the records read while loading one, append outcomes, and
time. The rules the shell must keep:

1. Step events one at a time, with `now_ms` never going back. A timer due at or before an
   event's time fires before the event is handled, at its own deadline; `Tick` only moves the
   clock. Step a Tick at `next_deadline_ms` (session timeouts, rebalance timeouts, the initial
   rebalance delay, the offsets retention check) - an event may also come first.
2. Carry out the effects of one step in list order: an `Append` before any `Answer` after it.
3. Step exactly one `AppendCompleted` per `Append`, once the records are committed (the HW
   passed them: acks=all) or the append failed. An offset commit is answered only then, and
   a group's new assignment is handed out only once stored (GroupMetadataManager.storeGroup's
   callback): an acknowledged commit or generation is never lost by a clean election.
4. After `BecameCoordinator`, read the partition when `LoadPartition` asks, and step its
   records (`LoadRecords`, in offset order) and `LoadCompleted` with the load's epoch; until
   then the partition's groups answer COORDINATOR_LOAD_IN_PROGRESS. After
   `ResignedCoordinator` they answer NOT_COORDINATOR, and every request parked on them is
   answered NOT_COORDINATOR at once.

Every request gets exactly one `Answer`, in the step that brought it or a later one: a
JoinGroup when its rebalance's join phase ends (Kafka's DelayedJoin), a follower's SyncGroup
when the leader's assignment is stored, an OffsetCommit or DeleteGroups when its records are.
Where Kafka overwrites a parked request's callback and lets the network layer time it out (a
member that sends JoinGroup again while parked, or leaves while its SyncGroup is parked),
replog answers the superseded request REBALANCE_IN_PROGRESS or UNKNOWN_MEMBER_ID, so the
shell never holds a request forever.

The choices follow the ZooKeeper-era GroupCoordinator.scala; where the current Java one
(GroupMetadataManager.java) fixed something, the comment says so. Transactional offset commits
(TxnOffsetCommit, KIP-98) are not here yet: docs/groups.md "What remains".
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.group import effects as X
from broker.group import events as E
from broker.group.config import GroupConfig
from broker.group.group import CommittedOffset, Group, Member
from broker.group.records import (
    OFFSET_COMMIT_VALUE_EXPIRE_VERSION,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    UnknownKey,
    decode_record,
    partition_for,
)
from broker.group.state import GroupState, can_rebalance
from common.errors import ErrorCode
from common.names import TopicPartition

_S = GroupState
_E = ErrorCode

# JoinGroup v4 is the first that requires a known member id (KIP-394,
# JoinGroupRequest.requiresKnownMemberId); v9 lets a static leader skip the assignor (KIP-814).
JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION = 4
JOIN_SKIP_ASSIGNMENT_VERSION = 9
# OffsetCommit v9: GROUP_ID_NOT_FOUND for a commit with a generation to an unknown group.
OFFSET_COMMIT_GROUP_ID_NOT_FOUND_VERSION = 9


class CoreMisuse(Exception):
    """The shell broke a stepping rule (a bug in the shell, not in a group)."""


def _store_group_error(error: ErrorCode) -> ErrorCode:
    """A failed group metadata append, as the members see it (storeGroup's callback)."""
    if error in (_E.UNKNOWN_TOPIC_OR_PARTITION, _E.NOT_ENOUGH_REPLICAS,
                 _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return _E.COORDINATOR_NOT_AVAILABLE
    if error in (_E.NOT_LEADER_OR_FOLLOWER, _E.KAFKA_STORAGE_ERROR):
        return _E.NOT_COORDINATOR
    if error is _E.REQUEST_TIMED_OUT:
        return _E.REBALANCE_IN_PROGRESS
    if error in (_E.MESSAGE_TOO_LARGE, _E.RECORD_LIST_TOO_LARGE):
        return _E.UNKNOWN_SERVER_ERROR
    return error


def _commit_error(error: ErrorCode) -> ErrorCode:
    """A failed offset append, as the committer sees it (maybeConvertOffsetCommitError)."""
    if error in (_E.UNKNOWN_TOPIC_OR_PARTITION, _E.NOT_ENOUGH_REPLICAS,
                 _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return _E.COORDINATOR_NOT_AVAILABLE
    if error in (_E.NOT_LEADER_OR_FOLLOWER, _E.KAFKA_STORAGE_ERROR):
        return _E.NOT_COORDINATOR
    if error in (_E.MESSAGE_TOO_LARGE, _E.RECORD_LIST_TOO_LARGE):
        return _E.INVALID_COMMIT_OFFSET_SIZE
    return error


@dataclass
class _PendingAppend:
    partition: int
    on_done: Callable[[ErrorCode, int], None]


@dataclass
class _Load:
    """A partition being loaded: the last record per key so far (GroupMetadataManager's
    doLoadGroupsAndOffsets)."""

    epoch: int
    offsets: dict[tuple[str, TopicPartition], CommittedOffset] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    records: int = 0
    skipped: int = 0


# timer keys: ("heartbeat", group, member) - the session (or pending-member, or new-member
# join) timeout; ("join", group) - the delayed join; ("sync", group) - the pending sync;
# ("retention",) - the offsets retention check
TimerKey = tuple[str, ...]


class GroupCoordinatorCore:
    def __init__(self, config: GroupConfig | None = None, *, now_ms: int = 0,
                 member_id_suffix: Callable[[], str] | None = None):
        self.config = config or GroupConfig()
        self.now_ms = now_ms
        # Kafka: clientId (or group.instance.id) + "-" + a random UUID
        self._suffix = member_id_suffix or (lambda: str(uuid.uuid4()))
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()            # partitions loaded and served
        self.loading: dict[int, _Load] = {}     # partitions being loaded
        self.epochs: dict[int, int] = {}        # the latest coordinator epoch per partition
        self._open: set[int] = set()            # requests not answered yet
        self._appends: dict[int, _PendingAppend] = {}
        self._abandoned: set[int] = set()       # appends answered at resignation
        self._next_append_id = 1
        self._timers: dict[TimerKey, tuple[int, int, Any]] = {}  # key -> (deadline, seq, data)
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._seq = 0
        self._out: list[X.Effect] = []
        self._handlers: dict[type[E.Event], Callable[[Any], None]] = {
            E.Tick: lambda ev: None,
            E.BecameCoordinator: self._became_coordinator,
            E.ResignedCoordinator: self._resigned_coordinator,
            E.LoadRecords: self._load_records,
            E.LoadCompleted: self._load_completed,
            E.AppendCompleted: self._append_completed,
            E.JoinGroup: self._join_group,
            E.SyncGroup: self._sync_group,
            E.Heartbeat: self._heartbeat,
            E.LeaveGroup: self._leave_group,
            E.OffsetCommit: self._offset_commit,
            E.OffsetFetch: self._offset_fetch,
            E.ListGroups: self._list_groups,
            E.DescribeGroups: self._describe_groups,
            E.DeleteGroups: self._delete_groups,
            E.OffsetDelete: self._offset_delete,
        }
        self._schedule(("retention",), self.config.retention_check_interval_ms)

    # ================================================================== stepping

    def step(self, event: E.Event) -> list[X.Effect]:
        if event.now_ms < self.now_ms:
            raise CoreMisuse(f"{event.name} at {event.now_ms} ms: the clock went back from "
                             f"{self.now_ms} ms")
        handler = self._handlers.get(type(event))
        if handler is None:
            raise CoreMisuse(f"{event.name} is not an event of the group coordinator")
        if isinstance(event, E.Request):
            if event.request_id in self._open:
                raise CoreMisuse(f"request id {event.request_id} is already waiting")
            self._open.add(event.request_id)
        self._out = []
        self._fire_due(event.now_ms)
        self.now_ms = event.now_ms
        handler(event)
        out, self._out = self._out, []
        return out

    @property
    def next_deadline_ms(self) -> int | None:
        """When the next timer is due (step a Tick then), or None."""
        while self._heap:
            deadline, seq, key = self._heap[0]
            t = self._timers.get(key)
            if t is not None and t[1] == seq:
                return deadline
            heapq.heappop(self._heap)  # cancelled or rescheduled
        return None

    @property
    def open_requests(self) -> frozenset[int]:
        return frozenset(self._open)

    @property
    def appends_in_flight(self) -> frozenset[int]:
        return frozenset(self._appends)

    def timer_deadline(self, key: TimerKey) -> int | None:
        t = self._timers.get(key)
        return None if t is None else t[0]

    # ================================================================== timers

    def _schedule(self, key: TimerKey, delay_ms: int, data: Any = None) -> None:
        self._seq += 1
        deadline = self.now_ms + max(0, delay_ms)
        self._timers[key] = (deadline, self._seq, data)
        heapq.heappush(self._heap, (deadline, self._seq, key))

    def _cancel(self, key: TimerKey) -> None:
        self._timers.pop(key, None)

    def _cancel_group_timers(self, group_id: str) -> None:
        for key in [k for k in self._timers if len(k) > 1 and k[1] == group_id]:
            del self._timers[key]

    def _fire_due(self, until_ms: int) -> None:
        while True:
            deadline = self.next_deadline_ms
            if deadline is None or deadline > until_ms:
                return
            _, seq, key = heapq.heappop(self._heap)
            _, _, data = self._timers.pop(key)
            self.now_ms = max(self.now_ms, deadline)
            kind = key[0]
            if kind == "heartbeat":
                self._on_heartbeat_expired(key[1], key[2])
            elif kind == "join":
                self._on_join_timer(key[1], data)
            elif kind == "sync":
                self._on_sync_expired(key[1], data)
            else:
                self._on_retention_check()

    # ================================================================== output

    def _answer(self, request_id: int, response: Any) -> None:
        if request_id not in self._open:
            raise AssertionError(f"group coordinator bug: request {request_id} answered twice")
        self._open.discard(request_id)
        self._out.append(X.Answer(request_id, response))

    def _emit(self, name: str, **fields: Any) -> None:
        self._out.append(X.Emit(name, fields))

    def _append(self, partition: int, records: Iterable[CoordinatorRecord],
                on_done: Callable[[ErrorCode, int], None]) -> None:
        aid = self._next_append_id
        self._next_append_id += 1
        self._appends[aid] = _PendingAppend(partition, on_done)
        self._out.append(X.Append(aid, partition, tuple(records)))

    def _append_completed(self, ev: E.AppendCompleted) -> None:
        pending = self._appends.pop(ev.append_id, None)
        if pending is None:
            if ev.append_id in self._abandoned:  # answered when the partition was given up
                self._abandoned.discard(ev.append_id)
                return
            raise CoreMisuse(f"AppendCompleted for append {ev.append_id}, which is not in "
                             "flight")
        if ev.error is not _E.NONE:
            self._emit("coordinator_append_failed", partition=pending.partition,
                       error=ev.error.name)
        pending.on_done(ev.error, ev.base_offset)

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    # ================================================================== checks

    def _group_status(self, group_id: str, empty_id_ok: bool = False) -> ErrorCode | None:
        """GroupCoordinator.validateGroupStatus: the group id, then whether this coordinator
        serves its partition. OffsetCommit, OffsetFetch, DescribeGroups and DeleteGroups
        accept the empty group id, for old clients and to view and delete it."""
        if not group_id and not empty_id_ok:
            return _E.INVALID_GROUP_ID
        p = self.partition_of(group_id)
        if p in self.loading:
            return _E.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.owned:
            return _E.NOT_COORDINATOR
        return None

    def _group_not_exists_error(self, group_id: str) -> ErrorCode:
        """A group that is not here (or Dead): GROUP_ID_NOT_FOUND when this coordinator owns
        its partition (groupNotExists), else NOT_COORDINATOR."""
        return _E.GROUP_ID_NOT_FOUND if self.partition_of(group_id) in self.owned \
            else _E.NOT_COORDINATOR

    @staticmethod
    def _validate_member(group: Group, member_id: str,
                         instance_id: str | None) -> ErrorCode | None:
        """GroupCoordinator.validateCurrentMember (KIP-345): a group.instance.id must map to
        this member id - another one means a newer instance fenced this one."""
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return _E.UNKNOWN_MEMBER_ID
            if current != member_id:
                return _E.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return _E.UNKNOWN_MEMBER_ID
        return None

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        """group.max.size (GroupCoordinator.acceptJoiningMember): while preparing a rebalance
        the members already rejoined count, so a lowered max size sheds the last rejoiners;
        otherwise the group's size counts."""
        if group.state in (_S.Empty, _S.Dead):
            return True
        if group.is_(_S.PreparingRebalance):
            m = group.members.get(member_id)
            return (m is not None and m.awaiting_join is not None) or \
                group.num_awaiting_join < self.config.max_size
        return group.has(member_id) or len(group.members) < self.config.max_size

    # ================================================================== JoinGroup

    def _join_group(self, ev: E.JoinGroup) -> None:
        error = self._group_status(ev.group_id)
        if error is None and not (self.config.min_session_timeout_ms <= ev.session_timeout_ms
                                  <= self.config.max_session_timeout_ms):
            error = _E.INVALID_SESSION_TIMEOUT
        if error is not None:
            self._answer(ev.request_id, X.JoinGroupResponse(error, member_id=ev.member_id))
            return
        unknown = ev.member_id == E.UNKNOWN_MEMBER_ID
        group = self.groups.get(ev.group_id)
        if group is None:
            if not unknown:  # a member id, but no group: it expired or was deleted
                self._answer(ev.request_id, X.JoinGroupResponse(_E.UNKNOWN_MEMBER_ID,
                                                                member_id=ev.member_id))
                return
            group = self.groups[ev.group_id] = Group(ev.group_id, self.now_ms)
        if not self._accept_joining_member(group, ev.member_id):
            removed = self._remove_member(group, ev.member_id)
            self._answer(ev.request_id, X.JoinGroupResponse(_E.GROUP_MAX_SIZE_REACHED))
            if removed is not None:
                self._emit("group_member_removed", group=group.group_id,
                           member=ev.member_id, reason="group.max.size reached")
        elif unknown:
            self._new_member_join(group, ev)
        else:
            self._current_member_join(group, ev)
        self._try_complete_join(group)

    def _new_member_join(self, group: Group, ev: E.JoinGroup) -> None:
        if group.is_(_S.Dead):
            # removed meanwhile: the member finds the coordinator again and rejoins
            self._answer(ev.request_id, X.JoinGroupResponse(_E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(ev.protocol_type,
                                        frozenset(p.name for p in ev.protocols)):
            self._answer(ev.request_id, X.JoinGroupResponse(_E.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = f"{ev.group_instance_id or ev.client_id}-{self._suffix()}"
        if ev.group_instance_id is not None:
            old_id = group.static_member_id(ev.group_instance_id)
            if old_id is not None:
                self._replace_static_member(group, old_id, new_id, ev)
            else:
                self._add_member_and_rebalance(group, new_id, ev)
        elif ev.api_version >= JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION:
            # KIP-394: the id is remembered as pending and handed back; the member joins again
            # with it, so a client whose JoinGroup times out does not leave a ghost member
            group.pending_members.add(new_id)
            self._schedule(("heartbeat", group.group_id, new_id), ev.session_timeout_ms)
            self._answer(ev.request_id, X.JoinGroupResponse(_E.MEMBER_ID_REQUIRED,
                                                            member_id=new_id))
        else:
            self._add_member_and_rebalance(group, new_id, ev)

    def _current_member_join(self, group: Group, ev: E.JoinGroup) -> None:
        mid = ev.member_id
        if group.is_(_S.Dead):
            self._answer(ev.request_id, X.JoinGroupResponse(_E.COORDINATOR_NOT_AVAILABLE,
                                                            member_id=mid))
            return
        if not group.supports_protocols(ev.protocol_type,
                                        frozenset(p.name for p in ev.protocols)):
            self._answer(ev.request_id, X.JoinGroupResponse(_E.INCONSISTENT_GROUP_PROTOCOL,
                                                            member_id=mid))
            return
        if mid in group.pending_members and ev.group_instance_id is None:
            self._add_member_and_rebalance(group, mid, ev)  # KIP-394's second JoinGroup
            return
        error = self._validate_member(group, mid, ev.group_instance_id)
        if error is not None:
            self._answer(ev.request_id, X.JoinGroupResponse(error, member_id=mid))
            return
        member = group.members[mid]
        if group.is_(_S.PreparingRebalance):
            self._update_member_and_rebalance(
                group, member, ev, f"member {mid} joining group during PreparingRebalance")
        elif group.is_(_S.CompletingRebalance):
            if member.matches(ev.protocols):
                # the same metadata: it missed its JoinGroup answer - this generation's again
                self._answer(ev.request_id, self._join_response(group, mid))
            else:
                self._update_member_and_rebalance(
                    group, member, ev, f"updating metadata for member {mid} during "
                                       "CompletingRebalance")
        elif group.is_(_S.Stable):
            if group.is_leader(mid):
                # the leader rejoins to rebalance for changes only it sees (topic metadata)
                self._update_member_and_rebalance(
                    group, member, ev, f"leader {mid} re-joining group during Stable")
            elif not member.matches(ev.protocols):
                self._update_member_and_rebalance(
                    group, member, ev, f"updating metadata for member {mid} during Stable")
            else:
                self._answer(ev.request_id, self._join_response(group, mid, members=False))
        else:  # Empty: the member should reset its generation and join anew
            self._answer(ev.request_id, X.JoinGroupResponse(_E.UNKNOWN_MEMBER_ID,
                                                            member_id=mid))

    def _join_response(self, group: Group, member_id: str, members: bool = True,
                       leader: str | None = None, skip_assignment: bool = False
                       ) -> X.JoinGroupResponse:
        """This generation's JoinGroup answer; the leader's lists every member's metadata for
        the chosen protocol, untouched, for the client-side assignor."""
        listed: tuple[X.JoinMember, ...] = ()
        if members and group.is_leader(member_id):
            assert group.protocol_name is not None
            listed = tuple(X.JoinMember(m.member_id, m.group_instance_id,
                                        m.metadata(group.protocol_name))
                           for m in group.members.values())
        return X.JoinGroupResponse(
            _E.NONE, member_id=member_id, generation_id=group.generation_id,
            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
            leader=(group.leader_id or "") if leader is None else leader,
            skip_assignment=skip_assignment, members=listed)

    def _park_join(self, member: Member, ev: E.JoinGroup) -> None:
        if member.awaiting_join is not None and member.awaiting_join != ev.request_id:
            # Kafka overwrites the callback and lets the old request time out
            self._answer(member.awaiting_join, X.JoinGroupResponse(
                _E.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.awaiting_join = ev.request_id
        member.join_api_version = ev.api_version

    def _add_member_and_rebalance(self, group: Group, member_id: str, ev: E.JoinGroup) -> None:
        member = Member(member_id, ev.group_instance_id, ev.client_id, ev.client_host,
                        ev.rebalance_timeout_ms, ev.session_timeout_ms, ev.protocol_type,
                        ev.protocols, is_new=True)
        self._park_join(member, ev)
        # another member during the initial rebalance delay extends it (InitialDelayedJoin;
        # the Java coordinator's test, previous state Empty, covers a loaded group too)
        if group.is_(_S.PreparingRebalance) and group.previous_state is _S.Empty:
            group.new_member_added = True
        group.add(member)
        # A new member cannot heartbeat while parked, and a client whose JoinGroup timed out
        # simply retries: parked new members expire after the new-member join timeout.
        self._schedule(("heartbeat", group.group_id, member_id),
                       self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(
            group, f"adding new member {member_id} with group instance id "
                   f"{ev.group_instance_id}" + (f"; client reason: {ev.reason}" if ev.reason
                                                else ""))

    def _update_member_and_rebalance(self, group: Group, member: Member, ev: E.JoinGroup,
                                     reason: str) -> None:
        self._park_join(member, ev)
        group.update_member(member, ev.protocols, ev.rebalance_timeout_ms,
                            ev.session_timeout_ms, ev.request_id, ev.api_version)
        self._maybe_prepare_rebalance(
            group, reason + (f"; client reason: {ev.reason}" if ev.reason else ""))

    def _replace_static_member(self, group: Group, old_id: str, new_id: str,
                               ev: E.JoinGroup) -> None:
        """KIP-345 (updateStaticMemberAndRebalance): a restarted static member takes its old
        id's place without a rebalance, if the group is Stable and its protocols leave the
        selected one unchanged; the old instance's parked requests are fenced."""
        instance = ev.group_instance_id
        assert instance is not None
        current_leader = group.leader_id or ""
        old = group.members[old_id]
        if old.awaiting_join is not None:
            self._answer(old.awaiting_join, X.JoinGroupResponse(_E.FENCED_INSTANCE_ID,
                                                                member_id=old_id))
            old.awaiting_join = None
        if old.awaiting_sync is not None:
            self._answer(old.awaiting_sync, X.SyncGroupResponse(_E.FENCED_INSTANCE_ID))
            old.awaiting_sync = None
        member = group.replace_static_member(instance, old_id, new_id)
        self._cancel(("heartbeat", group.group_id, old_id))
        self._schedule(("heartbeat", group.group_id, new_id), member.session_timeout_ms)
        old_protocols = member.protocols
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        self._park_join(member, ev)
        group.update_member(member, ev.protocols, ev.rebalance_timeout_ms,
                            ev.session_timeout_ms, ev.request_id, ev.api_version)
        self._emit("group_static_member_replaced", group=group.group_id,
                   group_instance_id=instance, old_member=old_id, new_member=new_id)
        if group.is_(_S.Stable):
            if group.protocol_name == group.select_protocol():
                self._store_static_replacement(group, member, old_id, old_protocols,
                                               old_timeouts, current_leader, ev)
            else:
                self._maybe_prepare_rebalance(
                    group, f"group's selected protocol will change because static member "
                           f"{new_id} with instance id {instance} joined with other protocols")
        elif group.is_(_S.CompletingRebalance):
            # the leader may already be assigning for the old id: assign again
            self._prepare_rebalance(group, f"updating metadata for static member {new_id} "
                                           f"with instance id {instance}")

    def _store_static_replacement(self, group: Group, member: Member, old_id: str,
                                  old_protocols: tuple[E.Protocol, ...],
                                  old_timeouts: tuple[int, int], current_leader: str,
                                  ev: E.JoinGroup) -> None:
        new_id = member.member_id
        instance = ev.group_instance_id
        assert instance is not None
        rid = ev.request_id

        def done(error: ErrorCode, _base: int) -> None:
            if self.groups.get(group.group_id) is not group or member.awaiting_join != rid \
                    or not group.is_(_S.Stable):
                return  # unloaded (answered then), or a rebalance answers it at its end
            if error is not _E.NONE:
                # not stored: the old member id stays the instance's (Kafka reverts too)
                group.update_member(member, old_protocols, old_timeouts[0], old_timeouts[1],
                                    None)
                back = group.replace_static_member(instance, new_id, old_id)
                self._cancel(("heartbeat", group.group_id, new_id))
                self._schedule(("heartbeat", group.group_id, old_id), back.session_timeout_ms)
                self._answer(rid, X.JoinGroupResponse(
                    _store_group_error(error), member_id=E.UNKNOWN_MEMBER_ID,
                    generation_id=group.generation_id, protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name, leader=current_leader))
                return
            member.awaiting_join = None
            if ev.api_version >= JOIN_SKIP_ASSIGNMENT_VERSION:
                # KIP-814: a static leader learns it leads, but skips the assignor (which is
                # neither idempotent nor free of side effects) while the group stays Stable
                leads = group.is_leader(new_id)
                self._answer(rid, self._join_response(group, new_id, members=leads,
                                                      skip_assignment=leads))
            else:
                # before v9: the old leader id, so a returning leader does not assign
                self._answer(rid, self._join_response(group, new_id, members=False,
                                                      leader=current_leader))

        self._store_group(group, {m.member_id: m.assignment or b""
                                  for m in group.members.values()}, done)

    # ================================================================== rebalancing

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if can_rebalance(group.state):
            self._prepare_rebalance(group, reason)
        else:
            self._try_complete_join(group)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(_S.CompletingRebalance):
            # members waiting for the assignment must rejoin
            self._reset_and_propagate_assignment_error(group, _E.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_(_S.Empty)
        if initial:
            # a new group waits group.initial.rebalance.delay.ms for more members, extended
            # while members keep arriving, up to the rebalance timeout (InitialDelayedJoin)
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule(("join", group.group_id), delay, ("initial", delay, remaining))
        from_state = group.state
        group.transition_to(_S.PreparingRebalance, self.now_ms)
        self._emit("group_rebalance_started", group=group.group_id,
                   generation=group.generation_id, from_state=str(from_state), reason=reason)
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self._schedule(("join", group.group_id), group.rebalance_timeout_ms(),
                               ("delayed",))

    def _try_complete_join(self, group: Group) -> None:
        """DelayedJoin.tryComplete: the join phase ends once every member rejoined - except in
        the initial rebalance, which waits for its delay."""
        if group.is_(_S.PreparingRebalance) and group.previous_state is not _S.Empty \
                and group.has_all_members_joined():
            self._complete_join(group)

    def _on_join_timer(self, group_id: str, data: Any) -> None:
        group = self.groups.get(group_id)
        if group is None or not group.is_(_S.PreparingRebalance):
            return
        if data[0] == "initial":
            _, delay, remaining = data
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                self._schedule(("join", group_id), next_delay,
                               ("initial", next_delay, max(remaining - delay, 0)))
                return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """GroupCoordinator.onCompleteJoin: drop the dynamic members that did not rejoin, start
        the next generation and answer every parked JoinGroup - the leader's with the members'
        metadata to assign from."""
        gid = group.group_id
        self._cancel(("join", gid))
        for m in group.not_yet_rejoined():
            if not m.is_static:  # a static member keeps its place until its session ends
                self._remove_member(group, m.member_id)
                self._emit("group_member_removed", group=gid, member=m.member_id,
                           reason="did not rejoin before the rebalance timeout")
        if group.is_(_S.Dead):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined: wait again, until session timeouts remove the silent members
            self._schedule(("join", gid), group.rebalance_timeout_ms(), ("delayed",))
            return
        group.init_next_generation(self.now_ms)
        if group.is_(_S.Empty):
            self._emit("group_empty", group=gid, generation=group.generation_id)

            def done(error: ErrorCode, _base: int) -> None:
                pass  # an active member-less generation is safe to lose (Kafka only warns)

            self._store_group(group, {}, done)
            return
        self._emit("group_join_completed", group=gid, generation=group.generation_id,
                   protocol=group.protocol_name, leader=group.leader_id,
                   members=list(group.members))
        for m in group.members.values():
            if m.awaiting_join is not None:
                rid, m.awaiting_join = m.awaiting_join, None
                self._answer(rid, self._join_response(group, m.member_id))
            self._reschedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync.add(m.member_id)
        # members that never send SyncGroup are removed after the rebalance timeout (Kafka's
        # DelayedSync), so a follower lost after its JoinGroup cannot stall the group
        self._schedule(("sync", gid), group.rebalance_timeout_ms(), group.generation_id)

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync.clear()
        self._cancel(("sync", group.group_id))

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if group.state in (_S.Dead, _S.Empty, _S.PreparingRebalance) or not group.pending_sync:
            self._cancel(("sync", group.group_id))

    def _on_sync_expired(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or generation != group.generation_id or \
                group.state not in (_S.CompletingRebalance, _S.Stable) or not group.pending_sync:
            return
        late = sorted(group.pending_sync)
        for mid in late:
            self._remove_member(group, mid)
            self._emit("group_member_removed", group=group_id, member=mid,
                       reason="no SyncGroup before the rebalance timeout")
        self._prepare_rebalance(group, f"removing {late} on pending sync request expiration")

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        assert group.is_(_S.CompletingRebalance)
        for m in group.members.values():
            m.assignment = None
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: Group, assignment: dict[str, bytes]) -> None:
        assert group.is_(_S.CompletingRebalance)
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
        self._propagate_assignment(group, _E.NONE)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error is _E.NONE
        for m in group.members.values():
            if m.awaiting_sync is not None:
                rid, m.awaiting_sync = m.awaiting_sync, None
                self._answer(rid, X.SyncGroupResponse(
                    error, group.protocol_type if ok else None,
                    group.protocol_name if ok else None, (m.assignment or b"") if ok else b""))
                # a session that ran out while it waited was ignored: it starts again now
                self._reschedule_heartbeat(group, m)

    def _reschedule_heartbeat(self, group: Group, member: Member) -> None:
        self._schedule(("heartbeat", group.group_id, member.member_id),
                       member.session_timeout_ms)

    def _remove_member(self, group: Group, member_id: str) -> Member | None:
        """Out of the group, its parked requests answered, its timer cancelled. The caller
        decides what the removal means for the rebalance."""
        member = group.members.get(member_id)
        if member is not None:
            if member.awaiting_join is not None:
                # new members may time out while parked: UNKNOWN_MEMBER_ID makes a live one
                # join again
                self._answer(member.awaiting_join, X.JoinGroupResponse(_E.UNKNOWN_MEMBER_ID))
                member.awaiting_join = None
            if member.awaiting_sync is not None:  # Kafka would leave it to time out
                self._answer(member.awaiting_sync, X.SyncGroupResponse(_E.UNKNOWN_MEMBER_ID))
                member.awaiting_sync = None
        group.remove(member_id)
        self._cancel(("heartbeat", group.group_id, member_id))
        return member

    def _after_removal(self, group: Group, reason: str) -> None:
        """What members leaving means (removeMemberAndUpdateGroup): a Stable or
        CompletingRebalance group rebalances, a PreparingRebalance one may be complete."""
        if group.state in (_S.Stable, _S.CompletingRebalance):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(_S.PreparingRebalance):
            self._try_complete_join(group)

    def _on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_(_S.Dead):
            return
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)  # KIP-394: it never joined again
            self._emit("group_pending_member_expired", group=group_id, member=member_id)
            self._try_complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat:
            return  # a parked member's session starts again when it is answered
        self._remove_member(group, member_id)
        reason = f"removing member {member_id} on heartbeat expiration"
        self._emit("group_member_removed", group=group_id, member=member_id,
                   reason="session timeout" if not member.is_new else "new member join timeout")
        self._after_removal(group, reason)

    # ================================================================== SyncGroup

    def _sync_group(self, ev: E.SyncGroup) -> None:
        error = self._group_status(ev.group_id)
        if error is _E.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance's state is lost with the old coordinator: rejoin, without looking
            # for the coordinator again (older clients do not expect LOAD_IN_PROGRESS here)
            error = _E.REBALANCE_IN_PROGRESS
        group = self.groups.get(ev.group_id)
        if error is None:
            if group is None:
                error = _E.UNKNOWN_MEMBER_ID
            elif group.is_(_S.Dead):
                error = _E.COORDINATOR_NOT_AVAILABLE
            else:
                error = self._validate_member(group, ev.member_id, ev.group_instance_id)
                if error is None and ev.generation_id != group.generation_id:
                    error = _E.ILLEGAL_GENERATION
                elif error is None and (
                        (ev.protocol_type is not None and ev.protocol_type != group.protocol_type)
                        or (ev.protocol_name is not None
                            and ev.protocol_name != group.protocol_name)):
                    error = _E.INCONSISTENT_GROUP_PROTOCOL
                elif error is None and group.is_(_S.PreparingRebalance):
                    error = _E.REBALANCE_IN_PROGRESS
        if error is not None:
            self._answer(ev.request_id, X.SyncGroupResponse(error))
            return
        assert group is not None
        member = group.members[ev.member_id]
        if group.is_(_S.Stable):
            self._remove_pending_sync(group, ev.member_id)
            self._answer(ev.request_id, X.SyncGroupResponse(
                _E.NONE, group.protocol_type, group.protocol_name, member.assignment or b""))
            self._reschedule_heartbeat(group, member)
            return
        # CompletingRebalance: park it until the leader's assignment is stored
        if member.awaiting_sync is not None:
            self._answer(member.awaiting_sync, X.SyncGroupResponse(_E.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = ev.request_id
        self._remove_pending_sync(group, ev.member_id)
        if not group.is_leader(ev.member_id):
            return
        given = dict(ev.assignments)
        missing = [mid for mid in group.members if mid not in given]
        if missing:
            self._emit("group_assignment_missing", group=group.group_id,
                       generation=group.generation_id, members=missing)
        assignment = {mid: given.get(mid, b"") for mid in group.members}
        generation = group.generation_id

        def done(error: ErrorCode, _base: int) -> None:
            # another member may have joined meanwhile: only this generation's sync counts
            if self.groups.get(group.group_id) is not group or \
                    not group.is_(_S.CompletingRebalance) or group.generation_id != generation:
                return
            if error is not _E.NONE:
                mapped = _store_group_error(error)
                self._reset_and_propagate_assignment_error(group, mapped)
                self._maybe_prepare_rebalance(
                    group, f"error {mapped.name} when storing group assignment during "
                           f"SyncGroup (member: {ev.member_id})")
                return
            self._set_and_propagate_assignment(group, assignment)
            group.transition_to(_S.Stable, self.now_ms)
            self._emit("group_stable", group=group.group_id, generation=generation,
                       members=len(group.members))

        self._store_group(group, assignment, done)

    def _store_group(self, group: Group, assignment: dict[str, bytes],
                     done: Callable[[ErrorCode, int], None]) -> None:
        """GroupMetadataManager.storeGroup: the group's metadata and assignment, appended with
        acks=all; `done` runs with the outcome."""
        members = []
        for m in group.members.values():
            assert group.protocol_name is not None
            members.append(MemberMetadata(
                m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
                m.metadata(group.protocol_name), assignment[m.member_id], m.group_instance_id,
                m.rebalance_timeout_ms))
        value = GroupMetadataValue(
            group.protocol_type or "", group.generation_id, group.protocol_name,
            group.leader_id, tuple(members),
            group.state_timestamp if group.state_timestamp is not None else -1)
        self._append(self.partition_of(group.group_id),
                     [CoordinatorRecord(GroupMetadataKey(group.group_id), value)], done)

    # ================================================================== Heartbeat, LeaveGroup

    def _heartbeat(self, ev: E.Heartbeat) -> None:
        error = self._group_status(ev.group_id)
        if error is _E.COORDINATOR_LOAD_IN_PROGRESS:
            error = _E.NONE  # still loading: answer blindly, the member keeps its session
        elif error is None:
            group = self.groups.get(ev.group_id)
            if group is None:
                error = _E.UNKNOWN_MEMBER_ID
            elif group.is_(_S.Dead):
                error = _E.COORDINATOR_NOT_AVAILABLE
            else:
                error = self._validate_member(group, ev.member_id, ev.group_instance_id)
                if error is None and ev.generation_id != group.generation_id:
                    error = _E.ILLEGAL_GENERATION
                if error is None:
                    if group.is_(_S.Empty):
                        error = _E.UNKNOWN_MEMBER_ID
                    else:
                        # CompletingRebalance too: clients heartbeat after their JoinGroup
                        self._reschedule_heartbeat(group, group.members[ev.member_id])
                        error = _E.REBALANCE_IN_PROGRESS \
                            if group.is_(_S.PreparingRebalance) else _E.NONE
        self._answer(ev.request_id, X.HeartbeatResponse(error))

    def _leave_group(self, ev: E.LeaveGroup) -> None:
        error = self._group_status(ev.group_id)
        group = self.groups.get(ev.group_id)
        if error is None and group is not None and group.is_(_S.Dead):
            error = _E.COORDINATOR_NOT_AVAILABLE
        if error is not None:
            self._answer(ev.request_id, X.LeaveGroupResponse(error))
            return
        results = []
        left = []
        for ident in ev.members:
            code = _E.NONE
            if group is None:
                code = _E.UNKNOWN_MEMBER_ID
            elif ident.member_id == E.UNKNOWN_MEMBER_ID:
                # KIP-345: an admin removes a static member by its group.instance.id
                current = group.static_member_id(ident.group_instance_id) \
                    if ident.group_instance_id is not None else None
                if current is None:
                    code = _E.UNKNOWN_MEMBER_ID
                else:
                    self._remove_member(group, current)
                    left.append(current)
            elif ident.member_id in group.pending_members:
                # not a member yet: nothing to rebalance for (removePendingMemberAndUpdateGroup;
                # the Java coordinator rebalances here too)
                group.pending_members.discard(ident.member_id)
                self._cancel(("heartbeat", group.group_id, ident.member_id))
                self._emit("group_pending_member_left", group=group.group_id,
                           member=ident.member_id)
                self._try_complete_join(group)
            else:
                code = self._validate_member(group, ident.member_id,
                                             ident.group_instance_id) or _E.NONE
                if code is _E.NONE:
                    self._remove_member(group, ident.member_id)
                    left.append(ident.member_id)
            results.append(X.LeaveMember(ident.member_id, ident.group_instance_id, code))
        if group is not None and left:
            for mid in left:
                self._emit("group_member_removed", group=group.group_id, member=mid,
                           reason="LeaveGroup")
            self._after_removal(group, f"explicit LeaveGroup request for ({', '.join(left)})")
        self._answer(ev.request_id, X.LeaveGroupResponse(_E.NONE, tuple(results)))

    # ================================================================== OffsetCommit

    def _validate_offset_commit(self, group: Group, ev: E.OffsetCommit) -> ErrorCode | None:
        if group.is_(_S.Dead):
            return _E.COORDINATOR_NOT_AVAILABLE
        if ev.generation_id < 0 and group.is_(_S.Empty):
            return None  # the admin client, or a consumer that assigns its own partitions
        if ev.generation_id >= 0 or ev.member_id != E.UNKNOWN_MEMBER_ID or \
                ev.group_instance_id is not None:
            error = self._validate_member(group, ev.member_id, ev.group_instance_id)
            if error is None and ev.generation_id != group.generation_id:
                error = _E.ILLEGAL_GENERATION
            return error
        return _E.UNKNOWN_MEMBER_ID  # without a member id, only an Empty group takes commits

    def _offset_commit(self, ev: E.OffsetCommit) -> None:
        def all_partitions(code: ErrorCode) -> X.OffsetCommitResponse:
            return X.OffsetCommitResponse(tuple(
                (topic, tuple(X.PartitionError(p.partition, code) for p in parts))
                for topic, parts in ev.topics))

        error = self._group_status(ev.group_id, empty_id_ok=True)
        group = self.groups.get(ev.group_id)
        if error is None and group is None:
            if ev.generation_id < 0:
                # a "simple" group that uses Kafka for offset storage only
                group = self.groups[ev.group_id] = Group(ev.group_id, self.now_ms)
                self._emit("group_created_by_commit", group=ev.group_id)
            else:
                error = _E.GROUP_ID_NOT_FOUND \
                    if ev.api_version >= OFFSET_COMMIT_GROUP_ID_NOT_FOUND_VERSION \
                    else _E.ILLEGAL_GENERATION
        if error is None:
            assert group is not None
            error = self._validate_offset_commit(group, ev)
            if error is None and group.is_(_S.CompletingRebalance):
                # its member and generation are right, but the rebalance is not done
                error = _E.REBALANCE_IN_PROGRESS
        if error is not None:
            self._answer(ev.request_id, all_partitions(error))
            return
        assert group is not None
        if group.state in (_S.Stable, _S.PreparingRebalance):
            # a commit also keeps the session (the rebalance is signalled by heartbeats)
            self._reschedule_heartbeat(group, group.members[ev.member_id])
        self._store_offsets(group, ev)

    def _store_offsets(self, group: Group, ev: E.OffsetCommit) -> None:
        max_bytes = self.config.offset_metadata_max_bytes
        expire = self.now_ms + ev.retention_time_ms \
            if ev.retention_time_ms != E.DEFAULT_RETENTION_TIME else -1
        too_large: set[tuple[str, int]] = set()
        records: list[CoordinatorRecord] = []
        tps: list[TopicPartition] = []
        for topic, parts in ev.topics:
            for p in parts:
                metadata = p.metadata or ""  # null metadata is stored as ""
                if len(metadata) > max_bytes:
                    too_large.add((topic, p.partition))
                    continue
                tp = TopicPartition(topic, p.partition)
                tps.append(tp)
                records.append(CoordinatorRecord(
                    OffsetCommitKey(group.group_id, topic, p.partition),
                    OffsetCommitValue(p.offset, metadata, self.now_ms, p.leader_epoch, expire,
                                      version=(OFFSET_COMMIT_VALUE_EXPIRE_VERSION if expire >= 0
                                               else 3))))

        def answer(code: ErrorCode) -> None:
            self._answer(ev.request_id, X.OffsetCommitResponse(tuple(
                (topic, tuple(X.PartitionError(
                    p.partition, _E.OFFSET_METADATA_TOO_LARGE
                    if (topic, p.partition) in too_large else code) for p in parts))
                for topic, parts in ev.topics)))

        if not records:
            answer(_E.NONE)
            return
        group.pending_offset_commits.update(tps)

        def done(error: ErrorCode, base_offset: int) -> None:
            current = self.groups.get(group.group_id) is group and not group.is_(_S.Dead)
            for i, (tp, rec) in enumerate(zip(tps, records)):
                if not current or tp not in group.pending_offset_commits:
                    continue  # unloaded or deleted meanwhile: the commit must not come back
                group.pending_offset_commits[tp] -= 1
                if group.pending_offset_commits[tp] <= 0:
                    del group.pending_offset_commits[tp]
                if error is not _E.NONE:
                    continue
                v = rec.value
                assert isinstance(v, OffsetCommitValue)
                committed = CommittedOffset(v.offset, v.leader_epoch, v.metadata,
                                            v.commit_timestamp, v.expire_timestamp,
                                            base_offset + i if base_offset >= 0 else -1)
                prev = group.offsets.get(tp)
                if prev is None or prev.record_offset <= committed.record_offset:
                    group.offsets[tp] = committed
            answer(_commit_error(error))

        self._append(self.partition_of(group.group_id), records, done)

    # ================================================================== OffsetFetch, List, Describe

    def _offset_fetch(self, ev: E.OffsetFetch) -> None:
        out = []
        for req in ev.groups:
            error = self._group_status(req.group_id, empty_id_ok=True)
            if error is not None:
                out.append(X.FetchedGroup(req.group_id, error))
                continue
            group = self.groups.get(req.group_id)
            live = group is not None and not group.is_(_S.Dead)
            if req.topics is None:  # every committed offset
                wanted: dict[str, list[int]] = {}
                if live:
                    assert group is not None
                    for tp in sorted(group.offsets):
                        wanted.setdefault(tp.topic, []).append(tp.partition)
                topics = [(t, tuple(ps)) for t, ps in wanted.items()]
            else:
                topics = list(req.topics)
            answers = []
            for topic, parts in topics:
                got = []
                for p in parts:
                    tp = TopicPartition(topic, p)
                    if not live:
                        got.append(X.FetchedOffset(p))
                        continue
                    assert group is not None
                    if ev.require_stable and group.pending_offset_commits.get(tp, 0) > 0:
                        # KIP-447: a commit in flight; a read_committed consumer waits for it
                        got.append(X.FetchedOffset(p, error=_E.UNSTABLE_OFFSET_COMMIT))
                        continue
                    o = group.offsets.get(tp)
                    got.append(X.FetchedOffset(p) if o is None else
                               X.FetchedOffset(p, o.offset, o.leader_epoch, o.metadata))
                answers.append((topic, tuple(got)))
            out.append(X.FetchedGroup(req.group_id, _E.NONE, tuple(answers)))
        self._answer(ev.request_id, X.OffsetFetchResponse(tuple(out)))

    def _list_groups(self, ev: E.ListGroups) -> None:
        states = {s.strip().lower() for s in ev.states_filter}
        listed = tuple(
            X.ListedGroup(g.group_id, g.protocol_type or "", str(g.state))
            for gid, g in sorted(self.groups.items())
            if not states or str(g.state).lower() in states)
        # the groups of loaded partitions, and an error saying the list may be incomplete
        error = _E.COORDINATOR_LOAD_IN_PROGRESS if self.loading else _E.NONE
        self._answer(ev.request_id, X.ListGroupsResponse(error, listed))

    def _describe_groups(self, ev: E.DescribeGroups) -> None:
        out = []
        for gid in ev.group_ids:
            error = self._group_status(gid, empty_id_ok=True)
            group = self.groups.get(gid)
            if error is not None:
                out.append(X.DescribedGroup(gid, error))
            elif group is None:
                out.append(X.DescribedGroup(gid, _E.NONE, state=str(_S.Dead)))
            else:
                stable = group.is_(_S.Stable) and group.protocol_name is not None
                members = tuple(X.DescribedMember(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                    (m.assignment or b"") if stable else b"")
                    for m in group.members.values())
                out.append(X.DescribedGroup(gid, _E.NONE, str(group.state),
                                            group.protocol_type or "",
                                            group.protocol_name or "" if stable else "",
                                            members))
        self._answer(ev.request_id, X.DescribeGroupsResponse(tuple(out)))

    # ================================================================== deleting

    def _tombstones(self, group: Group, removed: list[TopicPartition],
                    group_gone: bool) -> list[CoordinatorRecord]:
        recs = [CoordinatorRecord(OffsetCommitKey(group.group_id, tp.topic, tp.partition))
                for tp in removed]
        # a group used only for offset storage (generation 0) never wrote its metadata
        if group_gone and group.generation_id > 0:
            recs.append(CoordinatorRecord(GroupMetadataKey(group.group_id)))
        return recs

    def _drop_group(self, group: Group) -> None:
        """An Empty group without offsets is Dead and forgotten (cleanupGroupMetadata)."""
        group.transition_to(_S.Dead, self.now_ms)
        self._cancel_group_timers(group.group_id)
        del self.groups[group.group_id]

    def _delete_groups(self, ev: E.DeleteGroups) -> None:
        results: dict[str, ErrorCode] = {}
        by_partition: dict[int, list[CoordinatorRecord]] = {}
        groups_of: dict[int, list[str]] = {}
        for gid in ev.group_ids:
            error = self._group_status(gid, empty_id_ok=True)
            group = self.groups.get(gid)
            if error is None:
                if group is None or group.is_(_S.Dead):
                    error = self._group_not_exists_error(gid)
                elif not group.is_(_S.Empty):
                    error = _E.NON_EMPTY_GROUP
            if error is not None:
                results[gid] = error
                continue
            assert group is not None
            removed = group.remove_offsets(group.all_offset_keys())
            self._drop_group(group)
            self._emit("group_deleted", group=gid, offsets=len(removed))
            recs = self._tombstones(group, removed, True)
            results[gid] = _E.NONE
            if recs:
                p = self.partition_of(gid)
                by_partition.setdefault(p, []).extend(recs)
                groups_of.setdefault(p, []).append(gid)

        def respond() -> None:
            self._answer(ev.request_id, X.DeleteGroupsResponse(
                tuple((gid, results[gid]) for gid in dict.fromkeys(ev.group_ids))))

        waiting = set(by_partition)
        if not waiting:
            respond()
            return
        for p, recs in sorted(by_partition.items()):
            def done(error: ErrorCode, _base: int, p: int = p) -> None:
                for gid in groups_of[p]:
                    results[gid] = _commit_error(error) if error is not _E.NONE else _E.NONE
                waiting.discard(p)
                if not waiting:
                    respond()
            self._append(p, recs, done)

    def _offset_delete(self, ev: E.OffsetDelete) -> None:
        error = self._group_status(ev.group_id)
        group = self.groups.get(ev.group_id)
        if error is None and (group is None or group.is_(_S.Dead)):
            error = self._group_not_exists_error(ev.group_id)
        if error is not None:
            self._answer(ev.request_id, X.OffsetDeleteResponse(error))
            return
        assert group is not None
        codes: dict[TopicPartition, ErrorCode] = {}
        wanted = [TopicPartition(t, p) for t, ps in ev.topics for p in ps]
        if group.is_(_S.Empty):
            eligible = wanted
        elif group.is_consumer_group:
            # a member may still consume a subscribed topic: only the others' offsets go
            eligible = [tp for tp in wanted if not group.is_subscribed_to(tp.topic)]
            codes.update({tp: _E.GROUP_SUBSCRIBED_TO_TOPIC for tp in wanted
                          if group.is_subscribed_to(tp.topic)})
        else:
            self._answer(ev.request_id, X.OffsetDeleteResponse(_E.NON_EMPTY_GROUP))
            return

        def respond(code: ErrorCode) -> None:
            self._answer(ev.request_id, X.OffsetDeleteResponse(_E.NONE, tuple(
                (t, tuple(X.PartitionError(p, codes.get(TopicPartition(t, p), code))
                          for p in ps)) for t, ps in ev.topics)))

        removed = group.remove_offsets(eligible)
        gone = group.is_(_S.Empty) and not group.has_offsets()
        if gone:
            self._drop_group(group)
        recs = self._tombstones(group, removed, gone)
        if removed:
            self._emit("group_offsets_deleted", group=ev.group_id,
                       partitions=[str(tp) for tp in removed])
        if not recs:
            respond(_E.NONE)
            return
        self._append(self.partition_of(ev.group_id), recs,
                     lambda error, _base: respond(_commit_error(error)))

    def _on_retention_check(self) -> None:
        """offsets.retention.minutes (GroupMetadataManager.cleanupGroupMetadata), every
        offsets.retention.check.interval.ms: expired offsets get tombstones, and an Empty group
        left without offsets is removed. A lost tombstone is written again by a later check,
        so no answer waits on these appends."""
        self._schedule(("retention",), self.config.retention_check_interval_ms)
        by_partition: dict[int, list[CoordinatorRecord]] = {}
        for gid in sorted(self.groups):
            group = self.groups[gid]
            expired = group.expired_offsets(self.now_ms, self.config.offsets_retention_ms)
            removed = group.remove_offsets(expired)
            gone = group.is_(_S.Empty) and not group.has_offsets()
            if removed:
                self._emit("group_offsets_expired", group=gid,
                           partitions=[str(tp) for tp in removed])
            if gone:
                self._drop_group(group)
                self._emit("group_expired", group=gid)
            recs = self._tombstones(group, removed, gone)
            if recs:
                by_partition.setdefault(self.partition_of(gid), []).extend(recs)
        for p, recs in sorted(by_partition.items()):
            self._append(p, recs, lambda error, _base: None)

    # ================================================================== partition lifecycle

    def _check_partition(self, partition: int) -> None:
        if not 0 <= partition < self.config.num_partitions:
            raise CoreMisuse(f"__consumer_offsets-{partition} does not exist "
                             f"(offsets.topic.num.partitions={self.config.num_partitions})")

    def _became_coordinator(self, ev: E.BecameCoordinator) -> None:
        self._check_partition(ev.partition)
        current = self.epochs.get(ev.partition)
        if current is not None and ev.epoch < current:
            self._emit("coordinator_stale_election", partition=ev.partition, epoch=ev.epoch,
                       current_epoch=current)
            return
        self.epochs[ev.partition] = ev.epoch
        if ev.partition in self.owned or ev.partition in self.loading:
            return  # loaded or loading already (addLoadingPartition)
        self.loading[ev.partition] = _Load(ev.epoch)
        self._emit("coordinator_load_started", partition=ev.partition, epoch=ev.epoch)
        self._out.append(X.LoadPartition(ev.partition, ev.epoch))

    def _current_load(self, partition: int, epoch: int) -> _Load | None:
        load = self.loading.get(partition)
        return load if load is not None and load.epoch == epoch else None  # else: stale

    def _load_records(self, ev: E.LoadRecords) -> None:
        load = self._current_load(ev.partition, ev.epoch)
        if load is None:
            return
        for rec in ev.records:
            load.records += 1
            try:
                decoded = decode_record(rec.key, rec.value)
            except RecordFormatError as e:
                load.skipped += 1
                self._emit("coordinator_load_record_skipped", partition=ev.partition,
                           offset=rec.offset, error=str(e))
                continue
            if isinstance(decoded, UnknownKey):
                load.skipped += 1  # another record type (KIP-848): Kafka warns and skips
                continue
            key, value = decoded.key, decoded.value
            if isinstance(key, OffsetCommitKey):
                ref = (key.group, TopicPartition(key.topic, key.partition))
                if value is None:
                    load.offsets.pop(ref, None)
                else:
                    assert isinstance(value, OffsetCommitValue)
                    load.offsets[ref] = CommittedOffset(
                        value.offset, value.leader_epoch, value.metadata,
                        value.commit_timestamp, value.expire_timestamp, rec.offset)
            elif value is None:
                load.groups.pop(key.group, None)
                load.removed.add(key.group)
            else:
                assert isinstance(value, GroupMetadataValue)
                load.groups[key.group] = value
                load.removed.discard(key.group)

    def _load_completed(self, ev: E.LoadCompleted) -> None:
        load = self._current_load(ev.partition, ev.epoch)
        if load is None:
            return
        del self.loading[ev.partition]
        self.owned.add(ev.partition)
        loaded: dict[str, Group] = {}
        for gid, value in sorted(load.groups.items()):
            loaded[gid] = self._group_from_record(gid, value)
        for (gid, tp), committed in sorted(load.offsets.items()):
            group = loaded.get(gid)
            if group is None:  # offsets without group metadata: a group for offsets only
                group = loaded[gid] = Group(gid, self.now_ms)
                group.state_timestamp = None
            group.offsets[tp] = committed
        for gid, group in sorted(loaded.items()):
            self.groups[gid] = group
            self._on_group_loaded(group)
        self._emit("coordinator_loaded", partition=ev.partition, epoch=ev.epoch,
                   groups=len(loaded), offsets=len(load.offsets), records=load.records,
                   skipped=load.skipped)

    def _group_from_record(self, gid: str, value: GroupMetadataValue) -> Group:
        members = value.members if value.protocol is not None else ()  # none can be chosen
        group = Group(gid, self.now_ms, _S.Stable if members else _S.Empty)
        group.state_timestamp = value.current_state_timestamp \
            if value.current_state_timestamp >= 0 else None
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for m in members:
            assert value.protocol is not None
            group.add(Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
                m.session_timeout, value.protocol_type,
                (E.Protocol(value.protocol, m.subscription),), m.assignment))
        group.protocol_type = value.protocol_type or None
        group.leader_id = value.leader if value.leader in group.members else \
            next(iter(group.members), None)
        group.subscribed_topics = group._compute_subscribed_topics()
        return group

    def _on_group_loaded(self, group: Group) -> None:
        if len(group.members) > self.config.max_size:
            # give the members a chance to commit: the rebalance sheds the excess
            self._prepare_rebalance(group, f"freshly-loaded group is over capacity "
                                           f"({self.config.max_size})")
        for m in group.members.values():
            self._reschedule_heartbeat(group, m)

    def _resigned_coordinator(self, ev: E.ResignedCoordinator) -> None:
        self._check_partition(ev.partition)
        current = self.epochs.get(ev.partition)
        if ev.epoch is not None and current is not None and ev.epoch < current:
            self._emit("coordinator_stale_resignation", partition=ev.partition,
                       epoch=ev.epoch, current_epoch=current)
            return
        if ev.epoch is not None:
            self.epochs[ev.partition] = ev.epoch
        was_serving = ev.partition in self.owned or ev.partition in self.loading
        self.owned.discard(ev.partition)
        self.loading.pop(ev.partition, None)
        unloaded = 0
        for gid in sorted(self.groups):
            if self.partition_of(gid) == ev.partition:
                self._unload_group(self.groups[gid])
                unloaded += 1
        # appends in flight fail as the replica manager fails them on a leadership change
        for aid, pending in sorted(self._appends.items()):
            if pending.partition == ev.partition:
                del self._appends[aid]
                self._abandoned.add(aid)
                pending.on_done(_E.NOT_LEADER_OR_FOLLOWER, -1)
        if was_serving:
            self._emit("coordinator_unloaded", partition=ev.partition, groups=unloaded)

    def _unload_group(self, group: Group) -> None:
        """onGroupUnloaded: Dead, its parked requests answered NOT_COORDINATOR (the members find
        the new coordinator), forgotten."""
        group.transition_to(_S.Dead, self.now_ms)
        for m in group.members.values():
            if m.awaiting_join is not None:
                rid, m.awaiting_join = m.awaiting_join, None
                self._answer(rid, X.JoinGroupResponse(_E.NOT_COORDINATOR,
                                                      member_id=m.member_id))
            if m.awaiting_sync is not None:
                rid, m.awaiting_sync = m.awaiting_sync, None
                self._answer(rid, X.SyncGroupResponse(_E.NOT_COORDINATOR))
        self._cancel_group_timers(group.group_id)
        del self.groups[group.group_id]

"""Events: every fact that enters the group coordinator core (core.py) goes through
`GroupCoordinatorCore.step` as one of these.

The shell (the Kafka listener's group APIs, the replica manager's leadership changes, the log
reader, the append path) turns each into an event and steps them one at a time. Events carry no
futures and read no clock: the shell stamps `now_ms` from its injected clock (never going
back), and keeps its own map from `request_id` to the connection waiting for the answer.
Requests hold plain values, already decoded from the wire by the API layer, with the fields of
the highest version; `api_version` is there for the rules that depend on it (KIP-394's
MEMBER_ID_REQUIRED from JoinGroup v4, KIP-345's skip-assignment from v9, OffsetCommit v9's
GROUP_ID_NOT_FOUND). Older versions' missing fields take Kafka's defaults (JoinGroup v0: the
rebalance timeout is the session timeout; LeaveGroup v0-2: one member in `members`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""  # JoinGroupRequest.UNKNOWN_MEMBER_ID
NO_GENERATION = -1      # a commit from outside group management (admin client, assign())
DEFAULT_RETENTION_TIME = -1  # OffsetCommitRequest.DEFAULT_RETENTION_TIME


@dataclass(frozen=True)
class Event:
    now_ms: int = field(default=0, kw_only=True)

    @property
    def name(self) -> str:
        return type(self).__name__


# ---- time, leadership, the log ------------------------------------------------------------

@dataclass(frozen=True)
class Tick(Event):
    """The clock moved on: due timers fire (session, rebalance, sync and pending-member
    timeouts, the initial rebalance delay, the offsets retention check)."""


@dataclass(frozen=True)
class BecameCoordinator(Event):
    """This broker became the leader of __consumer_offsets-`partition` at leader epoch `epoch`
    (GroupCoordinator.onElection): load it, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile."""

    partition: int
    epoch: int


@dataclass(frozen=True)
class ResignedCoordinator(Event):
    """This broker no longer leads the partition (onResignation). `epoch` None: the partition
    was deleted or its replica stopped without a new leader epoch."""

    partition: int
    epoch: int | None = None


@dataclass(frozen=True)
class LogRecord:
    offset: int
    key: bytes
    value: bytes | None  # None: a tombstone


@dataclass(frozen=True)
class LoadRecords(Event):
    """Records the shell read from the partition for the load the core asked for
    (effects.LoadPartition), in offset order, from the log start offset on. The shell skips
    control batches (transaction markers)."""

    partition: int
    epoch: int
    records: tuple[LogRecord, ...]


@dataclass(frozen=True)
class LoadCompleted(Event):
    """The shell read the partition to its log end offset."""

    partition: int
    epoch: int


@dataclass(frozen=True)
class AppendCompleted(Event):
    """The outcome of an effects.Append: NONE once the high watermark passed every record of it
    (acks=all), else the append's error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
    REQUEST_TIMED_OUT, ...). `base_offset` is where its first record landed."""

    append_id: int
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1


# ---- requests --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Request(Event):
    request_id: int = field(default=0, kw_only=True)
    api_version: int = field(default=0, kw_only=True)


@dataclass(frozen=True)
class Protocol:
    name: str
    metadata: bytes


@dataclass(frozen=True)
class JoinGroup(Request):
    group_id: str
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None  # v5+ (KIP-345)
    client_id: str = ""
    client_host: str = ""
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 300_000   # v1+; v0: the session timeout
    protocol_type: str = "consumer"
    protocols: tuple[Protocol, ...] = ()
    reason: str | None = None             # v8+ (KIP-800)


@dataclass(frozen=True)
class SyncGroup(Request):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None      # v5+
    protocol_name: str | None = None      # v5+
    assignments: tuple[tuple[str, bytes], ...] = ()  # the leader's: member id -> assignment


@dataclass(frozen=True)
class Heartbeat(Request):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class LeaveGroup(Request):
    group_id: str
    members: tuple[MemberIdentity, ...]   # v3+ batch (KIP-345); v0-2 carry one


@dataclass(frozen=True)
class CommitPartition:
    partition: int
    offset: int
    leader_epoch: int = -1                # v6+ (KIP-320)
    metadata: str | None = ""


@dataclass(frozen=True)
class OffsetCommit(Request):
    group_id: str
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    retention_time_ms: int = DEFAULT_RETENTION_TIME  # v2-v4 (KIP-211 removed it in v5)
    topics: tuple[tuple[str, tuple[CommitPartition, ...]], ...] = ()


@dataclass(frozen=True)
class FetchGroup:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None = None  # None: every offset


@dataclass(frozen=True)
class OffsetFetch(Request):
    """v8+ batches groups (KIP-709); earlier versions carry one."""

    groups: tuple[FetchGroup, ...]
    require_stable: bool = False          # v7+ (KIP-447)


@dataclass(frozen=True)
class ListGroups(Request):
    states_filter: tuple[str, ...] = ()   # v4+ (KIP-518), case-insensitive


@dataclass(frozen=True)
class DescribeGroups(Request):
    group_ids: tuple[str, ...]


@dataclass(frozen=True)
class DeleteGroups(Request):
    group_ids: tuple[str, ...]


@dataclass(frozen=True)
class OffsetDelete(Request):
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...]

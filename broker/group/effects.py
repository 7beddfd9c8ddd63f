"""What the group coordinator core asks its shell to do, as data (etcd raft's `Ready`).

`GroupCoordinatorCore.step(event)` returns a list of these; the shell carries them out in list
order and decides nothing itself:

- `Answer`: send this response to the connection waiting on `request_id`. A request may be
  answered in the step that brought it, or later: a JoinGroup when its rebalance's join phase
  ends (Kafka's DelayedJoin), a follower's SyncGroup when the leader's assignment is stored, an
  OffsetCommit when its records are committed. Every request is answered exactly once.
- `Append`: append these records to __consumer_offsets-`partition` with acks=all semantics,
  then step `AppendCompleted(append_id, ...)` once the high watermark passed them (or the
  append failed). Every Append gets exactly one AppendCompleted (an Append still in flight
  when the partition is given up is answered by the core itself: the shell's late outcome is
  then ignored). The core does not depend on their order: a committed offset's record offset
  decides which commit is the later one, as Kafka's CommitRecordMetadataAndOffset does.
- `LoadPartition`: read the partition from its log start offset to its end and step
  `LoadRecords`, then `LoadCompleted`, with this epoch.
- `Emit`: an event-log record (rebalances and what triggered them, members expired, partitions
  loaded, offsets expired), for the log, the metrics and the analysis job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.group.records import CoordinatorRecord
from common.errors import ErrorCode


class Effect:
    pass


@dataclass(frozen=True)
class Answer(Effect):
    request_id: int
    response: Any


@dataclass(frozen=True)
class Append(Effect):
    append_id: int
    partition: int
    records: tuple[CoordinatorRecord, ...]


@dataclass(frozen=True)
class LoadPartition(Effect):
    partition: int
    epoch: int


@dataclass(frozen=True)
class Emit(Effect):
    name: str
    fields: dict[str, Any] = field(default_factory=dict)


# ---- responses (the fields of each API's highest version; the API layer writes older ones) ---

@dataclass(frozen=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResponse:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinMember, ...] = ()  # the leader's answer only: what it assigns from


@dataclass(frozen=True)
class SyncGroupResponse:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class HeartbeatResponse:
    error: ErrorCode


@dataclass(frozen=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True)
class LeaveGroupResponse:
    error: ErrorCode
    members: tuple[LeaveMember, ...] = ()


@dataclass(frozen=True)
class PartitionError:
    partition: int
    error: ErrorCode


@dataclass(frozen=True)
class OffsetCommitResponse:
    topics: tuple[tuple[str, tuple[PartitionError, ...]], ...]


@dataclass(frozen=True)
class FetchedOffset:
    partition: int
    offset: int = -1          # OffsetFetchResponse.INVALID_OFFSET: nothing committed
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class FetchedGroup:
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    topics: tuple[tuple[str, tuple[FetchedOffset, ...]], ...] = ()


@dataclass(frozen=True)
class OffsetFetchResponse:
    groups: tuple[FetchedGroup, ...]


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class ListGroupsResponse:
    error: ErrorCode
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes   # empty unless the group is Stable (GroupMetadata.summary)
    assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""  # the protocol name, Stable groups only
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]


@dataclass(frozen=True)
class DeleteGroupsResponse:
    results: tuple[tuple[str, ErrorCode], ...]


@dataclass(frozen=True)
class OffsetDeleteResponse:
    error: ErrorCode
    topics: tuple[tuple[str, tuple[PartitionError, ...]], ...] = ()

"""One group's state (Kafka's GroupMetadata and MemberMetadata, the classic protocol): its
state, generation, protocol, leader, members, pending members (KIP-394), static members
(KIP-345), the members yet to sync, and its committed offsets.

Plain data with the bookkeeping that keeps it consistent - the supported-protocol votes, the
static-member map, the leader - and no decisions: when to rebalance, what to answer and what to
store is core.py's. A member waiting for an answer holds the `request_id` of its parked
JoinGroup or SyncGroup; the core answers it and clears it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from broker.group import consumer_protocol
from broker.group.events import Protocol
from broker.group.state import GroupState, check_transition
from common.names import TopicPartition


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    # the member's part of the current generation's assignment; None until the leader's
    # SyncGroup is stored (Kafka keeps an empty array; None lets the invariants say "has one")
    assignment: bytes | None = None
    awaiting_join: int | None = None   # request id of its parked JoinGroup
    join_api_version: int = 0
    awaiting_sync: int | None = None   # request id of its parked SyncGroup
    # MemberMetadata.isNew: joined in this rebalance; its session timer is the new-member join
    # timeout, and it may expire while awaiting join
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def protocol_names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.protocols)

    def metadata(self, protocol: str) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return protocols == self.protocols

    def vote(self, candidates: frozenset[str]) -> str:
        """The first of its protocols, in its order of preference, that every member supports
        (MemberMetadata.vote)."""
        for p in self.protocols:
            if p.name in candidates:
                return p.name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """A member waiting in a rebalance needs no heartbeat - unless it is new, since a new
        member cannot heartbeat before its first JoinGroup answer (MemberMetadata)."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # set only by OffsetCommit v2-v4's retention_time_ms
    record_offset: int = -1     # where its record is in the log: the later record wins


class Group:
    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.Empty):
        self.group_id = group_id
        self.state = state
        self.previous_state = state
        self.state_timestamp: int | None = now_ms  # currentStateTimestamp
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}   # insertion order: the next leader is the first
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()    # KIP-394: given an id, not yet joined
        self.pending_sync: set[str] = set()       # joined this generation, not yet synced
        self._votes: Counter[str] = Counter()      # protocol -> members supporting it
        self.new_member_added = False             # extends the initial rebalance delay
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        self.pending_offset_commits: Counter[TopicPartition] = Counter()  # appends in flight

    # ------------------------------------------------------------------ state

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        check_transition(self.group_id, self.state, target)
        self.previous_state, self.state = self.state, target
        self.state_timestamp = now_ms

    # ------------------------------------------------------------------ members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def add(self, member: Member) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} is already in "
                                 f"group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise ValueError("the group's and the member's protocol types differ")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._votes.update(member.protocol_names)
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._votes.subtract(member.protocol_names)
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update_member(self, member: Member, protocols: tuple[Protocol, ...],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      awaiting_join: int | None, api_version: int = 0) -> None:
        self._votes.subtract(member.protocol_names)
        member.protocols = protocols
        self._votes.update(member.protocol_names)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = awaiting_join
        member.join_api_version = api_version

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """KIP-345: a known group.instance.id joined with an unknown member id - the new member
        takes the old one's place (and assignment); the core fences the old one's parked
        requests first."""
        old = self.members.pop(old_id)
        new = Member(new_id, old.group_instance_id, old.client_id, old.client_host,
                     old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                     old.protocols, old.assignment)
        self.members[new_id] = new
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        self.pending_sync.discard(old_id)
        return new

    def maybe_elect_new_joined_leader(self) -> bool:
        """The leader did not rejoin before the rebalance timeout: any member that did leads
        (GroupMetadata.maybeElectNewJoinedLeader). False: nobody rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        for m in self.members.values():
            if m.awaiting_join is not None:
                self.leader_id = m.member_id
                return True
        return False

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------------ protocols

    def candidate_protocols(self) -> frozenset[str]:
        n = len(self.members)
        return frozenset(p for p, c in self._votes.items() if c == n and n > 0)

    def supports_protocols(self, protocol_type: str, protocols: frozenset[str]) -> bool:
        """A new or rejoining member may join only with the group's protocol type and one of
        the protocols every member supports (GroupMetadata.supportsProtocols)."""
        if self.is_(GroupState.Empty):
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and \
            any(self._votes.get(p, 0) == n for p in protocols)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all support; the most votes
        win (GroupMetadata.selectProtocol). Ties go to the protocol first in the leader's
        order - Kafka's HashMap order is arbitrary; this one is deterministic."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        tied = [p for p, c in votes.items() if c == best]
        order = [p.name for p in leader.protocols]
        return min(tied, key=lambda p: order.index(p) if p in order else len(order))

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.CompletingRebalance, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.Empty, now_ms)
        self.pending_sync.clear()

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != consumer_protocol.PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            t = consumer_protocol.subscribed_topics(m.metadata(self.protocol_name))
            if t is None:
                return None
            topics |= t
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        """Unknown subscriptions count as subscribed, to be safe (isSubscribedToTopic)."""
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == consumer_protocol.PROTOCOL_TYPE

    # ------------------------------------------------------------------ offsets

    def has_offsets(self) -> bool:
        return bool(self.offsets) or any(n > 0 for n in self.pending_offset_commits.values())

    def all_offset_keys(self) -> list[TopicPartition]:
        """Committed offsets and those with a commit in flight."""
        return sorted(set(self.offsets) | {tp for tp, n in self.pending_offset_commits.items()
                                           if n > 0})

    def remove_offsets(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        """Drop these offsets, and forget commits in flight for them: their completion must
        not bring them back. Returns the ones that need a tombstone: committed ones, and those
        with a commit in flight, whose record lands before the tombstone (the Java
        coordinator does the same for pending transactional offsets; the Scala one wrote none,
        and a deleted group's in-flight commit came back on the next load)."""
        removed = []
        for tp in tps:
            pending = self.pending_offset_commits.pop(tp, 0) > 0
            if self.offsets.pop(tp, None) is not None or pending:
                removed.append(tp)
        return removed

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """GroupMetadata.removeExpiredOffsets's choice: an Empty group's offsets expire
        retention_ms after it became Empty (or after their commit, for metadata without a state
        timestamp); a Stable consumer group's offsets of topics it no longer subscribes to,
        after their commit; a group used only for offset storage (no protocol type), after
        their commit. A commit with an expire timestamp (OffsetCommit v2-v4) expires then. An
        offset with a commit in flight never expires."""
        base: dict[TopicPartition, int]
        subscribed: frozenset[str] = frozenset()
        if self.protocol_type is not None and self.is_(GroupState.Empty):
            base = {tp: (self.state_timestamp if self.state_timestamp is not None
                         else o.commit_timestamp) for tp, o in self.offsets.items()}
        elif self.is_consumer_group and self.subscribed_topics is not None and \
                self.is_(GroupState.Stable):
            subscribed = self.subscribed_topics
            base = {tp: o.commit_timestamp for tp, o in self.offsets.items()}
        elif self.protocol_type is None:
            base = {tp: o.commit_timestamp for tp, o in self.offsets.items()}
        else:
            return []
        out = []
        for tp, o in self.offsets.items():
            if tp.topic in subscribed or self.pending_offset_commits.get(tp, 0) > 0:
                continue
            if o.expire_timestamp >= 0:
                if now_ms >= o.expire_timestamp:
                    out.append(tp)
            elif now_ms - base[tp] >= retention_ms:
                out.append(tp)
        return out

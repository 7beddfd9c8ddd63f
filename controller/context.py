"""The active controller's in-memory view of the cluster (Kafka's ControllerContext). Pure data.

What it holds, and where each part comes from:

- the controller's own id, its controller epoch and that epoch's znode version (every
  ZooKeeper write checks the version: zk_store.py);
- live brokers: /brokers/ids/<id> registrations, each with its broker epoch (the znode's czxid,
  KIP-380), and the brokers in controlled shutdown (live, but no longer eligible to lead);
- topics: /brokers/topics/<t> assignments (with topic ids) and /config/topics/<t> overrides;
- partition leadership: the LeaderAndIsr of every partition state znode, whose
  partition_epoch is the znode version (what AlterPartition must quote);
- the partition and replica state machines (state_machine.py);
- topics queued for deletion (/admin/delete_topics);
- reassignments: the adding/removing replicas of /brokers/topics/<t> (KIP-455) are part of
  the assignments; /admin/reassign_partitions is mirrored in `admin_reassignments`;
- design.md#kip-501's relinquish cool-down: partition -> (broker that gave up leadership, until
  when);
- design.md#kip-966: the cluster's ELR settings (`elr`, controller/elr.py), from which with the
  topic overrides come each partition's effective min ISR and unclean recovery strategy.

Facts (a broker registered or vanished, a topic appeared) are recorded here directly by the
shell; *decisions* (decisions.py) only read the context and are applied by `decisions.apply`
after their ZooKeeper writes succeed ("the controller writes ZooKeeper before it tells brokers").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from common.dynamic_config import configured_min_isr, effective_min_isr
from common.names import TopicPartition
from common.zk_layout import NO_LEADER, BrokerRegistration, LeaderAndIsr, TopicAssignment
from controller.create_topics import unclean_election_enabled
from controller.elr import ElrConfig, recovery_strategy
from controller.selectors import UncleanRecoveryStrategy
from controller.state_machine import (
    PartitionState,
    ReplicaState,
    StateMachine,
    partition_state_machine,
    replica_state_machine,
)


class PartitionReplica(NamedTuple):
    tp: TopicPartition
    replica: int

    def __str__(self) -> str:
        return f"[Topic={self.tp.topic},Partition={self.tp.partition},Replica={self.replica}]"


@dataclass
class ControllerContext:
    controller_id: int
    epoch: int = 0
    epoch_zk_version: int = -1
    unclean_leader_election_default: bool = False
    # design.md#kip-501: how long a broker that relinquished leadership of a partition is skipped by
    # preferred elections (ms). See the seed-002 rule in controller/decisions.
    relinquish_cooldown_ms: int = 300_000
    # design.md#kip-966: eligible.leader.replicas.enable and the settings it brings
    elr: ElrConfig = field(default_factory=ElrConfig)
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    assignments: dict[str, TopicAssignment] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # /config/brokers/<default>: the cluster-wide dynamic broker configs
    broker_default_config: dict[str, str] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    relinquished: dict[TopicPartition, tuple[int, float]] = field(default_factory=dict)
    # /admin/reassign_partitions as this controller last read or wrote it (design.md#reassignment):
    # the targets a tool asked for; step 7 removes a partition's entry once its move is done
    admin_reassignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    partition_sm: StateMachine = field(default_factory=partition_state_machine)
    replica_sm: StateMachine = field(default_factory=replica_state_machine)

    # ------------------------------------------------------------------ brokers

    @property
    def live_ids(self) -> set[int]:
        """Registered brokers, including those in controlled shutdown."""
        return set(self.live_brokers)

    @property
    def eligible_ids(self) -> set[int]:
        """Brokers that may be elected leader or join an ISR."""
        return set(self.live_brokers) - self.shutting_down

    def broker_epoch(self, broker_id: int) -> int | None:
        reg = self.live_brokers.get(broker_id)
        return None if reg is None else reg.epoch

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers

    def add_broker(self, reg: BrokerRegistration) -> None:
        self.live_brokers[reg.broker_id] = reg
        self.shutting_down.discard(reg.broker_id)

    def remove_broker(self, broker_id: int) -> None:
        self.live_brokers.pop(broker_id, None)
        self.shutting_down.discard(broker_id)

    # ------------------------------------------------------------------ topics / partitions

    def add_topic(self, assignment: TopicAssignment, config: dict[str, str] | None = None
                  ) -> None:
        self.assignments[assignment.topic] = assignment
        if config is not None:
            self.topic_configs[assignment.topic] = dict(config)

    def remove_topic(self, topic: str) -> None:
        a = self.assignments.pop(topic, None)
        self.topic_configs.pop(topic, None)
        self.topics_to_delete.discard(topic)
        if a is None:
            return
        tps = [TopicPartition(topic, p) for p in a.partitions]
        for tp in tps:
            self.leadership.pop(tp, None)
            self.relinquished.pop(tp, None)
        self.partition_sm.forget(tps)
        self.replica_sm.forget(PartitionReplica(tp, r) for tp in tps
                               for r in a.partitions[tp.partition])

    def set_topic_assignment(self, assignment: TopicAssignment) -> None:
        """A topic znode rewritten by this controller (reassignment steps 1 and 6), or the
        in-memory replicas of a move's last steps (decisions/reassignment.py)."""
        self.assignments[assignment.topic] = assignment

    def topic_id(self, topic: str) -> str:
        a = self.assignments.get(topic)
        return a.topic_id if a else ""

    def replicas(self, tp: TopicPartition) -> list[int]:
        """The assigned replicas (the assignment's own list: read it, never mutate it)."""
        a = self.assignments.get(tp.topic)
        if a is None:
            return []
        return a.partitions.get(tp.partition, [])

    def has_partition(self, tp: TopicPartition) -> bool:
        a = self.assignments.get(tp.topic)
        return a is not None and tp.partition in a.partitions

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        a = self.assignments.get(topic)
        return [] if a is None else [TopicPartition(topic, p) for p in sorted(a.partitions)]

    def all_partitions(self) -> Iterator[TopicPartition]:
        for topic in sorted(self.assignments):
            yield from self.partitions_of(topic)

    def partitions_on_brokers(self, brokers: Iterable[int]) -> list[TopicPartition]:
        wanted = set(brokers)
        out = []
        for topic in sorted(self.assignments):
            parts = self.assignments[topic].partitions
            out += [TopicPartition(topic, p) for p in sorted(parts)
                    if not wanted.isdisjoint(parts[p])]
        return out

    def replicas_on_brokers(self, brokers: Iterable[int]) -> list[PartitionReplica]:
        wanted = set(brokers)
        return [PartitionReplica(tp, r) for tp in self.partitions_on_brokers(wanted)
                for r in self.replicas(tp) if r in wanted]

    def partitions_led_by(self, broker_id: int, min_replicas: int = 1) -> list[TopicPartition]:
        return [tp for tp, s in self.leadership.items()
                if s.leader == broker_id and len(self.replicas(tp)) >= min_replicas]

    def is_being_deleted(self, topic: str) -> bool:
        return topic in self.topics_to_delete

    def unclean_allowed(self, topic: str) -> bool:
        return unclean_election_enabled(self.topic_configs.get(topic),
                                        self.unclean_leader_election_default)

    def min_isr(self, tp: TopicPartition) -> int:
        """The effective min ISR ELR is kept against: min(min.insync.replicas, RF), read by
        the same resolver as every broker's leader (topic override, dynamic broker default,
        static config: common.dynamic_config)."""
        rf = len(self.replicas(tp))
        return effective_min_isr(configured_min_isr(
            self.topic_configs.get(tp.topic, {}), self.broker_default_config,
            self.elr.min_insync_replicas, rf), rf)

    def recovery_strategy(self, topic: str) -> UncleanRecoveryStrategy:
        return recovery_strategy(self.topic_configs.get(topic), self.elr,
                                 self.unclean_leader_election_default)

    def relinquish_excluded(self, tp: TopicPartition, now_ms: float) -> set[int]:
        entry = self.relinquished.get(tp)
        if entry is None or entry[1] <= now_ms:
            return set()
        return {entry[0]}

    # ------------------------------------------------------------------ state machines

    def reset_states(self) -> None:
        """Kafka's initializePartitionState + initializeReplicaState, after a failover load:
        a partition with no state znode is New, one whose leader is live is Online, otherwise
        Offline; a replica is Online if its broker is live, else Offline - or, for topics
        queued for deletion, DeletionIneligible (the deletion is resumed from there)."""
        self.partition_sm.clear()
        self.replica_sm.clear()
        for tp in self.all_partitions():
            s = self.leadership.get(tp)
            if s is None:
                state = PartitionState.NewPartition
            elif s.leader != NO_LEADER and s.leader in self.live_brokers:
                state = PartitionState.OnlinePartition
            else:
                state = PartitionState.OfflinePartition
            self.partition_sm.reset(tp, state)
            deleting = tp.topic in self.topics_to_delete
            for r in self.replicas(tp):
                if deleting:
                    rs = ReplicaState.ReplicaDeletionIneligible
                elif r in self.live_brokers:
                    rs = ReplicaState.OnlineReplica
                else:
                    rs = ReplicaState.OfflineReplica
                self.replica_sm.reset(PartitionReplica(tp, r), rs)

    # ------------------------------------------------------------------ metrics

    def offline_partition_count(self) -> int:
        return sum(1 for tp, st in self.partition_sm.items()
                   if st is PartitionState.OfflinePartition
                   and tp.topic not in self.topics_to_delete)

    def preferred_replica_imbalance_count(self) -> int:
        n = 0
        for tp, s in self.leadership.items():
            if tp.topic in self.topics_to_delete:
                continue
            replicas = self.replicas(tp)
            if replicas and s.leader != replicas[0]:
                n += 1
        return n

    def partitions_with_elr_count(self) -> int:
        """Partitions whose ELR is not empty (KIP-966: under min ISR, with a clean fallback)."""
        return sum(1 for tp, s in self.leadership.items()
                   if s.elr and tp.topic not in self.topics_to_delete)

    def elr_replica_counts(self) -> tuple[int, int]:
        """(replicas in ELRs, replicas in LastKnownELRs) over every partition not being
        deleted: the ELR sizes (KIP-966)."""
        elr = lke = 0
        for tp, s in self.leadership.items():
            if tp.topic not in self.topics_to_delete:
                elr += len(s.elr)
                lke += len(s.last_known_elr)
        return elr, lke

    def reassigning_partitions(self) -> list[TopicPartition]:
        """Partitions whose topic znode lists adding or removing replicas (moves in flight,
        KIP-455)."""
        out = []
        for topic in sorted(self.assignments):
            a = self.assignments[topic]
            out += [TopicPartition(topic, p)
                    for p in sorted(set(a.adding_replicas) | set(a.removing_replicas))
                    if a.adding_replicas.get(p) or a.removing_replicas.get(p)]
        return out

    def global_partition_count(self) -> int:
        return sum(len(a.partitions) for t, a in self.assignments.items()
                   if t not in self.topics_to_delete)

    def global_topic_count(self) -> int:
        return sum(1 for t in self.assignments if t not in self.topics_to_delete)

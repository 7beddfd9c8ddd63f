"""Carrying out the core's store effects (effects.py) against a MetadataStore: the one
translation both shells use - the controller's (controller.py, kazoo) and the simulation's
(tests/sim/driver.py, the in-memory store) - so what a script or a seed exercises is the same
code that runs against ZooKeeper.

Each read arms the watches its result depends on, as Kafka's handlers re-arm theirs; the
caller supplies them (`Watches`), because what a fired watch does is the shell's business.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from common import zk_layout as zl
from common.names import TopicPartition
from controller import effects, events
from controller.store import MetadataStore, NodeExists


class Watches(Protocol):
    def brokers(self) -> Callable: ...
    def broker(self, broker_id: int) -> Callable: ...
    def topics(self) -> Callable: ...
    def config(self, topic: str) -> Callable: ...
    def broker_default_config(self) -> Callable: ...
    def delete_topics(self) -> Callable: ...
    def reassignments(self) -> Callable: ...
    def restart_partitions(self) -> Callable: ...


@dataclass(frozen=True)
class EventWatches:
    """`Watches` whose firing posts the core's event for that znode, through the shell's
    `watch(key, make_event)` (which keeps one callable per znode, as kazoo keeps a set)."""

    watch: Callable[[Any, Callable[[], events.Event]], Callable]

    def brokers(self) -> Callable:
        return self.watch("brokers", events.BrokerChange)

    def broker(self, broker_id: int) -> Callable:
        return self.watch(("broker", broker_id),
                          lambda: events.BrokerModification(broker_id=broker_id))

    def topics(self) -> Callable:
        return self.watch("topics", events.TopicChange)

    def config(self, topic: str) -> Callable:
        return self.watch(("config", topic), lambda: events.TopicConfigChange(topic=topic))

    def broker_default_config(self) -> Callable:
        return self.watch("broker_default_config", events.BrokerDefaultConfigChange)

    def delete_topics(self) -> Callable:
        return self.watch("delete_topics", events.TopicDeletionChange)

    def reassignments(self) -> Callable:
        return self.watch("reassign", events.ReassignmentChange)

    def restart_partitions(self) -> Callable:
        return self.watch("restart_partitions", events.RestartPartitionsChange)


def decode_admin_reassignments(data: bytes | None) -> effects.AdminReassignments | None:
    if data is None:
        return None
    try:
        entries = zl.decode_reassignment(data)
    except ValueError as e:
        return effects.AdminReassignments(error=str(e))
    return effects.AdminReassignments({TopicPartition(t, p): tuple(r) for t, p, r in entries})


def decode_restart_entries(children: list[tuple[str, bytes]]) -> effects.RestartEntries:
    out: list[tuple[str, zl.RestartEntry | str]] = []
    for name, data in children:
        try:
            out.append((name, zl.decode_restart_entry(data)))
        except ValueError as e:
            out.append((name, str(e)))
    return effects.RestartEntries(tuple(out))


def encode_admin_reassignments(entries) -> bytes | None:
    if not entries:
        return None
    return zl.encode_reassignment((tp.topic, tp.partition, r) for tp, r in entries.items())


def _partitions(assignments) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, a in assignments.items() for p in sorted(a.partitions)]


async def perform(store: MetadataStore, eff: effects.Effect, w: Watches,
                  rng: random.Random) -> Any:
    """The outcome of one `needs_result` effect; store errors propagate (core.py rule 3)."""
    match eff:
        case effects.ReadCluster():
            cluster_id = await store.get_or_create_cluster_id(rng)
            regs = await store.read_brokers(watch=w.brokers(), broker_watch=w.broker)
            names = await store.read_topic_names(watch=w.topics())
            assignments = await store.read_assignments(names)
            configs = await store.read_topic_configs(list(assignments), w.config)
            states = await store.read_partition_states(_partitions(assignments))
            to_delete = await store.read_topics_to_delete(watch=w.delete_topics())
            admin = decode_admin_reassignments(
                await store.read_admin_reassignments(watch=w.reassignments()))
            return effects.ClusterSnapshot(cluster_id, regs, assignments, configs, states,
                                     tuple(to_delete), admin)
        case effects.ReadBrokers():
            return await store.read_brokers(watch=w.brokers(), broker_watch=w.broker)
        case effects.ReadBroker(broker_id=b):
            return await store.read_broker(b, watch=w.broker(b))
        case effects.ReadTopicNames():
            return await store.read_topic_names(watch=w.topics())
        case effects.ReadTopics(topics=topics):
            assignments = await store.read_assignments(list(topics))
            configs = await store.read_topic_configs(list(assignments), w.config)
            return assignments, configs, await store.read_partition_states(
                _partitions(assignments))
        case effects.ReadTopicConfig(topic=t):
            return await store.read_topic_config(t, watch=w.config(t))
        case effects.ReadBrokerDefaultConfig():
            return await store.read_broker_default_config(watch=w.broker_default_config())
        case effects.ReadTopicsToDelete():
            return await store.read_topics_to_delete(watch=w.delete_topics())
        case effects.ReadAdminReassignments():
            return decode_admin_reassignments(
                await store.read_admin_reassignments(watch=w.reassignments()))
        case effects.ReadRestartEntries():
            return decode_restart_entries(
                await store.read_restart_entries(watch=w.restart_partitions()))
        case effects.DeleteRestartEntry(name=name, epoch_version=v):
            return await store.delete_restart_entry(name, v)
        case effects.WriteTopicAssignment(assignment=a, epoch_version=v):
            return await store.write_topic_assignment(a, v)
        case effects.WriteAdminReassignments(entries=entries, epoch_version=v):
            return await store.write_admin_reassignments(encode_admin_reassignments(entries), v)
        case effects.WritePartitionStates(writes=writes, epoch_version=v):
            failed = await store.write_partition_states(list(writes), v)
            current = await store.read_partition_states(sorted(failed)) if failed else {}
            return effects.PartitionWritesOutcome(frozenset(failed), current)
        case effects.CreateTopic(assignment=a, configs=cfg, epoch_version=v):
            try:
                await store.create_topic(a, dict(cfg), v)
            except NodeExists:
                return False
            return True
        case effects.MarkTopicForDeletion(topic=t, epoch_version=v):
            return await store.mark_topic_for_deletion(t, v)
        case effects.DeleteTopic(topic=t, epoch_version=v):
            return await store.delete_topic(t, v)
    raise TypeError(f"not a store effect: {eff!r}")

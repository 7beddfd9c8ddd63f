"""The controller's metadata store seam: the protocol ``ZkStore`` implements against a real
ZooKeeper, and an in-memory implementation with the same conditional semantics.

Why: scripts and a seeded simulation must be able to crash the controller between any two
effects and fail it over. A real failover keeps only what the store holds, so the
in-memory store keeps exactly what ZooKeeper would - and refuses exactly what ZooKeeper would:

- every write carries the ``/controller_epoch`` version its controller won with; a deposed
  controller's write raises ``ControllerMovedError`` as a whole (the ZooKeeper transaction's
  check op);
- a partition state write names the version (partition epoch) it replaces, or creates the
  znode; a mismatch refuses that partition only, which is reported back (the caller re-reads);
- ``/controller`` and broker registrations are ephemeral: they belong to a session, and vanish
  with it (``expire``), firing their watches;
- watches are one-shot callbacks, as kazoo's are, fired after the change is visible.

State: the tree (``MemoryTree``) is shared; each ``InMemoryStore`` is one client session on it,
like one kazoo client. Status: complete for what the controller uses today (reassignment and
restart znodes included; recovery's join with design.md#kip-966). ``tests/controller/test_store.py``
runs the same contract against this and against ``ZkStore`` on a real ZooKeeper.
"""

from __future__ import annotations

import base64
import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol

from common import zk_layout as zl
from common.names import TopicPartition
from common.zk_layout import BrokerRegistration, ControllerInfo, LeaderAndIsr, TopicAssignment


class ControllerMovedError(Exception):
    """A write's /controller_epoch check failed: another controller took over."""


@dataclass(frozen=True)
class PartitionWrite:
    """A partition state znode write. `old` None creates the znode (version 0); otherwise a
    set with expected version old.partition_epoch, after which the version is new's. The
    decisions (controller/decisions) produce them; the store carries them out."""

    tp: TopicPartition
    old: LeaderAndIsr | None
    new: LeaderAndIsr


# The store's own errors. Every MetadataStore raises these; ZkStore translates kazoo's into
# them (zk_store.py), so nothing above the store names a kazoo exception.

class StoreError(Exception):
    """A store operation was refused or failed."""


class NodeExists(StoreError):
    """A create found the znode there already (a topic that exists, a broker id in use)."""


class NoNode(StoreError):
    """An operation needed a znode that is not there."""


class BadVersion(StoreError):
    """A conditional write named a version the znode no longer has."""


class OutcomeUnknown(StoreError):
    """Whether the operation took effect cannot be known: ZooKeeper's connection was lost,
    its session expired or the request timed out. The controller trusts nothing it holds past
    such an error: it resigns and reloads from the store (controller.py)."""


class MetadataStore(Protocol):
    """What the controller reads and writes (Kafka's KafkaZkClient, controller half)."""

    async def ensure_paths(self) -> None: ...
    async def get_or_create_cluster_id(self, rng: random.Random | None = None) -> str: ...
    async def read_controller(self, watch=None) -> tuple[ControllerInfo, Any] | None: ...
    async def read_controller_epoch(self) -> tuple[int, int]: ...
    async def try_become_controller(self, info: ControllerInfo) -> tuple[int, int] | None: ...
    async def reclaim_controller(self, controller_version: int) -> tuple[int, int] | None: ...
    async def resign(self, session_id: int | None) -> None: ...
    async def read_broker(self, broker_id: int, watch=None) -> BrokerRegistration | None: ...
    async def read_broker_ids(self, watch=None) -> list[int]: ...
    async def read_brokers(self, watch=None, broker_watch=None
                           ) -> dict[int, BrokerRegistration]: ...
    async def read_topic_names(self, watch=None) -> list[str]: ...
    async def read_assignment(self, topic: str, watch=None) -> TopicAssignment | None: ...
    async def read_assignments(self, topics: Sequence[str]) -> dict[str, TopicAssignment]: ...
    async def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None: ...
    async def read_partition_states(self, tps: Sequence[TopicPartition]
                                    ) -> dict[TopicPartition, LeaderAndIsr]: ...
    async def read_topic_config(self, topic: str, watch=None) -> dict[str, str]: ...
    async def read_topic_configs(self, topics: Sequence[str], watch_for=None
                                 ) -> dict[str, dict[str, str]]: ...
    async def read_broker_default_config(self, watch=None) -> dict[str, str]: ...
    async def read_topics_to_delete(self, watch=None) -> list[str]: ...
    async def read_admin_reassignments(self, watch=None) -> bytes | None: ...
    async def read_restart_entries(self, watch=None) -> list[tuple[str, bytes]]: ...
    async def delete_restart_entry(self, name: str, epoch_version: int) -> None: ...
    async def write_topic_assignment(self, assignment: TopicAssignment,
                                     epoch_version: int) -> None: ...
    async def write_admin_reassignments(self, data: bytes | None,
                                        epoch_version: int) -> None: ...
    async def write_partition_states(self, writes: Sequence[PartitionWrite],
                                     epoch_version: int) -> set[TopicPartition]: ...
    async def create_topic(self, assignment: TopicAssignment, config: dict[str, str],
                           epoch_version: int) -> None: ...
    async def mark_topic_for_deletion(self, topic: str, epoch_version: int) -> None: ...
    async def delete_topic(self, topic: str, epoch_version: int) -> None: ...


class WatchedEvent(NamedTuple):
    """What a fired watch receives (kazoo passes its own WatchedEvent)."""

    type: str  # CREATED | DELETED | CHANGED | CHILD
    path: str


@dataclass
class Stat:
    """The parts of a znode stat the controller looks at."""

    version: int = 0
    czxid: int = 0
    ephemeralOwner: int = 0


@dataclass
class MemoryTree:
    """The shared state: what ZooKeeper would hold."""

    cluster_id: str | None = None
    controller: tuple[ControllerInfo, Stat] | None = None
    controller_epoch: int = 0
    controller_epoch_version: int = 0
    brokers: dict[int, tuple[BrokerRegistration, Stat]] = field(default_factory=dict)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_default_config: dict[str, str] = field(default_factory=dict)  # /config/brokers/<default>
    states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    delete_topics: set[str] = field(default_factory=set)
    reassign_partitions: bytes | None = None  # /admin/reassign_partitions, as written
    restart_entries: dict[str, bytes] = field(default_factory=dict)  # /restart_partitions
    watches: dict[Any, list[Callable]] = field(default_factory=dict)
    _zxid: itertools.count = field(default_factory=lambda: itertools.count(1))
    _sessions: itertools.count = field(default_factory=lambda: itertools.count(1))

    def zxid(self) -> int:
        return next(self._zxid)

    def watch(self, key, fn: Callable | None) -> None:
        # A set per znode, as kazoo keeps: re-arming with the same callable fires it once.
        if fn is not None and fn not in self.watches.setdefault(key, []):
            self.watches[key].append(fn)

    def fire(self, key, event: WatchedEvent) -> None:
        for fn in self.watches.pop(key, []):
            fn(event)

    # -- what brokers and tests do to the tree (not the controller's API) --------------

    def register_broker(self, reg: BrokerRegistration, session_id: int) -> int:
        """A broker's ephemeral /brokers/ids/<id>; returns its epoch (czxid)."""
        if reg.broker_id in self.brokers:
            raise NodeExists()
        czxid = self.zxid()
        self.brokers[reg.broker_id] = (replace(reg, epoch=czxid),
                                       Stat(0, czxid, session_id))
        self.fire("brokers", WatchedEvent("CHILD", "/brokers/ids"))
        return czxid

    def write_broker_default_config(self, config: dict[str, str]) -> None:
        """What `replog configs --entity-type brokers --entity-default --alter` does."""
        self.broker_default_config = dict(config)
        self.fire("broker_default_config",
                  WatchedEvent("CHANGED", zl.entity_config_path("brokers", "<default>")))

    def write_reassign_partitions(self, data: bytes | None) -> None:
        """What kafka-reassign-partitions (or `replog reassign` over ZooKeeper) does."""
        self.reassign_partitions = data
        self.fire("reassign", WatchedEvent("CHANGED", "/admin/reassign_partitions"))

    def add_restart_entry(self, data: bytes) -> str:
        """What a broker whose log dir failed does (design.md#jbod-step-2-4): a persistent
        sequential child of /restart_partitions; returns its name."""
        name = f"{zl.RESTART_ENTRY_PREFIX}{self.zxid():010d}"
        self.restart_entries[name] = data
        self.fire("restart_partitions", WatchedEvent("CHILD", zl.RESTART_PARTITIONS))
        return name

    def expire(self, session_id: int) -> None:
        """A session ends: its ephemerals go and their watches fire (a real expiry)."""
        if self.controller is not None and self.controller[1].ephemeralOwner == session_id:
            self.controller = None
            self.fire("controller", WatchedEvent("DELETED", "/controller"))
        gone = [b for b, (_, st) in self.brokers.items() if st.ephemeralOwner == session_id]
        for b in gone:
            del self.brokers[b]
            self.fire(("broker", b), WatchedEvent("DELETED", f"/brokers/ids/{b}"))
        if gone:
            self.fire("brokers", WatchedEvent("CHILD", "/brokers/ids"))

    def new_session(self) -> int:
        return next(self._sessions)


class InMemoryStore:
    """One client session on a ``MemoryTree``; implements ``MetadataStore``."""

    def __init__(self, tree: MemoryTree | None = None, session_id: int | None = None):
        self.tree = tree if tree is not None else MemoryTree()
        self.session_id = session_id if session_id is not None else self.tree.new_session()

    # ------------------------------------------------------------------ setup

    async def ensure_paths(self) -> None:
        return None

    async def get_or_create_cluster_id(self, rng: random.Random | None = None) -> str:
        if self.tree.cluster_id is None:
            raw = (rng or random.Random()).getrandbits(128).to_bytes(16, "big")
            self.tree.cluster_id = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        return self.tree.cluster_id

    # ------------------------------------------------------------------ election

    async def read_controller(self, watch=None) -> tuple[ControllerInfo, Any] | None:
        self.tree.watch("controller", watch)
        return self.tree.controller

    async def read_controller_epoch(self) -> tuple[int, int]:
        return self.tree.controller_epoch, self.tree.controller_epoch_version

    async def try_become_controller(self, info: ControllerInfo) -> tuple[int, int] | None:
        t = self.tree
        if t.controller is not None:
            return None
        t.controller = (info, Stat(0, t.zxid(), self.session_id))
        self._bump_epoch()
        t.fire("controller", WatchedEvent("CREATED", "/controller"))
        return t.controller_epoch, t.controller_epoch_version

    async def reclaim_controller(self, controller_version: int) -> tuple[int, int] | None:
        t = self.tree
        if t.controller is None or t.controller[1].ephemeralOwner != self.session_id or \
                t.controller[1].version != controller_version:
            return None
        self._bump_epoch()
        return t.controller_epoch, t.controller_epoch_version

    def _bump_epoch(self) -> None:
        self.tree.controller_epoch += 1
        self.tree.controller_epoch_version += 1

    async def resign(self, session_id: int | None) -> None:
        t = self.tree
        if t.controller is not None and session_id is not None and \
                t.controller[1].ephemeralOwner == session_id:
            t.controller = None
            t.fire("controller", WatchedEvent("DELETED", "/controller"))

    # ------------------------------------------------------------------ reads

    async def read_broker(self, broker_id: int, watch=None) -> BrokerRegistration | None:
        self.tree.watch(("broker", broker_id), watch)
        got = self.tree.brokers.get(broker_id)
        return got[0] if got else None

    async def read_broker_ids(self, watch=None) -> list[int]:
        self.tree.watch("brokers", watch)
        return sorted(self.tree.brokers)

    async def read_brokers(self, watch=None, broker_watch=None
                           ) -> dict[int, BrokerRegistration]:
        ids = await self.read_broker_ids(watch)
        out = {}
        for i in ids:
            reg = await self.read_broker(i, broker_watch(i) if broker_watch else None)
            if reg is not None:
                out[i] = reg
        return out

    async def read_topic_names(self, watch=None) -> list[str]:
        self.tree.watch("topics", watch)
        return sorted(self.tree.topics)

    async def read_assignment(self, topic: str, watch=None) -> TopicAssignment | None:
        self.tree.watch(("topic", topic), watch)
        return self.tree.topics.get(topic)

    async def read_assignments(self, topics: Sequence[str]) -> dict[str, TopicAssignment]:
        return {t: self.tree.topics[t] for t in topics if t in self.tree.topics}

    async def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        return self.tree.states.get(tp)

    async def read_partition_states(self, tps: Sequence[TopicPartition]
                                    ) -> dict[TopicPartition, LeaderAndIsr]:
        return {tp: self.tree.states[tp] for tp in tps if tp in self.tree.states}

    async def read_topic_config(self, topic: str, watch=None) -> dict[str, str]:
        self.tree.watch(("config", topic), watch)
        return dict(self.tree.configs.get(topic, {}))

    async def read_broker_default_config(self, watch=None) -> dict[str, str]:
        self.tree.watch("broker_default_config", watch)
        return dict(self.tree.broker_default_config)

    async def read_topic_configs(self, topics: Sequence[str], watch_for=None
                                 ) -> dict[str, dict[str, str]]:
        return {t: await self.read_topic_config(t, watch_for(t) if watch_for else None)
                for t in topics}

    async def read_topics_to_delete(self, watch=None) -> list[str]:
        self.tree.watch("delete_topics", watch)
        return sorted(self.tree.delete_topics)

    async def read_admin_reassignments(self, watch=None) -> bytes | None:
        self.tree.watch("reassign", watch)
        return self.tree.reassign_partitions

    async def read_restart_entries(self, watch=None) -> list[tuple[str, bytes]]:
        self.tree.watch("restart_partitions", watch)
        return sorted(self.tree.restart_entries.items())

    # ------------------------------------------------------------------ conditional writes

    def _check_epoch(self, epoch_version: int) -> None:
        if self.tree.controller_epoch_version != epoch_version:
            raise ControllerMovedError(
                f"/controller_epoch is no longer at version {epoch_version}")

    async def write_partition_states(self, writes: Sequence[PartitionWrite],
                                     epoch_version: int) -> set[TopicPartition]:
        self._check_epoch(epoch_version)
        failed: set[TopicPartition] = set()
        states = self.tree.states
        for w in writes:
            current = states.get(w.tp)
            if w.old is None:
                if current is not None or w.tp.topic not in self.tree.topics:
                    failed.add(w.tp)
                    continue
                states[w.tp] = replace(w.new, partition_epoch=0)
            else:
                if current is None or current.partition_epoch != w.old.partition_epoch:
                    failed.add(w.tp)
                    continue
                states[w.tp] = replace(w.new, partition_epoch=current.partition_epoch + 1)
        return failed

    async def create_topic(self, assignment: TopicAssignment, config: dict[str, str],
                           epoch_version: int) -> None:
        self._check_epoch(epoch_version)
        t = self.tree
        if assignment.topic in t.topics:
            raise NodeExists()
        t.configs[assignment.topic] = dict(config)
        t.topics[assignment.topic] = assignment
        t.fire(("config", assignment.topic), WatchedEvent("CHANGED", assignment.topic))
        t.fire("topics", WatchedEvent("CHILD", "/brokers/topics"))

    async def write_topic_assignment(self, assignment: TopicAssignment,
                                     epoch_version: int) -> None:
        self._check_epoch(epoch_version)
        if assignment.topic not in self.tree.topics:
            raise NoNode()
        self.tree.topics[assignment.topic] = assignment

    async def write_admin_reassignments(self, data: bytes | None,
                                        epoch_version: int) -> None:
        self._check_epoch(epoch_version)
        if self.tree.reassign_partitions == data:
            return
        self.tree.write_reassign_partitions(data)

    async def delete_restart_entry(self, name: str, epoch_version: int) -> None:
        self._check_epoch(epoch_version)
        if self.tree.restart_entries.pop(name, None) is not None:
            self.tree.fire("restart_partitions", WatchedEvent("CHILD", zl.RESTART_PARTITIONS))

    async def mark_topic_for_deletion(self, topic: str, epoch_version: int) -> None:
        self._check_epoch(epoch_version)
        if topic not in self.tree.delete_topics:
            self.tree.delete_topics.add(topic)
            self.tree.fire("delete_topics", WatchedEvent("CHILD", "/admin/delete_topics"))

    async def delete_topic(self, topic: str, epoch_version: int) -> None:
        self._check_epoch(epoch_version)
        t = self.tree
        for tp in [tp for tp in t.states if tp.topic == topic]:
            del t.states[tp]
        existed = t.topics.pop(topic, None) is not None
        t.configs.pop(topic, None)
        marked = topic in t.delete_topics
        t.delete_topics.discard(topic)
        if existed:
            t.fire(("topic", topic), WatchedEvent("DELETED", topic))
            t.fire("topics", WatchedEvent("CHILD", "/brokers/topics"))
        if marked:
            t.fire("delete_topics", WatchedEvent("CHILD", "/admin/delete_topics"))

"""The controller's ZooKeeper reads and conditional writes (Kafka's KafkaZkClient, controller
half). Thin: no decisions here.

Fencing - the rule every write here keeps: each multi-op transaction also does
check(/controller_epoch, <the version this controller wrote when it won>). A controller that
has been deposed (a successor bumped /controller_epoch) therefore has every write refused as a
whole - even one it issues long after waking from a SIGSTOP - and sees ControllerMovedError,
upon which it resigns. Partition state znodes are additionally written with their expected
version (the partition epoch).

Batches: partition-state writes go in transactions of at most MAX_OPS_PER_TRANSACTION
operations (one round trip each; ZooKeeper's jute.maxbuffer bounds a transaction's size). A
transaction that fails on one partition's version is retried without that partition, which is
reported back as failed (the caller re-reads it).

A lost connection (ConnectionLoss: the ensemble member this session talks to died or lost its
quorum) leaves a transaction's outcome unknown. Partition-state transactions are sent again
once kazoo has moved the same session to another member, as Kafka's KafkaZkClient retries
every request until connected - but only after reading which partitions already hold exactly
what this attempt wrote (the lost attempt was applied): those count as written. Reporting them
as refused instead would make the controller adopt its own state without telling any broker.
A session that expired meanwhile is not retried (OutcomeUnknown: the controller resigns and
reclaims). So losing one minority member costs no controller election, no resignation and
no new controller epoch (tests/controller/test_zk_store.py::
test_partition_writes_lost_with_their_connection_are_resolved).

Election: the winner creates the ephemeral /controller and bumps /controller_epoch in *one*
transaction (Kafka's registerControllerAndIncrementControllerEpoch), so no two controllers can
ever hold the same epoch.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import random
from collections import namedtuple
from collections.abc import Iterable, Sequence
from typing import Any

from kazoo.exceptions import (
    EXCEPTIONS,
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
    UnimplementedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import (
    GetData,
    MultiHeader,
    int_struct,
    multiheader_struct,
    read_buffer,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import ZnodeStat

from common import zk_layout as zl
from common.dynamic_config import DEFAULT_BROKER
from common.names import TopicPartition, ascii_digits
from common.zk_async import AsyncZk
from common.zk_layout import BrokerRegistration, ControllerInfo, LeaderAndIsr, TopicAssignment
from controller.store import (
    BadVersion,
    ControllerMovedError,
    MetadataStore,
    NodeExists,
    NoNode,
    OutcomeUnknown,
    PartitionWrite,
)

log = logging.getLogger(__name__)

MAX_OPS_PER_TRANSACTION = 500
MAX_CONCURRENT_READS = 2000
PIPELINED_TRANSACTIONS = 4
MULTI_READ_SIZE = 1000  # ~200 KB of states per response, far below jute.maxbuffer


class _MultiRead(namedtuple("_MultiRead", "paths")):
    """ZooKeeper 3.6+'s multiRead (OpCode 22) of getData operations, as a kazoo request.

    Why: kazoo wakes its connection thread with a socket write for every request, and that
    hand-off (GIL included) costs ~0.2 ms - 10k partition-state reads took ~3 s, a failover
    at 100k partitions ~30 s. One multiRead carries MULTI_READ_SIZE reads in one request and
    one round trip. Each read has its own result (a failed one does not fail the others)."""

    type = 22

    def serialize(self):
        b = bytearray()
        for p in self.paths:
            b.extend(MultiHeader(GetData.type, False, -1).serialize())
            b.extend(write_string(p))
            b.append(0)  # no watch
        return b + multiheader_struct.pack(-1, True, -1)

    def deserialize(self, buf, offset):
        results = []
        header, offset = MultiHeader.deserialize(buf, offset)
        while not header.done:
            if header.type == GetData.type:
                data, offset = read_buffer(buf, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(buf, offset))
                offset += stat_struct.size
                results.append((data, stat))
            else:  # -1: an error result
                err = int_struct.unpack_from(buf, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[err]())
            header, offset = MultiHeader.deserialize(buf, offset)
        return results


# ControllerMovedError is defined with the store protocol (controller/store.py), so that
# every MetadataStore raises the same one; it is re-exported here for existing imports.


def _translated(method):
    """kazoo's errors as the store's own (controller/store.py): this is the only place above
    which nothing names a kazoo exception. Anything but a definite refusal - connection
    loss, session expiry, a timeout - leaves the outcome unknown."""
    @functools.wraps(method)
    async def call(*args, **kwargs):
        try:
            return await method(*args, **kwargs)
        except NodeExistsError as e:
            raise NodeExists(f"{method.__name__}: the znode exists") from e
        except NoNodeError as e:
            raise NoNode(f"{method.__name__}: no such znode") from e
        except BadVersionError as e:
            raise BadVersion(f"{method.__name__}: the znode's version changed") from e
        except (KazooException, KazooTimeoutError) as e:
            raise OutcomeUnknown(f"{method.__name__}: ZooKeeper: {e!r}") from e
    return call


def _is_rollback(e: Any) -> bool:
    return isinstance(e, (RolledBackError, RuntimeInconsistency))


async def _gather_bounded(coros: Iterable, limit: int = MAX_CONCURRENT_READS) -> list:
    """asyncio.gather in slices: keeps at most `limit` kazoo requests queued at once."""
    coros = list(coros)
    out: list = []
    for i in range(0, len(coros), limit):
        out += await asyncio.gather(*coros[i:i + limit])
    return out


class ZkStore:
    """The MetadataStore (controller/store.py) on a real ZooKeeper, through kazoo."""

    def __init__(self, zk: AsyncZk):
        self.zk = zk
        self._multi_read = True

    # ------------------------------------------------------------------ setup

    async def ensure_paths(self) -> None:
        for p in zl.PERSISTENT_PATHS:
            await self.zk.ensure_path(p)

        async def create_epoch() -> None:
            try:
                await self.zk.create(zl.CONTROLLER_EPOCH, zl.encode_controller_epoch(0))
            except NodeExistsError:
                pass
        await self.zk.until_connected(create_epoch)

    async def get_or_create_cluster_id(self, rng: random.Random | None = None) -> str:
        got = await self.zk.get_or_none(zl.CLUSTER_ID)
        if got is not None:
            return zl.decode_cluster_id(got[0])
        raw = (rng or random.Random()).getrandbits(128).to_bytes(16, "big")
        cluster_id = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        try:
            await self.zk.create(zl.CLUSTER_ID, zl.encode_cluster_id(cluster_id), makepath=True)
            return cluster_id
        except NodeExistsError:
            return zl.decode_cluster_id((await self.zk.get(zl.CLUSTER_ID))[0])

    # ------------------------------------------------------------------ election

    async def read_controller(self, watch=None) -> tuple[ControllerInfo, Any] | None:
        """The active controller and its znode stat; sets `watch` on /controller whether or
        not it exists (exists-watch, then get)."""
        stat = await self.zk.exists(zl.CONTROLLER, watch=watch)
        if stat is None:
            return None
        got = await self.zk.get_or_none(zl.CONTROLLER)
        if got is None:
            return None
        try:
            return zl.decode_controller(got[0]), got[1]
        except (ValueError, KeyError):
            return ControllerInfo(-1, "", -1), got[1]

    async def read_controller_epoch(self) -> tuple[int, int]:
        """(epoch, znode version)."""
        data, stat = await self.zk.get(zl.CONTROLLER_EPOCH)
        return zl.decode_controller_epoch(data), stat.version

    async def try_become_controller(self, info: ControllerInfo) -> tuple[int, int] | None:
        """Create /controller and bump /controller_epoch atomically. Returns (new epoch, its
        znode version), or None if another controller holds /controller."""
        while True:
            try:
                epoch, version = await self.read_controller_epoch()
            except NoNode:
                await self.ensure_paths()
                continue
            t = self.zk.transaction()
            t.create(zl.CONTROLLER, zl.encode_controller(info), ephemeral=True)
            t.set_data(zl.CONTROLLER_EPOCH, zl.encode_controller_epoch(epoch + 1), version)
            results = await self.zk.commit(t)
            if isinstance(results[0], NodeExistsError):
                return None
            if isinstance(results[1], BadVersionError):
                continue  # a concurrent winner bumped the epoch; /controller will exist now
            if isinstance(results[0], Exception) or isinstance(results[1], Exception):
                raise results[0] if isinstance(results[0], Exception) and not \
                    _is_rollback(results[0]) else results[1]
            return epoch + 1, results[1].version

    async def reclaim_controller(self, controller_version: int) -> tuple[int, int] | None:
        """Our /controller survived a connection loss (same session): take a new epoch
        without giving up /controller - conditional on /controller being unchanged."""
        epoch, version = await self.read_controller_epoch()
        t = self.zk.transaction()
        t.check(zl.CONTROLLER, controller_version)
        t.set_data(zl.CONTROLLER_EPOCH, zl.encode_controller_epoch(epoch + 1), version)
        results = await self.zk.commit(t)
        if any(isinstance(r, Exception) for r in results):
            return None
        return epoch + 1, results[1].version

    async def resign(self, session_id: int | None) -> None:
        """Delete /controller if this session owns it (clean shutdown: a standby takes over
        at once instead of after the session timeout)."""
        got = await self.zk.get_or_none(zl.CONTROLLER)
        if got is not None and session_id is not None and got[1].ephemeralOwner == session_id:
            try:
                await self.zk.delete(zl.CONTROLLER, got[1].version)
            except (NoNodeError, BadVersionError):
                pass

    # ------------------------------------------------------------------ reads

    async def read_broker(self, broker_id: int, watch=None) -> BrokerRegistration | None:
        """None if absent - or unreadable: a registration the controller cannot parse is
        treated as no registration (logged), rather than stopping every failover."""
        got = await self.zk.get_or_none(zl.broker_path(broker_id), watch=watch)
        if got is None:
            return None
        data, stat = got
        try:
            return zl.decode_broker(broker_id, data, stat.czxid)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable registration of broker %s: %s", broker_id, e)
            return None

    async def read_broker_ids(self, watch=None) -> list[int]:
        return sorted(int(c) for c in await self.zk.get_children(zl.BROKER_IDS, watch=watch)
                      if ascii_digits(c))

    async def read_brokers(self, watch=None, broker_watch=None
                           ) -> dict[int, BrokerRegistration]:
        """Live brokers with their epochs. `broker_watch(id)` gives the data watch per znode."""
        ids = await self.read_broker_ids(watch)
        regs = await asyncio.gather(*(
            self.read_broker(i, broker_watch(i) if broker_watch else None) for i in ids))
        return {r.broker_id: r for r in regs if r is not None}

    async def read_topic_names(self, watch=None) -> list[str]:
        return sorted(await self.zk.get_children(zl.TOPICS, watch=watch))

    async def read_assignment(self, topic: str, watch=None) -> TopicAssignment | None:
        got = await self.zk.get_or_none(zl.topic_path(topic), watch=watch)
        if got is None or not got[0]:
            return None
        try:
            return zl.decode_topic(topic, got[0])
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("ignoring topic %s with an unreadable assignment: %s", topic, e)
            return None

    async def read_assignments(self, topics: Sequence[str]) -> dict[str, TopicAssignment]:
        got = await _gather_bounded(self.read_assignment(t) for t in topics)
        return {a.topic: a for a in got if a is not None}

    async def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        got = await self.zk.get_or_none(zl.partition_state_path(tp.topic, tp.partition))
        if got is None:
            return None
        return self._decode_state(tp, *got)

    @staticmethod
    def _decode_state(tp: TopicPartition, data: bytes, stat) -> LeaderAndIsr:
        try:
            return zl.decode_partition_state(data, stat.version, str(tp))
        except (ValueError, KeyError, TypeError) as e:
            # Overwritten (conditionally, at this version) by the next election.
            log.warning("unreadable partition state of %s: %s; treating it as offline", tp, e)
            return LeaderAndIsr(zl.NO_LEADER, 0, (), 0, stat.version)

    async def read_partition_states(self, tps: Sequence[TopicPartition]
                                    ) -> dict[TopicPartition, LeaderAndIsr]:
        """States of many partitions (failover): multiRead batches, or one get per
        partition where the server has no multiRead (ZooKeeper < 3.6)."""
        tps = list(tps)
        out: dict[TopicPartition, LeaderAndIsr] = {}
        if self._multi_read:
            try:
                for i in range(0, len(tps), MULTI_READ_SIZE):
                    chunk = tps[i:i + MULTI_READ_SIZE]
                    results = await self.multi_get(
                        [zl.partition_state_path(tp.topic, tp.partition) for tp in chunk])
                    for tp, r in zip(chunk, results):
                        if isinstance(r, tuple):
                            s = self._decode_state(tp, *r)
                            if s is not None:
                                out[tp] = s
                        elif not isinstance(r, NoNodeError):
                            raise r
                return out
            except UnimplementedError:
                self._multi_read = False
                out.clear()
        states = await _gather_bounded(self.read_partition_state(tp) for tp in tps)
        return {tp: s for tp, s in zip(tps, states) if s is not None}

    async def multi_get(self, paths: Sequence[str]) -> list:
        """(data, stat) or an exception instance per path, in one multiRead request."""
        client = self.zk.client
        prefix = client.chroot or ""

        def request():
            result = client.handler.async_result()
            client._call(_MultiRead([prefix + p for p in paths]), result)
            return result
        return await self.zk.read(request)  # a read: retried after a ConnectionLoss

    async def read_topic_config(self, topic: str, watch=None) -> dict[str, str]:
        got = await self.zk.get_or_none(zl.topic_config_path(topic), watch=watch)
        if got is None or not got[0]:
            return {}
        try:
            return zl.decode_topic_config(got[0])
        except (ValueError, AttributeError) as e:
            log.warning("ignoring unreadable config of topic %s: %s", topic, e)
            return {}

    async def read_broker_default_config(self, watch=None) -> dict[str, str]:
        """/config/brokers/<default>, {} without one; `watch` is an exists-watch, so it fires
        when the znode is created, changed or deleted - the same writes that add the
        /config/changes notification brokers act on."""
        path = zl.entity_config_path("brokers", DEFAULT_BROKER)
        if await self.zk.exists(path, watch=watch) is None:
            return {}
        got = await self.zk.get_or_none(path)
        if got is None or not got[0]:
            return {}
        try:
            return zl.decode_entity_config(got[0])
        except (ValueError, AttributeError) as e:
            # unreadable: the strictest min ISR would be right, but the controller cannot tell
            # which keys were meant; keep the static values and say so
            log.warning("ignoring unreadable cluster-wide broker config: %s", e)
            return {}

    async def read_topic_configs(self, topics: Sequence[str], watch_for=None
                                 ) -> dict[str, dict[str, str]]:
        """Many topics' configs at once (a failover reads every topic's), arming each
        topic's watch from `watch_for(topic)`."""
        got = await _gather_bounded(
            self.read_topic_config(t, watch=watch_for(t) if watch_for else None)
            for t in topics)
        return dict(zip(topics, got))

    async def read_topics_to_delete(self, watch=None) -> list[str]:
        return sorted(await self.zk.get_children(zl.DELETE_TOPICS, watch=watch))

    async def read_admin_reassignments(self, watch=None) -> bytes | None:
        """/admin/reassign_partitions' data, or None; `watch` is an exists-watch, so it fires
        when the znode is created, changed or deleted (Kafka's
        registerZNodeChangeHandlerAndCheckExistence)."""
        stat = await self.zk.exists(zl.REASSIGN_PARTITIONS, watch=watch)
        if stat is None:
            return None
        got = await self.zk.get_or_none(zl.REASSIGN_PARTITIONS)
        return None if got is None else got[0]

    async def read_restart_entries(self, watch=None) -> list[tuple[str, bytes]]:
        """/restart_partitions' children in sequence order, with their data; `watch` is a
        children watch (design.md#jbod: "registers Zookeeper listener on /restart_partitions"). A
        child deleted between the listing and its read is skipped."""
        names = sorted(await self.zk.get_children(zl.RESTART_PARTITIONS, watch=watch))
        got = await asyncio.gather(*(self.zk.get_or_none(zl.restart_entry_path(n))
                                     for n in names))
        return [(n, g[0]) for n, g in zip(names, got) if g is not None]

    # ------------------------------------------------------------------ conditional writes

    async def _commit_checked(self, ops: list, epoch_version: int) -> list:
        """Commit `ops` (callables adding to a transaction) after the epoch check; returns the
        results of `ops` (without the check's). Raises ControllerMovedError on the check."""
        t = self.zk.transaction()
        t.check(zl.CONTROLLER_EPOCH, epoch_version)
        for op in ops:
            op(t)
        results = await self.zk.commit(t)
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise ControllerMovedError(
                f"/controller_epoch is no longer at version {epoch_version}")
        return results[1:]

    async def write_partition_states(self, writes: Sequence[PartitionWrite],
                                     epoch_version: int) -> set[TopicPartition]:
        """Write partition states conditionally in batched transactions. Returns the
        partitions whose write was refused (version mismatch, or the znode exists/is missing).

        Up to PIPELINED_TRANSACTIONS transactions are in flight at once: they are
        independent (each carries its own epoch check and each partition's own parent znode),
        and ZooKeeper fsyncs pipelined transactions together, so this more than doubles the
        partition states written per second after a broker failure."""
        if not writes:
            return set()
        failed: set[TopicPartition] = set()
        creates = [w for w in writes if w.old is None]
        missing = await self._missing_parents(creates) if creates else set()
        topic_parents = sorted(p for p in missing if p.endswith("/partitions"))
        if topic_parents:  # shared by many writes: create them first, in their own step
            results = await self._commit_checked(
                [lambda t, p=p: t.create(p, b"") for p in topic_parents], epoch_version)
            for r in results:
                if isinstance(r, Exception) and not _is_rollback(r) and \
                        not isinstance(r, NodeExistsError):
                    raise r
            missing -= set(topic_parents)
        pending = list(writes)
        gate = asyncio.Semaphore(PIPELINED_TRANSACTIONS)

        async def commit(batch: list[PartitionWrite], ops: list, owner: list[PartitionWrite]):
            session = self.zk.session_id
            while True:
                try:
                    async with gate:
                        results = await self._commit_checked(ops, epoch_version)
                    break
                except ConnectionLoss:
                    await self.zk.until_reconnected()
                    if self.zk.session_id != session:
                        raise  # the session expired meanwhile: the outcome stays unknown
                    written = await self._already_written(batch)
                    batch = [w for w in batch if w.tp not in written]
                    if not batch:
                        return batch, None
                    ops, owner = [], []
                    for w in batch:
                        w_ops = self._ops_for(w, missing)
                        ops += w_ops
                        owner += [w] * len(w_ops)
            bad = next((i for i, r in enumerate(results)
                        if isinstance(r, Exception) and not _is_rollback(r)), None)
            return batch, None if bad is None else owner[bad]

        while pending:
            batches = []
            batch: list[PartitionWrite] = []
            ops: list = []
            owner: list[PartitionWrite] = []  # op index -> its write
            for w in pending:
                w_ops = self._ops_for(w, missing)
                if ops and len(ops) + len(w_ops) > MAX_OPS_PER_TRANSACTION:
                    batches.append((batch, ops, owner))
                    batch, ops, owner = [], [], []
                batch.append(w)
                ops += w_ops
                owner += [w] * len(w_ops)
            batches.append((batch, ops, owner))
            outcomes = await asyncio.gather(*(commit(*b) for b in batches),
                                            return_exceptions=True)
            for o in outcomes:
                if isinstance(o, BaseException):
                    raise o
            pending = []
            for batch, bad in outcomes:
                if bad is not None:
                    # One refused op failed its transaction: drop that partition, retry the
                    # rest of the batch (rolled back whole, parents included).
                    failed.add(bad.tp)
                    pending += [w for w in batch if w.tp != bad.tp]
        return failed

    async def _already_written(self, writes: Sequence[PartitionWrite]) -> set[TopicPartition]:
        """The partitions whose state znode holds exactly what ``writes`` write, at the version
        that write makes (the expected version + 1; 0 for a create): a transaction lost with
        its connection was applied."""
        got = await _gather_bounded(
            self.zk.get_or_none(zl.partition_state_path(w.tp.topic, w.tp.partition))
            for w in writes)
        done = set()
        for w, r in zip(writes, got):
            if r is None:
                continue
            data, stat = r
            version = 0 if w.old is None else w.old.partition_epoch + 1
            if stat.version == version and data == zl.encode_partition_state(w.new):
                done.add(w.tp)
        return done

    async def _missing_parents(self, creates: Sequence[PartitionWrite]) -> set[str]:
        """Which /partitions and /partitions/<p> znodes the creates need: one children
        listing per topic (not one exists() per partition - see _MultiRead for why)."""
        missing: set[str] = set()
        by_topic: dict[str, list[int]] = {}
        for w in creates:
            by_topic.setdefault(w.tp.topic, []).append(w.tp.partition)
        for topic, parts in by_topic.items():
            try:
                present = set(await self.zk.get_children(zl.partitions_path(topic)))
            except NoNodeError:
                missing.add(zl.partitions_path(topic))
                present = set()
            missing.update(zl.partition_path(topic, p) for p in parts if str(p) not in present)
        return missing

    @staticmethod
    def _ops_for(w: PartitionWrite, missing: set[str]) -> list:
        """The transaction ops for one write (creating its /partitions/<p> if missing)."""
        state_path = zl.partition_state_path(w.tp.topic, w.tp.partition)
        data = zl.encode_partition_state(w.new)
        if w.old is not None:
            version = w.old.partition_epoch
            return [lambda t: t.set_data(state_path, data, version)]
        parent = zl.partition_path(w.tp.topic, w.tp.partition)
        ops = [lambda t: t.create(parent, b"")] if parent in missing else []
        ops.append(lambda t: t.create(state_path, data))
        return ops

    async def create_topic(self, assignment: TopicAssignment, config: dict[str, str],
                           epoch_version: int) -> None:
        """/config/topics/<t>, /brokers/topics/<t> and its /partitions node in one
        transaction (Kafka writes the config first, then the assignment). Raises
        NodeExistsError if the topic exists."""
        config_exists = await self.zk.exists(zl.topic_config_path(assignment.topic)) is not None
        cfg = zl.encode_topic_config(config)
        ops = [
            (lambda t: t.set_data(zl.topic_config_path(assignment.topic), cfg)) if config_exists
            else (lambda t: t.create(zl.topic_config_path(assignment.topic), cfg)),
            lambda t: t.create(zl.topic_path(assignment.topic), zl.encode_topic(assignment)),
            lambda t: t.create(zl.partitions_path(assignment.topic), b""),
        ]
        results = await self._commit_checked(ops, epoch_version)
        for r in results:
            if isinstance(r, Exception) and not _is_rollback(r):
                raise r

    async def write_topic_assignment(self, assignment: TopicAssignment,
                                     epoch_version: int) -> None:
        """Reassignment steps 1 and 6. Any version of the topic znode (Kafka's
        setTopicAssignment: only this controller writes it while it holds the epoch)."""
        data = zl.encode_topic(assignment)
        results = await self._commit_checked(
            [lambda t: t.set_data(zl.topic_path(assignment.topic), data)], epoch_version)
        if isinstance(results[0], Exception):
            raise results[0]

    async def write_admin_reassignments(self, data: bytes | None,
                                        epoch_version: int) -> None:
        """Set /admin/reassign_partitions to `data`, or delete it (None)."""
        exists = await self.zk.exists(zl.REASSIGN_PARTITIONS) is not None
        if data is None and not exists:
            return

        def op(t) -> None:
            if data is None:
                t.delete(zl.REASSIGN_PARTITIONS)
            elif exists:
                t.set_data(zl.REASSIGN_PARTITIONS, data)
            else:
                t.create(zl.REASSIGN_PARTITIONS, data)
        results = await self._commit_checked([op], epoch_version)
        if isinstance(results[0], Exception) and not isinstance(
                results[0], (NoNodeError, NodeExistsError)):
            raise results[0]

    async def delete_restart_entry(self, name: str, epoch_version: int) -> None:
        """The last step of handling a /restart_partitions entry: epoch-checked, so a deposed
        controller cannot consume an entry it did not apply; already gone is fine."""
        results = await self._commit_checked(
            [lambda t: t.delete(zl.restart_entry_path(name))], epoch_version)
        if isinstance(results[0], Exception) and not isinstance(results[0], NoNodeError):
            raise results[0]

    async def mark_topic_for_deletion(self, topic: str, epoch_version: int) -> None:
        results = await self._commit_checked(
            [lambda t: t.create(f"{zl.DELETE_TOPICS}/{topic}", b"")], epoch_version)
        if isinstance(results[0], Exception) and not isinstance(results[0], NodeExistsError):
            raise results[0]

    async def delete_topic(self, topic: str, epoch_version: int) -> None:
        """Remove the topic's znodes: partition states, partitions, assignment, config and
        the /admin/delete_topics entry, children first, each transaction epoch-checked."""
        for attempt in range(3):  # noqa: B007
            paths = await self._topic_paths(topic)
            ok = True
            for i in range(0, len(paths), MAX_OPS_PER_TRANSACTION):
                chunk = paths[i:i + MAX_OPS_PER_TRANSACTION]
                results = await self._commit_checked(
                    [lambda t, p=p: t.delete(p) for p in chunk], epoch_version)
                if any(isinstance(r, Exception) and not _is_rollback(r) for r in results):
                    ok = False  # a znode vanished or appeared meanwhile: list again
                    break
            if ok:
                return
        raise RuntimeError(f"could not delete the znodes of topic {topic}")

    async def _topic_paths(self, topic: str) -> list[str]:
        """Existing znodes of a topic, children before parents."""
        paths: list[str] = []
        try:
            parts = await self.zk.get_children(zl.partitions_path(topic))
        except NoNodeError:
            parts = None
        for p in sorted(parts or (), key=lambda x: int(x) if ascii_digits(x) else -1):
            base = f"{zl.partitions_path(topic)}/{p}"
            try:
                paths += [f"{base}/{c}" for c in await self.zk.get_children(base)]
            except NoNodeError:
                continue
            paths.append(base)
        if parts is not None:
            paths.append(zl.partitions_path(topic))
        tail = [zl.topic_path(topic), zl.topic_config_path(topic), f"{zl.DELETE_TOPICS}/{topic}"]
        stats = await asyncio.gather(*(self.zk.exists(p) for p in tail))
        return paths + [p for p, st in zip(tail, stats) if st is not None]


# The MetadataStore methods translate kazoo's errors; helpers such as multi_get keep them (their
# callers here tell one kazoo error from another, e.g. UnimplementedError for no multiRead).
for _name in [n for n in vars(MetadataStore) if not n.startswith("_")]:
    setattr(ZkStore, _name, _translated(getattr(ZkStore, _name)))

"""Sends the leader's ISR changes to the controller (Kafka's AlterPartitionManager).

One AlterPartition in flight per partition: the pending ISR is the replica core's
(``broker.replica_core``: proposals, answers and stale drops are its events, this manager only
queues and sends what it proposes). While it is pending the HW is computed over the larger of
the old and proposed ISR, so a shrink never lets the HW run ahead of a replica that might stay.
Requests from many partitions are batched into one RPC.
Results: NONE applies the controller's ISR and partition epoch; INVALID_UPDATE_VERSION,
FENCED_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER drop the change and wait for the controller's
LeaderAndIsr (Kafka's handling); a transport error or NOT_CONTROLLER retries after backoff.

A proposal is built whole when it is made - new ISR with each member's broker epoch (KIP-903),
leader epoch and partition epoch - and sent as built, also on a retry (Kafka's
AlterPartitionItem carries the LeaderAndIsr built at proposal time). Stamping it with the
epochs current at *send* time let a proposal queued before a LeaderAndIsr pass the
controller's fencing, and grow ZooKeeper's ISR past the leader's. A
proposal whose leader or partition epoch is no longer the partition's is dropped unsent.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc

from broker import replica_core as core
from broker.controller_client import ControllerClient, ControllerUnavailable
from broker.isr import relinquish_isr
from broker.partition import Partition
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb


@dataclass(frozen=True)
class Proposal:
    """One ISR change as built at proposal time."""

    partition: Partition
    new_isr: tuple[int, ...]
    kind: str  # expand | shrink | relinquish | recovered
    leader_epoch: int
    partition_epoch: int
    broker_epochs: tuple[int, ...]  # of new_isr's members, -1 where unknown

    @property
    def stale(self) -> bool:
        p = self.partition
        return (p.leader_epoch, p.partition_epoch) != (self.leader_epoch, self.partition_epoch)


class AlterPartitionManager:
    def __init__(self, broker_id: int, get_broker_epoch, controller: ControllerClient,
                 metrics, events):
        self.broker_id = broker_id
        self._broker_epoch = get_broker_epoch
        self.controller = controller
        self.metrics = metrics
        self.events = events
        self._queue: dict[TopicPartition, Proposal] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="alter-partition")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def mark_recovered(self, p: Partition) -> None:
        """KIP-704: tell the controller this leader finished recovering (same ISR)."""
        self._submit(p, p.isr, "recovered")

    def relinquish(self, p: Partition) -> None:
        """design.md#kip-501: ask the controller for a new leader from the rest of the ISR, with
        this broker moved to the end of the ISR (AlterPartition's relinquish_leadership flag)."""
        if p.pending_isr is not None:
            # an ISR change is in flight; relinquish once it is answered
            self._queue.pop(p.tp, None)
        self._submit(p, relinquish_isr(p.isr, p.local_id), "relinquish")

    def expand_isr(self, p: Partition, follower: int) -> None:
        self._submit(p, p.isr + (follower,), "expand")

    def shrink_isr(self, p: Partition, out: set[int], now_ms: int) -> None:
        new_isr = tuple(b for b in p.isr if b not in out)
        self.events.info("isr_shrink_proposed", partition=str(p.tp), leader_epoch=p.leader_epoch,
                         isr=list(p.isr), new_isr=list(new_isr), out_of_sync=sorted(out))
        self._submit(p, new_isr, "shrink")

    def _submit(self, p: Partition, new_isr: tuple[int, ...], kind: str) -> None:
        p.run(p.core.step(core.IsrChangeWanted(new_isr, kind)), self.enqueue)

    def enqueue(self, p: Partition, e: core.ProposeIsr) -> None:
        """Queue a proposal the core made (its pending ISR is set): sent as built."""
        self._queue[p.tp] = Proposal(p, e.new_isr, e.kind, e.leader_epoch, e.partition_epoch,
                                     e.broker_epochs)
        self._wake.set()

    async def _run(self) -> None:
        backoff = 0.05
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch = {tp: item for tp, item in self._queue.items() if not self._drop_if_stale(item)}
            self._queue = {}
            if not batch:
                continue
            try:
                await self._send(batch)
                backoff = 0.05
            except (grpc.aio.AioRpcError, ControllerUnavailable) as e:
                # Not the controller / unreachable: keep the changes pending and retry.
                for tp, item in batch.items():
                    self._queue.setdefault(tp, item)
                self.events.warning("alter_partition_retry", error=str(e)[:200],
                                    partitions=len(batch))
                await self.controller.wait_for_change(backoff)
                backoff = min(backoff * 2, 1.0)
                self._wake.set()

    def _drop_if_stale(self, item: Proposal) -> bool:
        """A proposal made under an older leader or partition epoch is dropped: the
        LeaderAndIsr that changed the epoch carries the controller's ISR, and the leader
        proposes again from there if it still needs to."""
        if not item.stale:
            return False
        item.partition.core.step(core.ProposalDropped(item.new_isr))
        self.events.info("isr_update_dropped", partition=str(item.partition.tp),
                         kind=item.kind, proposal_leader_epoch=item.leader_epoch,
                         proposal_partition_epoch=item.partition_epoch,
                         leader_epoch=item.partition.leader_epoch,
                         partition_epoch=item.partition.partition_epoch)
        return True

    async def _send(self, batch: dict[TopicPartition, Proposal]) -> None:
        by_topic: dict[str, list] = {}
        for tp, item in batch.items():
            by_topic.setdefault(tp.topic, []).append(pb.AlterPartitionPartition(
                partition=tp.partition, leader_epoch=item.leader_epoch,
                partition_epoch=item.partition_epoch, leader_recovery_state=pb.RECOVERED,
                relinquish_leadership=item.kind == "relinquish",
                new_isr_with_epochs=[pb.BrokerState(broker_id=b, broker_epoch=e)
                                     for b, e in zip(item.new_isr, item.broker_epochs)]))
        req = pb.AlterPartitionRequest(broker_id=self.broker_id,
                                       broker_epoch=self._broker_epoch(),
                                       topics=[pb.AlterPartitionTopic(topic=t, partitions=ps)
                                               for t, ps in by_topic.items()])
        resp = await self.controller.stub().AlterPartition(req, timeout=10)
        for t in resp.topics:
            for r in t.partitions:
                tp = TopicPartition(t.topic, r.partition)
                item = batch.get(tp)
                if item is None:
                    continue
                self._apply(item, r)

    def _apply(self, item: Proposal, r) -> None:
        p = item.partition
        effects = p.core.step(core.AlterPartitionAnswer(
            item.new_isr, item.kind, item.stale, item.broker_epochs, r.error_code, r.leader_id,
            r.leader_epoch, tuple(r.isr), r.partition_epoch, r.leader_recovery_state,
            tuple(r.elr), p.log_end_offset, p.high_watermark))
        for e in effects:
            if not isinstance(e, core.LogEvent):
                continue
            if e.name == "leadership_relinquished":
                self.metrics.leadership_relinquished.inc()
            elif e.name == "isr_update_failed":
                self.metrics.failed_isr_updates.inc()
            elif e.name == "isr_expand":
                self.metrics.isr_expands.inc()
            elif e.name == "isr_shrink":
                self.metrics.isr_shrinks.inc()
            fields = dict(e.fields)
            if e.name in ("isr_expand", "isr_shrink"):
                fields["hw"] = p.high_watermark  # before the answer moves it
            (self.events.warning if e.warning else self.events.info)(
                e.name, partition=str(p.tp), **fields)
        p.run(effects)

"""The replica manager's periodic tasks: isr-expiration (shrinks the ISR through AlterPartition), the
recovery-point/HW checkpoints, and retention.

One of ``broker.replica_manager.ReplicaManager``'s parts (composed, not a mixin sharing undeclared state), handed what it
reads - the partitions, the log manager, the AlterPartition manager, the clock and its settings
- not the manager. The cluster simulation builds one over its own partitions.
"""  # noqa: E501

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.storage.errors import KafkaStorageError
from common.names import TopicPartition

if TYPE_CHECKING:
    from broker.alter_partition import AlterPartitionManager
    from broker.partition import Partition
    from broker.storage.log_manager import LogManager


class ReplicaBackground:
    def __init__(self, partitions: dict[TopicPartition, Partition], log_manager: LogManager,
                 alter_partition: Callable[[], AlterPartitionManager | None], events,
                 clock: Callable[[], int], *, lag_max_ms: int, pending_reads_in_sync: bool,
                 hw_checkpoint_interval_ms: int, retention_check_interval_ms: int):
        """``clock``: wall milliseconds (follower fetch times); ``alter_partition()``: where
        shrink proposals go, as the replica manager holds it at the time (none: no ISR
        change); the intervals are replica.high.watermark.checkpoint.interval.ms and
        log.retention.check.interval.ms."""
        self.partitions = partitions
        self.log_manager = log_manager
        self.alter_partition = alter_partition
        self.events = events
        self.clock = clock
        self.lag_max_ms = lag_max_ms
        self.pending_reads_in_sync = pending_reads_in_sync
        self.hw_checkpoint_interval_ms = hw_checkpoint_interval_ms
        self.retention_check_interval_ms = retention_check_interval_ms

    async def isr_expiration_loop(self) -> None:
        """Kafka's isr-expiration task, every replica.lag.time.max.ms / 2."""
        interval = max(0.05, self.lag_max_ms / 2000)
        while True:
            await asyncio.sleep(interval)
            self.maybe_shrink_isr()

    def maybe_shrink_isr(self) -> None:
        now = self.clock()
        for p in list(self.partitions.values()):
            p.refused_expansions.clear()  # refused followers may be proposed once a round
            out = p.out_of_sync(now, self.lag_max_ms, self.pending_reads_in_sync)
            alter = self.alter_partition()
            if out and alter is not None:
                alter.shrink_isr(p, out, now)

    async def checkpoint_loop(self) -> None:
        interval = self.hw_checkpoint_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self.checkpoint()

    async def checkpoint(self) -> None:
        for d in self.log_manager.online_dirs:
            try:
                await self.log_manager.run_in_dir(d, self.log_manager.checkpoint, d)
            except KafkaStorageError as e:
                self.events.error("checkpoint_failed", log_dir=d.path, error=str(e))

    async def retention_loop(self) -> None:
        interval = self.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            deleted = {}
            for d in self.log_manager.online_dirs:
                try:
                    deleted.update(await self.log_manager.run_in_dir(
                        d, self.log_manager.cleanup, d))
                except KafkaStorageError as e:
                    self.events.error("retention_failed", log_dir=e.log_dir, error=str(e))
            for tp, bases in deleted.items():
                self.events.info("segments_deleted", partition=str(tp), base_offsets=bases)

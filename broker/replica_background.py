"""The replica manager's periodic tasks: isr-expiration (shrinks the ISR through AlterPartition), the
recovery-point/HW checkpoints, and retention.

A part of ``broker.replica_manager.ReplicaManager`` (split by family); it
runs on the ReplicaManager's own state (``partitions``, ``log_manager``, ``events``, ...).
"""  # noqa: E501

from __future__ import annotations

import asyncio

from broker.storage.errors import KafkaStorageError


class ReplicaBackgroundTasks:
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
            if out and self.alter_partition is not None:
                self.alter_partition.shrink_isr(p, out, now)

    async def checkpoint_loop(self) -> None:
        interval = self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000
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
        interval = self.config["log.retention.check.interval.ms"] / 1000
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

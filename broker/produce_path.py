"""Produce as leader: admission (fencing.produce_error), the append on the log dir's executor, and
Kafka's DelayedProduce for acks=all (delayed_produce.produce_wait).

A part of ``broker.replica_manager.ReplicaManager`` (split by family); it
runs on the ReplicaManager's own state (``partitions``, ``log_manager``, ``events``, ...).
"""

from __future__ import annotations

import asyncio

from broker import delayed_produce, fencing
from broker.delayed_produce import ERROR_CODES, ProduceWait
from broker.partition import Partition
from broker.replica_types import (
    ProduceResult,
)
from broker.storage.errors import KafkaStorageError
from broker.storage.log import RecordTooLargeError
from broker.storage.log_validator import RecordValidationError
from common.errors import CorruptRecordError, ErrorCode, RequestError
from common.names import TopicPartition


class ProducePath:
    async def produce(self, acks: int, timeout_ms: int,
                      entries: list[tuple[TopicPartition, bytes]]) -> list[ProduceResult]:
        refused = fencing.acks_error(acks)
        if refused is not None:
            raise RequestError(refused, f"acks must be -1, 0 or 1, got {acks}")
        self.metrics.produce_requests.inc()
        appended = await asyncio.gather(*(self._append(tp, records, acks)
                                          for tp, records in entries))
        if acks != -1:
            return [r for r, _ in appended]
        deadline = self.monotonic() + timeout_ms / 1000
        return list(await asyncio.gather(*(self._await_replication(tp, res, end, deadline)
                                           for (tp, _), (res, end) in zip(entries, appended))))

    async def _append(self, tp: TopicPartition, records: bytes, acks: int
                      ) -> tuple[ProduceResult, tuple[int, int]]:
        if tp in self.offline_replicas:
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, self._lost_message(tp)), (-1, -1)
        p = self._online_replica(tp)
        refused = fencing.produce_error(p, tp in self.metadata.partitions, acks)
        if refused is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return ProduceResult(refused, f"unknown topic or partition {tp}"), (-1, -1)
        if refused is ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return ProduceResult(refused, f"this broker has no replica of {tp}" if p is None
                                 else f"broker {self.broker_id} is not the leader of {tp}"
                                 ), (-1, -1)
        if refused is not None:
            return ProduceResult(refused, f"the ISR of {tp} {list(p.isr)} is smaller than "
                                          f"min.insync.replicas={p.min_isr}"), (-1, -1)
        epoch = p.leader_epoch
        try:
            info = await self.log_manager.run(tp, p.log.append_as_leader, records, epoch)
        except RecordValidationError as e:  # Kafka's per-record errors (record_errors)
            return ProduceResult(e.error_code, str(e), record_errors=e.record_errors), (-1, -1)
        except (CorruptRecordError, RecordTooLargeError) as e:
            return ProduceResult(e.error_code, str(e)), (-1, -1)
        except KafkaStorageError as e:
            self.events.error("append_failed", partition=str(tp), log_dir=e.log_dir,
                              error=str(e))
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, str(e)), (-1, -1)
        self.metrics.bytes_in.inc(info.valid_bytes)
        p.data.notify()
        p.maybe_advance_hw()
        return (ProduceResult(ErrorCode.NONE, "", info.first_offset, p.log.log_start_offset),
                (epoch, info.last_offset + 1))

    async def _await_replication(self, tp: TopicPartition, res: ProduceResult,
                                 end: tuple[int, int], deadline: float) -> ProduceResult:
        """Kafka's DelayedProduce: wait on the partition's HW notifier while
        ``delayed_produce.produce_wait`` says so."""
        if res.error != ErrorCode.NONE:
            return res
        epoch, end_offset = end
        p = self.partitions.get(tp)
        while True:
            current = p if self.partitions.get(tp) is p else None
            # taken before the check, so that no HW move is missed
            waiter = current.hw_moved.future() if current is not None else None
            remaining = deadline - self.monotonic()
            state = delayed_produce.produce_wait(
                current, epoch, end_offset,
                lambda offset: p.log.epoch_cache.epoch_for_offset(offset), remaining)
            if state is ProduceWait.ACKNOWLEDGED:
                return res
            if state is not ProduceWait.WAIT:
                return ProduceResult(ERROR_CODES[state], _produce_failure(state, tp, p))
            try:
                await asyncio.wait_for(asyncio.shield(waiter), remaining)
            except TimeoutError:
                pass


def _produce_failure(state: ProduceWait, tp: TopicPartition, p: Partition | None) -> str:
    """The message of a failed acks=all produce."""
    if state is ProduceWait.NOT_LEADER:
        return f"leadership of {tp} changed before the records were replicated"
    if state is ProduceWait.TRUNCATED:
        return (f"the records of {tp} were truncated by a leader change before they were "
                f"replicated")
    if state is ProduceWait.ISR_TOO_SMALL:
        return (f"the ISR of {tp} shrank to {list(p.isr)} below "
                f"min.insync.replicas={p.min_isr} after the append")
    return f"records of {tp} were not replicated to the ISR in time"

"""Fetch as leader: followers up to the LEO (their fetch state moves the HW and the ISR,
Partition.on_follower_fetch), consumers up to the HW, long polling (DelayedFetch), the idle short
path, KIP-73's leader throttle and design.md#kip-501's relinquish.

A part of ``broker.replica_manager.ReplicaManager`` (split by family); it
runs on the ReplicaManager's own state (``partitions``, ``log_manager``, ``events``, ...).
"""

from __future__ import annotations

import asyncio

from broker import fencing
from broker import isr as isr_rules
from broker.partition import Partition
from broker.replica_types import (
    FetchPartitionRequest,
    FetchResult,
    _LogRead,
)
from broker.replication_quota import (
    should_throttle,
)
from broker.storage.errors import KafkaStorageError, LogClosedError
from broker.truncation import OUT_OF_RANGE, leader_divergence, leader_end_for_epoch
from common.errors import ErrorCode, OffsetOutOfRangeError
from common.names import TopicPartition


class LeaderFetchPath:
    async def fetch(self, replica_id: int, broker_epoch: int, max_wait_ms: int, min_bytes: int,
                    max_bytes: int, parts: list[FetchPartitionRequest],
                    zero_copy: bool = False) -> list[FetchResult]:
        """Serve a follower (replica_id >= 0: up to the LEO) or consumer (up to the HW) fetch,
        waiting up to max_wait_ms for min_bytes (Kafka's DelayedFetch).

        With ``zero_copy`` each result's records are a FileRegion of the segment file (or
        b""), for a caller that sends them with sendfile and then closes them (the Kafka
        listener); otherwise bytes.

        design.md#kip-501 (``follower.fetch.pending.reads.insync.enable``): a follower's Fetch is
        pending, for each partition it carries that the follower had whole at its previous
        fetch, from now until the whole Fetch is answered - "removed once the respective
        fetch request is completed". The follower cannot send its next Fetch before this one
        is answered, so a partition with nothing to read waits on the request's slowest read
        as long as that read's own partition does (the lab's kip-501 runs: dropping its entry
        once it was looked at shrank the slow leader's second partition to the leader alone).
        """
        fetch_id = None
        if replica_id >= 0 and self.pending_reads_in_sync:
            self._fetch_ids += 1
            fetch_id = self._fetch_ids
        try:
            results = await self._fetch(replica_id, broker_epoch, max_wait_ms, min_bytes,
                                        max_bytes, parts, zero_copy, fetch_id)
        finally:
            if fetch_id is not None:  # also on error or when the follower gave up waiting
                self._complete_pending(replica_id, fetch_id, parts)
        if replica_id >= 0:
            self._account_follower_fetch(replica_id, parts, results)
        return results

    def _complete_pending(self, replica_id: int, fetch_id: int,
                          parts: list[FetchPartitionRequest]) -> None:
        """design.md#kip-501: the Fetch is answered; each of its partitions' follower was caught up
        as of now (the completion, not the request). A partition whose follower states were reset
        meanwhile (a new leader epoch) holds no entry for it: nothing to do there."""
        now = self.clock()
        for fp in parts:
            p = self.partitions.get(fp.tp)
            f = p.followers.get(replica_id) if p is not None else None
            if f is not None:
                isr_rules.complete_pending_fetch(f, fetch_id, now)

    def _account_follower_fetch(self, replica_id: int, parts: list[FetchPartitionRequest],
                                results: list[FetchResult]) -> None:
        """What a follower fetch sent, once, as answered (Kafka's KafkaApis records the
        throttled partitions' response size against the leader quota, in-sync or not)."""
        quota = self.quotas.leader
        self._leader_held_back = sum(r.throttled for r in results)
        for fp, r in zip(parts, results):
            if not r.records:
                continue
            if quota.is_throttled(fp.tp):
                quota.record(len(r.records))
                self.metrics.throttled_bytes.labels(direction="leader").inc(len(r.records))
            p = self.partitions.get(fp.tp)
            if p is not None and replica_id in p.adding_replicas:
                self.metrics.reassignment_bytes_out.inc(len(r.records))

    async def _fetch(self, replica_id: int, broker_epoch: int, max_wait_ms: int,
                     min_bytes: int, max_bytes: int, parts: list[FetchPartitionRequest],
                     zero_copy: bool = False, fetch_id: int | None = None
                     ) -> list[FetchResult]:
        deadline = self.monotonic() + max_wait_ms / 1000

        def waiter(tp: TopicPartition) -> asyncio.Future | None:
            p = self.partitions.get(tp)
            if p is None:
                return None
            return p.data.future() if replica_id >= 0 else p.hw_moved.future()

        # Each partition's waiter is taken before its read, so a notification in between is
        # never lost. Several partitions may share a future (tests); the map keeps them all.
        waiting: dict[asyncio.Future, list[int]] = {}
        for i, fp in enumerate(parts):
            fut = waiter(fp.tp)
            if fut is not None:
                waiting.setdefault(fut, []).append(i)
        results = await self._read_all(replica_id, broker_epoch, max_bytes, parts, zero_copy,
                                       fetch_id)
        while True:
            total = sum(len(r.records) for r in results)
            errors = any(r.error != ErrorCode.NONE or r.diverging for r in results)
            remaining = deadline - self.monotonic()
            if total >= min_bytes or errors or remaining <= 0 or not waiting:
                return results
            # Kafka's DelayedFetch is checked whenever *any* of its partitions can add bytes:
            # wake on the first one (the default ALL_COMPLETED parked every multi-partition
            # fetch - each follower fetcher's, each consumer's - until max_wait ran out).
            done, _ = await asyncio.wait(waiting, timeout=remaining,
                                         return_when=asyncio.FIRST_COMPLETED)
            if self.monotonic() >= deadline:
                # one last read at the deadline, like Kafka's forceComplete
                _release(results)
                return await self._read_all(replica_id, broker_epoch, max_bytes, parts,
                                            zero_copy, fetch_id)
            # Read again only the partitions that woke: the others' answers stand. A pass
            # over every partition per wake-up cost a leader of 10k partitions its event loop
            # (each append woke both followers' fetches into 10k reads). A partition
            # that stops leading here notifies both futures (Partition.become_follower), so
            # its NOT_LEADER answer is not held back.
            woken = sorted(i for fut in done for i in waiting.pop(fut))
            for i in woken:
                fut = waiter(parts[i].tp)
                if fut is not None:
                    waiting.setdefault(fut, []).append(i)
            reads = []
            for i in woken:
                r = self._prepare_read(replica_id, broker_epoch, i, parts[i], fetch_id)
                if isinstance(r, FetchResult):
                    results[i] = r
                else:
                    reads.append(r)
            for i, r in await self._read_logs(replica_id, reads, max_bytes,
                                              max(0, max_bytes - total), zero_copy, parts):
                _release([results[i]])
                results[i] = r

    async def _read_all(self, replica_id: int, broker_epoch: int, max_bytes: int,
                        parts: list[FetchPartitionRequest], zero_copy: bool = False,
                        fetch_id: int | None = None) -> list[FetchResult]:
        out: list[FetchResult | None] = []
        reads = []
        now = self.clock() if replica_id >= 0 else 0
        for i, fp in enumerate(parts):
            r = self._idle_follower_fetch(replica_id, broker_epoch, fp, now, fetch_id) \
                if replica_id >= 0 and self.idle_fetch_short_path else None
            if r is None:
                r = self._prepare_read(replica_id, broker_epoch, i, fp, fetch_id)
                if not isinstance(r, FetchResult):
                    reads.append(r)
                    r = None
            out.append(r)
        for i, r in await self._read_logs(replica_id, reads, max_bytes, max_bytes, zero_copy,
                                          parts):
            out[i] = r
        return out  # type: ignore[return-value]  # every slot is filled by now

    def _idle_follower_fetch(self, replica_id: int, broker_epoch: int,
                             fp: FetchPartitionRequest, now_ms: int,
                             fetch_id: int | None = None) -> FetchResult | None:
        """The answer to an in-sync follower that already has the whole log and asks again
        with nothing changed (most partitions of every follower fetch at rest), or None for
        the full path (``_prepare_read``, ``_read_logs``). Under this guard that path provably
        reduces to what is done here:
        - the leader and epoch checks pass (same leader epoch);
        - no divergence: the follower's last epoch is the leader's latest, which ends at the
          LEO = the fetch offset, or it sent none (an empty log is not checked);
        - the same incarnation (broker epoch) of an assigned replica already in the ISR: no
          expansion;
        - its recorded LEO is unchanged: no HW move (checked anyway while HW < LEO);
        - a seed-002 pending entry is recorded as the full path records it (the fetch offset is
          the LEO, so the fetch is eligible), to be completed with the whole Fetch;
        - nothing to read.
        What remains is Kafka's updateFollowerFetchState for a caught-up fetch
        (isr.update_fetch_state). At 10k partitions the full path was most of a leader's
        event loop (docs/profiles/README.md)."""
        tp = fp.tp
        p = self.partitions.get(tp)
        if p is None or not p.is_leader or fp.current_leader_epoch != p.leader_epoch:
            return None
        log = p.log
        if log is None or tp in self.offline_replicas:
            return None
        leo = log.log_end_offset
        f = p.followers.get(replica_id)
        if (fp.fetch_offset != leo or f is None or f.log_end_offset != leo
                or f.broker_epoch != broker_epoch or broker_epoch < 0
                or (fp.last_fetched_epoch is not None and fp.last_fetched_epoch >= 0
                    and fp.last_fetched_epoch != log.latest_epoch)
                or replica_id not in p.isr or replica_id not in p.replicas
                or leo < log.log_start_offset):
            return None
        if fetch_id is not None and isr_rules.pending_fetch_eligible(f, leo):
            f.pending_fetches[fetch_id] = leo
        isr_rules.update_fetch_state(f, leo, fp.log_start_offset, now_ms, leo, broker_epoch)
        if log.high_watermark < leo:
            p.maybe_advance_hw()
        return FetchResult(ErrorCode.NONE, p.high_watermark, log.log_start_offset, b"",
                           leader_id=p.leader_id, leader_epoch=p.leader_epoch)

    def _prepare_read(self, replica_id: int, broker_epoch: int, index: int,
                      fp: FetchPartitionRequest, fetch_id: int | None = None
                      ) -> FetchResult | _LogRead:
        """Everything of one partition's fetch but the log read, on the event loop: the
        leader and epoch checks, divergence, the follower's fetch state (ISR, HW). Returns the
        answer when no read is needed, else the read to do (``_read_logs``)."""
        tp = fp.tp
        if tp in self.offline_replicas:
            return FetchResult(ErrorCode.KAFKA_STORAGE_ERROR, message=self._lost_message(tp))
        p = self._online_replica(tp)
        refused = fencing.leader_request_error(p, tp in self.metadata.partitions,
                                               fp.current_leader_epoch)
        if refused is not None:
            # A replica's NOT_LEADER and FENCED answers name the leader it knows (KIP-320).
            shows_leader = p is not None and refused in (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                         ErrorCode.FENCED_LEADER_EPOCH)
            return FetchResult(refused, leader_id=p.leader_id, leader_epoch=p.leader_epoch) \
                if shows_leader else FetchResult(refused)
        log = p.log
        if replica_id >= 0:
            refused = fencing.follower_fetch_error(replica_id, p.replicas, p.leader_id,
                                                   fp.current_leader_epoch)
            if refused is not None:
                return FetchResult(refused, leader_id=p.leader_id, leader_epoch=p.leader_epoch,
                                   message=f"replica {replica_id} is not a replica of {tp} "
                                           f"(replicas {list(p.replicas)}) in leader epoch "
                                           f"{p.leader_epoch}")
            div = leader_divergence(fp.last_fetched_epoch, fp.fetch_offset,
                                    leader_end_for_epoch(fp.last_fetched_epoch,
                                                         log.end_offset_for_epoch),
                                    log.log_start_offset)
            if div is OUT_OF_RANGE:
                return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, p.high_watermark,
                                   log.log_start_offset, leader_id=p.leader_id,
                                   leader_epoch=p.leader_epoch,
                                   message=f"fetch offset {fp.fetch_offset} with last fetched "
                                           f"epoch {fp.last_fetched_epoch} is out of range for "
                                           f"{tp} (log start {log.log_start_offset})")
            if div is not None:
                return FetchResult(ErrorCode.NONE, p.high_watermark, log.log_start_offset,
                                   diverging=(div.epoch, div.end_offset))
            p.on_follower_fetch(
                replica_id, broker_epoch, fp.fetch_offset, fp.log_start_offset, self.clock(),
                fetch_id, self.alter_partition.enqueue if self.alter_partition else None)
            upper = log.log_end_offset
        else:
            upper = p.high_watermark
        if upper <= fp.fetch_offset <= log.log_end_offset and \
                fp.fetch_offset >= log.log_start_offset:
            # Nothing to read yet - the common case for a caught-up follower or consumer, and
            # for most partitions of a multi-partition Fetch: answer without a read-pool
            # hand-off (one per idle partition per round trip otherwise).
            return FetchResult(ErrorCode.NONE, p.high_watermark, log.log_start_offset, b"",
                               leader_id=p.leader_id, leader_epoch=p.leader_epoch)
        if replica_id >= 0 and log.log_start_offset <= fp.fetch_offset < upper and \
                should_throttle(self.quotas.leader, tp, replica_id in p.isr):
            # KIP-73: an out-of-sync replica of a throttled partition gets no records while
            # the leader quota is exceeded; the fetch waits for its other partitions or for
            # max_wait as usual (Kafka's DelayedFetch skips throttled partitions' bytes).
            return FetchResult(ErrorCode.NONE, p.high_watermark, log.log_start_offset, b"",
                               leader_id=p.leader_id, leader_epoch=p.leader_epoch,
                               throttled=True)
        return _LogRead(index, p, fp.fetch_offset, fp.max_bytes, upper)

    async def _read_logs(self, replica_id: int, reads: list[_LogRead], max_bytes: int,
                         budget: int, zero_copy: bool = False,
                         parts: list[FetchPartitionRequest] = ()
                         ) -> list[tuple[int, FetchResult]]:
        """Do a Fetch's log reads in one executor hand-off, in partition order, within the
        response's ``max_bytes`` of which ``budget`` is left: the first partition with data
        gets at least one whole batch (KIP-74), as in Kafka's readFromLog. Awaiting one
        hand-off per partition in turn made a leader take 10-20 ms to answer a follower
        fetch of 20-30 partitions under acks=all load, and the producer waited it out."""
        if not reads:
            return []
        started = self.monotonic()

        def read_all() -> None:  # executor thread; each read's outcome goes on its _LogRead
            left = budget
            for r in reads:
                try:
                    r.data = (r.log.read_region if zero_copy else r.log.read)(
                        r.fetch_offset, min(r.max_bytes, left), r.upper, left == max_bytes)
                except (OffsetOutOfRangeError, KafkaStorageError, LogClosedError) as e:
                    r.error = e
                r.done_at = self.monotonic()
                left = max(0, left - len(r.data))

        try:
            read = asyncio.get_running_loop().run_in_executor(self._read_pool, read_all)
            if replica_id >= 0 and self.pending_reads_in_sync:
                # design.md#kip-501: give up leadership as soon as serving this follower has taken
                # longer than follower.fetch.process.time.max.ms, not when the read ends - by
                # the clock the serve time is measured with: uvloop's timers (libuv's
                # millisecond clock) fire up to ~1 ms early by it, and a serve time of 499.x ms
                # is not over the limit, so nothing was given up until the read ended.
                limit = started + self.process_time_max_ms / 1000
                done: set = set()
                while not done and (left := limit - self.monotonic()) >= 0:
                    done, _ = await asyncio.wait([read], timeout=left)
                if not done:
                    self._relinquish_held_up(reads, parts,
                                             (self.monotonic() - started) * 1000)
            await read
        finally:
            if replica_id >= 0:
                # Also when the follower gave up waiting (its request was cancelled): a read
                # slower than its fetch timeout is as slow as it gets.
                now = self.monotonic()
                self._relinquish_held_up(
                    reads, parts, max(((r.done_at or now) - started) * 1000 for r in reads))
        return [(r.index, self._read_result(r)) for r in reads]

    def _read_result(self, r: _LogRead) -> FetchResult:
        p, log = r.p, r.log
        if isinstance(r.error, OffsetOutOfRangeError):
            return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, p.high_watermark,
                               log.log_start_offset, leader_id=p.leader_id,
                               leader_epoch=p.leader_epoch, message=str(r.error))
        if isinstance(r.error, LogClosedError):
            # Deleted, reloaded or taken offline under the read (issue 42, defect 3): no I/O
            # error to report, and no bytes - the client retries where the replica is now.
            return FetchResult(r.error.error_code, message=str(r.error))
        if isinstance(r.error, KafkaStorageError):
            self.events.error("read_failed", partition=str(p.tp), log_dir=r.error.log_dir,
                              error=str(r.error))
            # Reads run on their own pool, not the log dir's executor: report them here.
            self.log_dir_failures.report(r.error)
            return FetchResult(ErrorCode.KAFKA_STORAGE_ERROR, message=str(r.error))
        return FetchResult(ErrorCode.NONE, p.high_watermark, log.log_start_offset, r.data,
                           leader_id=p.leader_id, leader_epoch=p.leader_epoch)

    def _relinquish_held_up(self, reads: list[_LogRead], parts: list[FetchPartitionRequest],
                            serve_ms: float) -> None:
        """design.md#kip-501 gives up leadership when "a fetch request takes longer than expected":
        a Fetch is answered as a whole, so every partition it carries that this broker leads is
        held up as long as its slowest read, not only the partitions whose own reads are slow
        (the lab's kip-501 runs: a partition with nothing to read in the request that found the
        disk slow kept its followers waiting on the same answer, and was given up seconds later,
        only once a read of its own was slow). The wait for new data (max_wait) is not counted:
        only the reads' hand-off is."""
        held = {id(r.p): r.p for r in reads}
        for fp in parts:
            p = self.partitions.get(fp.tp)
            if p is not None:
                held.setdefault(id(p), p)
        for p in held.values():
            self._maybe_relinquish(p, serve_ms)

    def _maybe_relinquish(self, p: Partition, serve_ms: float) -> None:
        """design.md#kip-501: a leader too slow to serve its followers hands leadership to a healthy
        in-sync replica (once per leader epoch)."""
        if not isr_rules.should_relinquish(serve_ms, self.process_time_max_ms,
                                           self.pending_reads_in_sync):
            return
        if self.alter_partition is None or not isr_rules.may_relinquish(
                p.is_leader, p.relinquished_epoch, p.leader_epoch, len(p.isr)):
            return
        p.relinquished_epoch = p.leader_epoch
        self.events.warning("slow_follower_fetch", partition=str(p.tp),
                            leader_epoch=p.leader_epoch, serve_ms=round(serve_ms),
                            process_time_max_ms=self.process_time_max_ms, isr=list(p.isr))
        self.alter_partition.relinquish(p)


def _release(results: list[FetchResult]) -> None:
    """Close the file regions of zero-copy answers that are replaced before being sent."""
    for r in results:
        close = getattr(r.records, "close", None)
        if close is not None:
            close()

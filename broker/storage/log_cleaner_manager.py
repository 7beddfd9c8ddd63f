"""Which compacted log is cleaned next, and the state of each (design.md#compaction): Kafka's
LogCleanerManager.

- The choice is ``cleaner_rules``': every log whose cleanup.policy holds compact, that is not
  being cleaned, paused or marked uncleanable, is a candidate; the dirtiest eligible one is
  taken and goes IN_PROGRESS (grabFilthiestCompactedLog).
- ``cleaner-offset-checkpoint`` in each log dir holds, per log, the first offset not cleaned
  yet; written when a round ends (doneCleaning), lowered when a truncation cuts below it
  (maybeTruncateCheckpoint), moved with a KIP-113 swap (alterCheckpointDir), and a dir that
  goes offline is no longer read or written (handleLogDirFailure). Unreadable, it counts as
  empty: every log is cleaned from its start again (Kafka logs the error and goes on).
- ``abort_and_pause`` blocks until a round under way on the log stopped (the cleaner checks
  between reads, and while it waits for its swap: log_cleaner.py), so the log can be
  deleted without a cleaner writing into its dir; ``resume`` undoes one pause.
- A log whose round failed with an error that is not an I/O error is marked uncleanable in
  its dir until it is deleted (markPartitionUncleanable), rather than failing every round.

Thread-safe: one condition guards the states, the checkpoints and the gauges' values; the
cleaner threads, the log dirs' executors and the metrics scrape all call in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from broker.storage import cleaner_rules as rules
from broker.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from broker.storage.cleaner import log_stats
from broker.storage.errors import KafkaStorageError
from broker.storage.fileops import FileOps
from broker.storage.log import CleaningAbortedError
from common.names import TopicPartition

if TYPE_CHECKING:
    from broker.storage.log import Log

_log = logging.getLogger(__name__)


class CleanableLogs(Protocol):
    """What the manager reads of the LogManager."""

    def cleaner_logs(self) -> list[tuple[TopicPartition, Log, str]]:
        """(partition, log, its log dir) of every log in an online dir."""
        ...


class PreCleanStats:
    """Kafka's PreCleanStats: the candidates of the last choice."""

    def __init__(self) -> None:
        self.max_compaction_delay_ms = 0
        self.delayed_partitions = 0
        self.cleanable_partitions = 0

    def update_max_compaction_delay(self, delay_ms: int) -> None:
        self.max_compaction_delay_ms = max(self.max_compaction_delay_ms, delay_ms)
        if delay_ms > 0:
            self.delayed_partitions += 1


class LogCleanerManager:
    def __init__(self, logs: CleanableLogs, log_dirs: list[str], fileops: FileOps,
                 clock: Callable[[], int],
                 report_failure: Callable[[str, BaseException], None] = lambda d, e: None):
        self.logs = logs
        self.clock = clock
        self.report_failure = report_failure
        self._checkpoints = {d: OffsetCheckpointFile(d, CLEANER_OFFSET_CHECKPOINT, fileops)
                             for d in log_dirs}
        self._states: dict[TopicPartition, rules.CleaningState] = {}
        self._uncleanable: dict[str, set[TopicPartition]] = {}
        self._cond = threading.Condition()
        self.dirtiest_ratio = 0.0
        self.time_of_last_run = clock()

    # ------------------------------------------------------------------ checkpoints

    def _read(self, log_dir: str) -> dict[TopicPartition, int]:
        cp = self._checkpoints.get(log_dir)
        if cp is None:
            return {}
        try:
            return cp.read()
        except KafkaStorageError as e:
            _log.error("cannot read %s: %s", cp.path, e)
            return {}

    def all_checkpoints(self) -> dict[TopicPartition, int]:
        with self._cond:
            out: dict[TopicPartition, int] = {}
            for d in list(self._checkpoints):
                out.update(self._read(d))
            return out

    def update_checkpoints(self, log_dir: str, add: tuple[TopicPartition, int] | None = None,
                           remove: TopicPartition | None = None) -> None:
        """Kafka's updateCheckpoints: the dir's file, less the logs gone from it, with ``add``
        set and ``remove`` dropped."""
        with self._cond:
            cp = self._checkpoints.get(log_dir)
            if cp is None:
                return
            live = {tp for tp, _log_, d in self.logs.cleaner_logs() if d == log_dir}
            current = {tp: off for tp, off in self._read(log_dir).items() if tp in live}
            if remove is not None:
                current.pop(remove, None)
            if add is not None:
                current[add[0]] = add[1]
            try:
                cp.write(current)
            except KafkaStorageError as e:
                self.report_failure(log_dir, e)

    def maybe_truncate_checkpoint(self, log_dir: str, tp: TopicPartition, offset: int) -> None:
        """A truncation to ``offset``: the log is clean below it at most."""
        with self._cond:
            if self._read(log_dir).get(tp, 0) > offset:
                self.update_checkpoints(log_dir, add=(tp, offset))

    def alter_checkpoint_dir(self, tp: TopicPartition, source: str, dest: str) -> None:
        """KIP-113's swap moved ``tp`` from ``source`` to ``dest``."""
        with self._cond:
            offset = self._read(source).get(tp)
            if offset is not None:
                self.update_checkpoints(source, remove=tp)
                self.update_checkpoints(dest, add=(tp, offset))
            if tp in self._uncleanable.get(source, set()):
                self._uncleanable[source].discard(tp)
                self._uncleanable.setdefault(dest, set()).add(tp)

    def handle_log_dir_failure(self, log_dir: str) -> None:
        with self._cond:
            self._checkpoints.pop(log_dir, None)

    # ------------------------------------------------------------------ the choice

    def grab_filthiest_compacted_log(self, pre: PreCleanStats | None = None
                                     ) -> tuple[TopicPartition, Log, str,
                                                rules.LogToClean] | None:
        pre = pre or PreCleanStats()
        with self._cond:
            now = self.clock()
            self.time_of_last_run = now
            checkpoints = self.all_checkpoints()
            candidates = {}
            for tp, log, d in self.logs.cleaner_logs():
                if not log.config.compact or tp in self._states or \
                        tp in self._uncleanable.get(d, ()) or log.closed:
                    continue
                try:
                    c, delay = rules.log_to_clean(tp, log_stats(log), checkpoints.get(tp), now)
                except Exception as e:  # noqa: BLE001 - Kafka's LogCleaningException
                    _log.warning("cannot compute the cleanable offsets of %s: %s", tp, e)
                    self._uncleanable.setdefault(d, set()).add(tp)
                    continue
                if c.force_update_checkpoint:
                    self.update_checkpoints(d, add=(tp, c.first_dirty_offset))
                pre.update_max_compaction_delay(delay)
                candidates[tp] = (log, d, c)
            self.dirtiest_ratio, chosen = rules.choose_filthiest(c for _, _, c in
                                                                 candidates.values())
            pre.cleanable_partitions = sum(c.eligible for _, _, c in candidates.values())
            if chosen is None:
                return None
            tp = chosen.key
            self._states[tp] = rules.transition(rules.NONE, "start", tp)
            log, d, _ = candidates[tp]
            return tp, log, d, chosen

    # ------------------------------------------------------------------ states

    def state(self, tp: TopicPartition) -> rules.CleaningState:
        with self._cond:
            return self._states.get(tp, rules.NONE)

    def _set(self, tp: TopicPartition, state: rules.CleaningState) -> None:
        if state == rules.NONE:
            self._states.pop(tp, None)
        else:
            self._states[tp] = state
        self._cond.notify_all()

    def done_cleaning(self, tp: TopicPartition, log_dir: str, end_offset: int | None) -> None:
        """Kafka's doneCleaning: the checkpoint moves to ``end_offset`` (None: the round did
        not finish), unless the round was aborted - then the log stays paused."""
        with self._cond:
            state = self._states.get(tp, rules.NONE)
            nxt = rules.transition(state, "done", tp)
            if state == rules.IN_PROGRESS and end_offset is not None:
                self.update_checkpoints(log_dir, add=(tp, end_offset))
            self._set(tp, nxt)

    def check_aborted(self, tp: TopicPartition) -> None:
        with self._cond:
            if self._states.get(tp) == rules.ABORTED:
                raise CleaningAbortedError(f"the cleaning of {tp} was aborted")

    def abort_and_pause(self, tp: TopicPartition, timeout_s: float | None = None) -> bool:
        """Stop any round on ``tp`` and pause its cleaning; returns once it is paused (False:
        ``timeout_s`` passed first, the round still running)."""
        with self._cond:
            self._set(tp, rules.transition(self._states.get(tp, rules.NONE),
                                           "abort_and_pause", tp))
            return self._cond.wait_for(
                lambda: rules.is_paused(self._states.get(tp, rules.NONE)), timeout_s)

    def resume(self, tp: TopicPartition) -> None:
        with self._cond:
            self._set(tp, rules.transition(self._states.get(tp, rules.NONE), "resume", tp))

    def abort_cleaning(self, tp: TopicPartition, timeout_s: float | None = None) -> None:
        """Kafka's abortCleaning: abort and pause, then resume."""
        with self._cond:
            if self.abort_and_pause(tp, timeout_s):
                self.resume(tp)

    # ------------------------------------------------------------------ uncleanable

    def mark_uncleanable(self, log_dir: str, tp: TopicPartition) -> None:
        with self._cond:
            self._uncleanable.setdefault(log_dir, set()).add(tp)

    def uncleanable(self, log_dir: str) -> set[TopicPartition]:
        with self._cond:
            return set(self._uncleanable.get(log_dir, ()))

    def maintain_uncleanable(self) -> None:
        """Forget uncleanable partitions whose log is gone (maintainUncleanablePartitions)."""
        with self._cond:
            live = {(tp, d) for tp, _log_, d in self.logs.cleaner_logs()}
            for d, tps in list(self._uncleanable.items()):
                tps.intersection_update(tp for tp in tps if (tp, d) in live)
                if not tps:
                    del self._uncleanable[d]

    def uncleanable_bytes(self, log_dir: str) -> int:
        """The uncleanable-bytes gauge: the cleanable bytes of the dir's uncleanable logs."""
        with self._cond:
            tps = self._uncleanable.get(log_dir, set())
            if not tps:
                return 0
            checkpoints = self._read(log_dir)
            now = self.clock()
            total = 0
            for tp, log, d in self.logs.cleaner_logs():
                if d == log_dir and tp in tps:
                    c, _ = rules.log_to_clean(tp, log_stats(log), checkpoints.get(tp), now)
                    total += c.cleanable_bytes
            return total

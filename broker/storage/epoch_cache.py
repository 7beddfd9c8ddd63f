"""The leader-epoch cache: which leader epoch started at which offset (KIP-101, KIP-279).

A follower that becomes a follower (or restarts) asks the leader for the end offset of its own
latest epoch (OffsetForLeaderEpoch) and truncates to it, so two replicas never hold different
records at one offset. The cache is the data behind that answer. Entries are
``(epoch, start_offset)`` with both strictly increasing; every change is persisted to
``leader-epoch-checkpoint`` before the method returns (Kafka writes it synchronously too), except
a become-leader ``assign(..., defer=True)``: that one is written by a later job or by the next
flush (see ``Log.write_deferred_epochs``).
"""

from __future__ import annotations

from collections.abc import Callable

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, entries: list[tuple[int, int]] | None = None,
                 persist: Callable[[list[tuple[int, int]]], None] | None = None):
        self._entries: list[tuple[int, int]] = []
        for epoch, start in entries or []:
            self._assign(epoch, start)
        self._persist = persist
        self.deferred = False  # changed in memory, ``leader-epoch-checkpoint`` not yet written

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def earliest_entry(self) -> tuple[int, int] | None:
        return self._entries[0] if self._entries else None

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0:
            return False
        if self._entries:
            last_epoch, last_start = self._entries[-1]
            if epoch < last_epoch or (epoch == last_epoch and start_offset >= last_start):
                return False  # not newer: Kafka ignores it too
            # An entry whose start is not below the new one's can only be a stale record of an
            # epoch that never wrote anything at those offsets: drop it to keep offsets increasing.
            while self._entries and (self._entries[-1][1] >= start_offset or
                                     self._entries[-1][0] >= epoch):
                self._entries.pop()
        self._entries.append((epoch, start_offset))
        return True

    def assign(self, epoch: int, start_offset: int, defer: bool = False) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (when a batch of a new epoch lands,
        or when this replica becomes its leader). ``defer``: change only the memory and leave
        the file to ``flush_deferred`` -- a broker taking over 10k leaderships must not write
        10k files before it answers LeaderAndIsr."""
        if self._entries and self._entries[-1][0] == epoch:
            return
        if self._assign(epoch, start_offset):
            if defer:
                self.deferred = True
            else:
                self._flush()

    def flush_deferred(self) -> None:
        """Write the file if a deferred change is pending."""
        if self.deferred:
            self._flush()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch answer: (largest epoch <= requested, its end offset).

        The end offset of an epoch is the start offset of the next larger epoch, or the log end
        offset for the latest epoch. If the requested epoch is older than every entry (retention
        or a long outage moved the log start past it) the answer is (requested epoch, start of
        the first entry), as Kafka's LeaderEpochFileCache.endOffsetFor answers: the follower
        truncates to the leader's log start and carries on, where UNDEFINED made it truncate
        nothing and ask again forever.
        """
        if not self._entries or requested_epoch < 0:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self._entries[-1][0]:
            return requested_epoch, log_end_offset
        found = None
        for i, (epoch, _start) in enumerate(self._entries):
            if epoch > requested_epoch:
                if found is None:
                    return requested_epoch, self._entries[0][1]
                return found, self._entries[i][1]
            found = epoch
        # requested epoch is newer than the latest one we know
        return self._entries[-1][0], log_end_offset

    def epoch_for_offset(self, offset: int) -> int:
        result = UNDEFINED_EPOCH
        for epoch, start in self._entries:
            if start > offset:
                break
            result = epoch
        return result

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        kept = [(e, s) for e, s in self._entries if s < end_offset]
        if kept != self._entries:
            self._entries = kept
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to ``start_offset``: older entries end, the one covering it
        now starts there (Kafka's truncateFromStart)."""
        kept: list[tuple[int, int]] = []
        for i, (epoch, start) in enumerate(self._entries):
            nxt = self._entries[i + 1][1] if i + 1 < len(self._entries) else None
            if nxt is not None and nxt <= start_offset:
                continue
            kept.append((epoch, max(start, start_offset)))
        if kept != self._entries:
            self._entries = kept
            self._flush()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._flush()

    def _flush(self) -> None:
        if self._persist is not None:
            self._persist(list(self._entries))
        self.deferred = False

"""Incremental fetch sessions (KIP-227): both sides, as plain state without awaits or sockets.

Without sessions every follower Fetch names every partition the follower fetches from that
leader, and every answer names them all again. At 10k partitions that is 10k entries parsed,
built and walked on both sides per round trip, whether or not any partition has new data: the
steady state that held the controlled-shutdown gap above 3 s (docs/profiles/shutdown.md).

KIP-227's protocol, as in Kafka's FetchSession.scala / FetchSessionHandler.java:
- ``session_epoch`` 0 (INITIAL_EPOCH) is a full fetch that asks the leader for a session; the
  answer carries its ``session_id`` (0: the leader made none; the follower stays full).
- epoch N > 0 with that id is an incremental fetch: ``topics`` holds only the partitions added
  or whose fetch state (offset, leader epoch, last fetched epoch, log start, max bytes) changed
  since the last request; ``forgotten_topics_data`` the ones dropped. The leader fills in the
  rest from the session, serves the whole set exactly as a full fetch, and answers only the
  partitions with something to say: records, an error, a diverging epoch, or a high watermark
  or log start offset other than the one it last sent.
- epoch -1 (FINAL_EPOCH) closes ``session_id``; absent, the fetch is sessionless (consumers).
- an unknown id is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH: the
  follower starts over with a full fetch, as it does after any failed request (it cannot know
  whether the leader saw it).

The leader's cache is bounded by ``max.incremental.fetch.session.cache.slots`` (Kafka's
default 1000); the least recently used session makes room, and its follower's next fetch gets
FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from common.errors import ErrorCode
from common.names import TopicPartition

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: epochs wrap from Int.MaxValue to 1, never to 0."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


# ---------------------------------------------------------------------------- leader side

@dataclass
class CachedPartition:
    """One partition of a session: the follower's last fetch state, and what the leader last
    told it (Kafka's CachedPartition)."""
    request: Any  # the ReplicaManager's FetchPartitionRequest
    high_watermark: int = -1
    log_start_offset: int = -1

    def update_request(self, fp: Any) -> None:
        """The follower's fetch state changed (offset, max bytes, leader epoch, last fetched
        epoch or log start). Its fetcher may have dropped the answer that carried the HW
        recorded here - its state was replaced while that answer was in flight - so the HW is
        forgotten and the partition answered again whatever its HW (Kafka's CachedPartition
        resets its HW to -1 for the same reason after an error)."""
        if fp != self.request:
            self.high_watermark = -1
        self.request = fp


@dataclass
class FetchSession:
    id: int
    replica_id: int
    epoch: int  # the epoch the next incremental request must carry
    partitions: OrderedDict = field(default_factory=OrderedDict)  # tp -> CachedPartition


@dataclass
class FetchContext:
    """What to serve for one request, and how to answer it."""
    parts: list  # every partition to serve, as FetchPartitionRequests
    session: FetchSession | None  # None: sessionless, or the cache had no room
    incremental: bool

    @property
    def session_id(self) -> int:
        return self.session.id if self.session is not None else 0

    def answer(self, results: list) -> list[tuple[Any, Any]]:
        """The (request, result) pairs to put in the response. A full fetch answers every
        partition; an incremental one only those with news (Kafka's
        CachedPartition.maybeUpdateResponseData). Either way the session remembers what it
        sent. Partitions that returned records move to the back of the session, so a
        response size limit does not starve the ones behind them (KIP-227)."""
        s = self.session
        if s is None:
            return list(zip(self.parts, results))
        out = []
        moved = []
        for fp, r in zip(self.parts, results):
            c = s.partitions.get(fp.tp)
            if c is None:  # forgotten while this fetch was parked
                continue
            news = (bool(r.records) or r.error != ErrorCode.NONE or r.diverging is not None
                    or r.high_watermark != c.high_watermark
                    or r.log_start_offset != c.log_start_offset)
            c.high_watermark, c.log_start_offset = r.high_watermark, r.log_start_offset
            if r.error != ErrorCode.NONE:
                # As Kafka: after an error the partition is answered again once it clears,
                # whatever its HW (an OFFSET_OUT_OF_RANGE carries the HW, and the follower's
                # reset may leave it nothing to fetch and no other news).
                c.high_watermark = -1
            if news or not self.incremental:
                out.append((fp, r))
            if r.records:
                moved.append(fp.tp)
        for tp in moved:
            s.partitions.move_to_end(tp)
        return out


class FetchSessionCache:
    """The leader's sessions (Kafka's FetchSessionCache), least recently used first."""

    def __init__(self, max_slots: int = 1000, rng: random.Random | None = None,
                 on_evict: Callable[[], object] = lambda: None):
        self.max_slots = max_slots
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._on_evict = on_evict  # counts evictions (the broker's metric)
        self._rng = rng or random.Random()

    def _new_id(self) -> int:
        while True:
            sid = self._rng.randint(1, 2**31 - 1)
            if sid not in self.sessions:
                return sid

    def new_context(self, replica_id: int, session_id: int, session_epoch: int | None,
                    parts: list, forgotten: Iterable[TopicPartition]
                    ) -> FetchContext | tuple[ErrorCode, str]:
        """Kafka's FetchManager.newContext. ``parts`` are the request's partitions (all of
        them for a full fetch, the added or changed ones for an incremental one). Returns the
        context, or (error, message) for the whole request."""
        if session_epoch is None:
            return FetchContext(list(parts), None, incremental=False)
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id:
                self.sessions.pop(session_id, None)
            if session_epoch == FINAL_EPOCH or self.max_slots <= 0:
                return FetchContext(list(parts), None, incremental=False)
            while len(self.sessions) >= self.max_slots:
                self.sessions.popitem(last=False)  # the least recently used
                self._on_evict()
            s = FetchSession(self._new_id(), replica_id, next_epoch(INITIAL_EPOCH))
            for fp in parts:
                s.partitions[fp.tp] = CachedPartition(fp)
            self.sessions[s.id] = s
            return FetchContext(list(parts), s, incremental=False)
        s = self.sessions.get(session_id)
        if s is None or s.replica_id != replica_id:
            return (ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                    f"fetch session {session_id} not found")
        if session_epoch != s.epoch:
            return (ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                    f"fetch session {session_id} expected epoch {s.epoch}, got {session_epoch}")
        for tp in forgotten:
            s.partitions.pop(tp, None)
        for fp in parts:
            c = s.partitions.get(fp.tp)
            if c is None:
                s.partitions[fp.tp] = CachedPartition(fp)
            else:
                c.update_request(fp)
        s.epoch = next_epoch(s.epoch)
        self.sessions.move_to_end(s.id)
        return FetchContext([c.request for c in s.partitions.values()], s, incremental=True)


# ---------------------------------------------------------------------------- follower side

class FetchSessionHandler:
    """The follower's half (Kafka's FetchSessionHandler), one per fetcher. ``build`` takes the
    fetch state of every partition to fetch now - any comparable value per partition - and
    says which to send; ``on_response`` / ``on_error`` move the session on."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.sent: dict[TopicPartition, Any] = {}  # the leader's view of each partition
        self._pending: dict[TopicPartition, Any] | None = None

    def build(self, wanted: dict[TopicPartition, Any]
              ) -> tuple[int, int, list[TopicPartition], list[TopicPartition]]:
        """(session id, epoch, partitions to send, partitions to forget) for the next
        request."""
        self._pending = dict(wanted)
        if self.session_id == 0 or self.epoch == INITIAL_EPOCH:
            return self.session_id, INITIAL_EPOCH, list(wanted), []
        send = [tp for tp, v in wanted.items() if self.sent.get(tp, _ABSENT) != v]
        forget = [tp for tp in self.sent if tp not in wanted]
        return self.session_id, self.epoch, send, forget

    def on_response(self, error: int, session_id: int) -> None:
        if error in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                     ErrorCode.INVALID_FETCH_SESSION_EPOCH):
            self.session_id, self.epoch, self.sent = 0, INITIAL_EPOCH, {}
            return
        if self.epoch == INITIAL_EPOCH or self.session_id == 0:
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id else INITIAL_EPOCH
        else:
            self.epoch = next_epoch(self.epoch)
        self.sent = self._pending or {}
        self._pending = None

    def on_error(self) -> None:
        """The request failed or was given up: the leader may or may not have applied it, so
        the next one is full (epoch 0 with the old id, which closes it: Kafka's
        nextCloseExistingAttemptNew)."""
        self.epoch = INITIAL_EPOCH
        self.sent = {}
        self._pending = None


_ABSENT = object()


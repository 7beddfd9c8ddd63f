"""Replica fetchers: asyncio tasks that copy the leaders' logs to this follower.

Kafka's ReplicaFetcherManager / ReplicaFetcherThread: one fetcher per (source broker, fetcher
id), the fetcher id chosen per partition from ``num.replica.fetchers``; each fetcher owns its
partitions' fetch state. A fetcher round: one Fetch to the leader for all its ready partitions
(long-polling up to ``replica.fetch.wait.max.ms``), then, in order, per partition: truncate on a
diverging epoch, else append the records and take the leader's HW. Only after appending does it
fetch again — the leader reads the next fetch offset as "this follower has everything below it".

Errors (design.md#kip-461):
- a transport error backs off the whole fetcher (``replica.fetch.backoff.ms``) and marks no
  partition failed;
- corrupt or invalid records from the leader delay that partition and are retried;
- a leader answer such as NOT_LEADER_OR_FOLLOWER delays that partition until a LeaderAndIsr
  changes its state;
- a storage error or any unexpected error while processing a partition's data, truncation or
  offset reset, and FENCED_LEADER_EPOCH at the very epoch this fetcher holds, mark the
  partition *failed*: it is logged, added to the manager's failed-partitions set, dropped from
  the fetch state and the lag metrics, and the fetcher goes on with its other partitions.
  It leaves the set on a higher leader epoch (LeaderAndIsr), StopReplica, or its log dir going
  offline (``ReplicaFetcherManager.unfail``).

Replication throttles (KIP-73): a partition whose replica here is not in sync and that the
topic's ``follower.replication.throttled.replicas`` names for this broker is left out of the
Fetch while the follower quota (``follower.replication.throttled.rate``) is exceeded; the bytes
received on every throttled partition are recorded against it. "In sync" is Kafka's
fetchState.isReplicaInSync (the last answer left no lag) or this broker being in the ISR of the
partition state it was last given: an in-sync replica is never held back. When every ready
partition is held back the fetcher waits ``replica.fetch.backoff.ms`` before looking again
(Kafka's empty-fetch back-off), instead of sending an empty Fetch.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Protocol

import grpc
from prometheus_client.core import GaugeMetricFamily

from broker import truncation
from broker.fetch_failures import FailedPartitions, Outcome, Problem, classify
from broker.fetch_session import FetchSessionHandler
from broker.partition import Partition
from broker.replication_quota import UNLIMITED, ReplicationQuota, should_throttle
from broker.storage.errors import KafkaStorageError
from broker.truncation import Divergence
from common.errors import CorruptRecordError, ErrorCode
from common.grpc_options import REPLICA_FETCHER_OPTIONS, ChannelFactory, insecure_channel
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc

CLIENT_ID = "Replica"


def _stream_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    """A stream failure the unary path would have raised as this status."""
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class LeaderStub(Protocol):
    """What a fetcher calls on its leader (a gRPC ``BrokerStub`` has these, and more)."""

    def Fetch(self, request: pb.FetchRequest, *, timeout: float) -> Awaitable[pb.FetchResponse]:
        ...

    def FetchStream(self) -> grpc.aio.StreamStreamCall:
        ...

    def ListOffsets(self, request: pb.ListOffsetsRequest, *, timeout: float
                    ) -> Awaitable[pb.ListOffsetsResponse]:
        ...


def fetcher_id_for(tp: TopicPartition, num_fetchers: int) -> int:
    return (zlib.crc32(tp.topic.encode()) * 31 + tp.partition) % num_fetchers


@dataclass
class FetchState:
    partition: Partition
    leader_epoch: int
    delayed_until: float = 0.0
    lag: int = 0
    caught_up: bool = False  # the last answer left no lag (Kafka's isReplicaInSync)

    def in_sync(self) -> bool:
        p = self.partition
        return self.caught_up or p.local_id in p.isr


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, fetcher_id: int,
                 address: str | None, monotonic: Callable[[], float] = time.monotonic):
        self.manager = manager
        # Seconds for the back-off of delayed partitions (Kafka's PartitionFetchState
        # delay): the broker's injected clock, so a test or the simulation moves it.
        self.monotonic = monotonic
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.address = address
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._channel: grpc.aio.Channel | None = None
        self._stub: replog_pb2_grpc.BrokerStub | None = None
        # The long-lived FetchStream to the leader (opened on first use, dropped on any
        # failure or abandoned request); a leader that answers UNIMPLEMENTED (an older
        # broker) is fetched from with unary calls until its address changes.
        self._stream: grpc.aio.StreamStreamCall | None = None
        self._unary_only = not manager.fetch_stream_enable
        self._wake = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.held_back = 0  # partitions the follower quota left out of the last fetch
        # KIP-227: this fetcher's session with its leader; a fetch names only what changed.
        self.session = FetchSessionHandler()

    @property
    def name(self) -> str:
        return f"ReplicaFetcher-{self.manager.broker_id}-{self.fetcher_id}-{self.leader_id}"

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def set_address(self, address: str | None) -> None:
        if address != self.address:
            self.address = address
            self._close_channel()
            self._unary_only = not self.manager.fetch_stream_enable
            self._wake.set()

    def _close_channel(self) -> None:
        self._drop_stream()
        if self._channel is not None:
            asyncio.ensure_future(self._channel.close())
        self._channel = self._stub = None

    def _drop_stream(self, stream: grpc.aio.StreamStreamCall | None = None) -> None:
        """Cancel this fetcher's stream (only if it is still ``stream``, when given)."""
        if self._stream is not None and (stream is None or self._stream is stream):
            self._stream.cancel()
            self._stream = None

    async def _fetch_call(self, stub, req: pb.FetchRequest) -> pb.FetchResponse:
        """One Fetch: a request/answer pair on this fetcher's stream, or a unary call. Any
        failure raises grpc.aio.AioRpcError as the unary call does, and drops the stream: the
        request's fate is unknown, so the caller starts the session over (a full fetch)."""
        timeout = self.manager.max_wait_ms / 1000 + 10
        if self._unary_only:
            return await stub.Fetch(req, timeout=timeout)
        fresh = self._stream is None
        if fresh:
            self._stream = stub.FetchStream()
        stream = self._stream
        try:
            if fresh:
                # The leader's response headers first (BrokerServicer.FetchStream sends them at
                # once): an older leader answers UNIMPLEMENTED instead, and a write racing with
                # that answer would fail as INTERNAL with the real status lost, never falling
                # back to unary.
                await asyncio.wait_for(stream.initial_metadata(), timeout)
                if stream.done():
                    await stream.read()  # raises the call's status (UNIMPLEMENTED below)
                    raise _stream_error(grpc.StatusCode.UNAVAILABLE,
                                        "the leader ended the fetch stream")
            await stream.write(req)
            resp = await asyncio.wait_for(stream.read(), timeout)
        except grpc.aio.AioRpcError as e:
            self._drop_stream(stream)
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            # An older leader without FetchStream (a rolling upgrade): unary from now on.
            self._unary_only = True
            self.manager.events.info("fetch_stream_unsupported", fetcher=self.name,
                                     leader=self.leader_id)
            return await stub.Fetch(req, timeout=timeout)
        except TimeoutError:
            self._drop_stream(stream)
            raise _stream_error(grpc.StatusCode.DEADLINE_EXCEEDED,  # noqa: B904
                                "no answer on the fetch stream within the fetch timeout")
        except asyncio.CancelledError:
            self._drop_stream(stream)
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # stopped, or the request abandoned: the stream goes with it
            # The stream itself was cancelled under the request (the leader's address or the
            # transport changed): a failed request, not the end of this fetcher.
            raise _stream_error(grpc.StatusCode.CANCELLED, "the fetch stream was closed") \
                from None
        except BaseException:
            self._drop_stream(stream)
            raise
        if resp is grpc.aio.EOF:
            self._drop_stream(stream)
            raise _stream_error(grpc.StatusCode.UNAVAILABLE, "the leader ended the fetch stream")
        return resp

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass
        self._drop_stream()
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    def _stub_or_none(self):
        if not self.address:
            return None
        if self._stub is None:
            if self.manager.stub_factory is not None:
                self._stub = self.manager.stub_factory(self.leader_id, self.address)
            else:
                self._channel = self.manager.channel_factory(self.address,
                                                             REPLICA_FETCHER_OPTIONS)
                self._stub = replog_pb2_grpc.BrokerStub(self._channel)
        return self._stub

    async def _run(self) -> None:
        m = self.manager
        backoff = m.backoff_s
        # design.md#kip-461: a fetcher whose partitions have all failed (or been removed) shuts
        # down. Kafka instead leaves such a thread idle and reaps it later in
        # shutdownIdleFetcherThreads; an asyncio task costs nothing to recreate.
        while self.partitions:
            now = self.monotonic()
            ready = {tp: s for tp, s in self.partitions.items() if s.delayed_until <= now}
            held = {tp for tp, s in ready.items()
                    if should_throttle(m.quota, tp, s.in_sync())}
            self.held_back = len(held)
            ready = {tp: s for tp, s in ready.items() if tp not in held}
            stub = self._stub_or_none()
            if not ready or stub is None:
                # Only partitions still delayed set the wake-up; held-back ones are looked
                # at again after the back-off (the quota's rate falls as time passes).
                wait = min((s.delayed_until for s in self.partitions.values()
                            if s.delayed_until > now), default=now + backoff) - now
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), max(0.01, min(wait, backoff)))
                except TimeoutError:
                    pass
                continue
            req = self.build_request(ready)
            try:
                resp = await self._fetch_unless_woken(stub, req, ready, held)
                if resp is None:
                    # Partitions joined (or left backoff): fetch again with them. The leader
                    # may have applied the abandoned request, so the session starts over.
                    self.session.on_error()
                    continue
            except grpc.aio.AioRpcError as e:
                # Transport error: the whole fetcher waits, no partition is marked failed.
                self.session.on_error()
                m.events.warning("fetch_failed", fetcher=self.name, leader=self.leader_id,
                                 error=e.code().name, detail=(e.details() or "")[:200])
                self._close_channel()
                await asyncio.sleep(backoff)
                continue
            except asyncio.CancelledError:
                self.session.on_error()
                raise
            except Exception as e:  # noqa: BLE001 - as Kafka's fetcher thread: log, back off
                # Anything else from the transport (a channel or interceptor failing) must not
                # end this task silently, leaving its partitions unreplicated.
                self.session.on_error()
                m.events.error("fetch_failed", fetcher=self.name, leader=self.leader_id,
                               error=f"{type(e).__name__}: {e}"[:300])
                self._close_channel()
                await asyncio.sleep(backoff)
                continue
            await self.handle_response(resp, ready)
        m._fetcher_idle(self)

    async def handle_response(self, resp: pb.FetchResponse,
                              ready: dict[TopicPartition, FetchState]) -> None:
        """One Fetch answer for the partitions of ``ready`` (the request was built from them):
        the session moves on, then each partition's data is processed in the answer's order.
        ``_run`` awaits it after each round trip; the cluster simulation calls it with the
        answer its network delivers (docs/simulation.md)."""
        m = self.manager
        self.session.on_response(resp.error_code, resp.session_id)
        if resp.error_code != ErrorCode.NONE:
            # FETCH_SESSION_ID_NOT_FOUND (the leader restarted, or evicted the session)
            # or INVALID_FETCH_SESSION_EPOCH: the next fetch is a full one, at once.
            m.events.info("fetch_session_reset", fetcher=self.name, leader=self.leader_id,
                          error=_name(resp.error_code))
            return
        items = []
        for t in resp.responses:
            for r in t.partitions:
                tp = TopicPartition(t.topic, r.partition)
                s = self.partitions.get(tp)
                if s is None or s is not ready.get(tp) or \
                        s.partition.leader_epoch != s.leader_epoch:
                    continue  # removed or re-assigned while the fetch was in flight
                items.append((tp, s, r))
        # Every partition's append is queued before any is awaited: one executor hand-off
        # per log dir per round trip, not one per partition in turn.
        appends = {tp: self._queue_append(tp, s, r) for tp, s, r in items
                   if r.error_code == ErrorCode.NONE and r.records
                   and not r.HasField("diverging_epoch")}
        for tp, s, r in items:
            await self._process(tp, s, r, appends.get(tp))

    async def _fetch_unless_woken(self, stub, req: pb.FetchRequest,
                                  ready: dict[TopicPartition, FetchState],
                                  held: Collection[TopicPartition] = ()):
        """One Fetch, given up (None) when this fetcher gains partitions or one of its delayed
        partitions becomes ready: the leader parks a Fetch up to replica.fetch.wait.max.ms,
        and partitions that joined meanwhile - a new leader's, after a controlled shutdown
        moved leadership - would wait that long for their first fetch. Partitions
        held back by the follower quota wait for the next round (KIP-73): they must not cut
        the long poll short, or a fetcher with a throttled partition would spin."""
        self._wake.clear()
        loop = asyncio.get_running_loop()
        delayed = [s.delayed_until for tp, s in self.partitions.items()
                   if tp not in ready and tp not in held]
        timer = loop.call_at(loop.time() + max(0.0, min(delayed) - self.monotonic()),
                             self._wake.set) if delayed else None
        woken = asyncio.ensure_future(self._wake.wait())
        fetched = asyncio.ensure_future(self._fetch_call(stub, req))
        # A request given up may still end in an error after it was abandoned: retrieved here.
        fetched.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            await asyncio.wait({fetched, woken}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            fetched.cancel()  # stopped: the call in flight goes too
            raise
        finally:
            woken.cancel()
            if timer is not None:
                timer.cancel()
        if fetched.done():
            return fetched.result()
        fetched.cancel()  # abandoned: a unary call is cancelled, a stream dropped
        try:
            await fetched
        except grpc.aio.AioRpcError:
            pass
        except asyncio.CancelledError:
            # The call's own cancellation is expected; this fetcher's (stop()) must go on.
            # Swallowed, it left the fetcher looping and the broker's shutdown waiting on it
            # forever (the soak's controlled-shutdown hang).
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
        return None

    def build_request(self, ready: dict[TopicPartition, FetchState]) -> pb.FetchRequest:
        m = self.manager
        # Each partition's fetch state as the leader would cache it (KIP-227): only those
        # that differ from the last request's go on the wire in an incremental fetch.
        wanted = {}
        for tp, s in ready.items():
            log = s.partition.log
            wanted[tp] = (log.log_end_offset, s.leader_epoch, log.latest_epoch,
                          log.log_start_offset)
        session_id, epoch, send, forget = self.session.build(wanted)
        req = pb.FetchRequest(
            replica_state=pb.BrokerState(broker_id=m.broker_id, broker_epoch=m.broker_epoch()),
            max_wait_ms=m.max_wait_ms, min_bytes=m.min_bytes, max_bytes=m.response_max_bytes,
            session_id=session_id, session_epoch=epoch)
        topics: dict[str, pb.FetchTopic] = {}
        for tp in send:
            fetch_offset, leader_epoch, latest_epoch, log_start = wanted[tp]
            t = topics.get(tp.topic)
            if t is None:
                t = topics[tp.topic] = req.topics.add(topic=tp.topic)
            fp = t.partitions.add(partition=tp.partition, current_leader_epoch=leader_epoch,
                                  fetch_offset=fetch_offset, log_start_offset=log_start,
                                  partition_max_bytes=m.partition_max_bytes)
            if latest_epoch >= 0:
                fp.last_fetched_epoch = latest_epoch
        forgotten: dict[str, pb.ForgottenTopic] = {}
        for tp in forget:
            t = forgotten.get(tp.topic)
            if t is None:
                t = forgotten[tp.topic] = req.forgotten_topics_data.add(topic=tp.topic)
            t.partitions.append(tp.partition)
        return req

    def _queue_append(self, tp: TopicPartition, s: FetchState, r) -> asyncio.Future:
        """Queue the follower append of ``r``'s records on the log dir's executor; errors
        (the dir went offline) are delivered through the future, to ``_process``."""
        log = s.partition.log
        try:
            return self.manager.log_manager.submit(tp, log.append_as_follower, r.records)
        except Exception as e:  # noqa: BLE001 - handed to _process, which classifies it
            fut = asyncio.get_running_loop().create_future()
            fut.set_exception(e)
            return fut

    async def _process(self, tp: TopicPartition, s: FetchState, r,
                       append: asyncio.Future | None = None) -> None:
        m = self.manager
        p = s.partition
        log = p.log
        if not self.still_following(tp, s, log):
            # An earlier partition of this response was awaited meanwhile, and a LeaderAndIsr
            # or StopReplica changed this one: its answer (a divergence to truncate to, a HW)
            # is from a leader it no longer follows. A queued append has run; that is all.
            return
        problem, detail, log_dir = Problem.NONE, "", None
        error_code = r.error_code
        try:
            if r.error_code == ErrorCode.NONE:
                if r.HasField("diverging_epoch"):
                    await self._truncate(tp, s, Divergence(r.diverging_epoch.epoch,
                                                           r.diverging_epoch.end_offset))
                    return
                if append is not None:  # queued by _run for every response with records
                    info = await append
                    m.record_received(tp, p, info.valid_bytes)
                    p.data.notify()
                    if not self.still_following(tp, s, log):
                        # A LeaderAndIsr arrived during the append: the partition may lead
                        # now, and this (old) leader's HW must not move its HW.
                        return
                leo = log.log_end_offset
                new_hw = min(r.high_watermark, leo)
                if new_hw != log.high_watermark:
                    log.high_watermark = new_hw
                    p.hw_moved.notify()
                s.lag = max(0, r.high_watermark - leo)
                s.caught_up = s.lag == 0
                if r.log_start_offset > log.log_start_offset:
                    # KIP-107: the leader's log start (moved by DeleteRecords) moves ours,
                    # as ReplicaFetcherThread's maybeIncrementLogStartOffset
                    await m.log_manager.run(tp, log.increment_log_start_offset,
                                            min(r.log_start_offset, log.high_watermark))
            elif r.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                await self._reset_offset(tp, s)
        except _ListOffsetsRefused as e:
            # The leader's answer to the offset reset, classified as a Fetch answer is
            # (Kafka's handleOutOfRangeError): FENCED_LEADER_EPOCH at the epoch fetched at
            # fails the partition until a newer LeaderAndIsr (onPartitionFenced); any other
            # (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, ...) delays it, the leader having
            # moved on. It is no local storage error: treated as one, a leadership change
            # racing the reset left the partition failed until the next epoch.
            error_code, detail = e.code, f"ListOffsets: {_name(e.code)}"
        except CorruptRecordError as e:
            problem, detail = Problem.CORRUPT_RECORDS, str(e)
        except KafkaStorageError as e:
            problem, detail, log_dir = Problem.STORAGE, str(e), e.log_dir
        except (asyncio.CancelledError, grpc.aio.AioRpcError):
            raise
        except Exception as e:  # noqa: BLE001 - KIP-461: one partition must not stop the rest
            problem, detail = Problem.UNEXPECTED, f"{type(e).__name__}: {e}"
        outcome = classify(problem, error_code, s.leader_epoch, p.leader_epoch)
        if outcome is Outcome.FAIL_PARTITION:
            m.mark_failed(self, tp, s, detail or _name(error_code), log_dir)
        elif outcome is Outcome.DELAY_PARTITION:
            s.delayed_until = self.monotonic() + m.backoff_s
            m.events.warning("fetch_partition_delayed", partition=str(tp), leader=self.leader_id,
                             leader_epoch=s.leader_epoch,
                             error=detail or _name(error_code))

    def still_following(self, tp: TopicPartition, s: FetchState, log) -> bool:
        """Whether ``s`` is still this fetcher's state for ``tp``, at the epoch it was built
        for, as a follower of the same log: checked after every await, since a LeaderAndIsr
        or StopReplica may have run meanwhile (and by the cluster simulation, which tells the
        replicas that follow the leader they fetch from)."""
        p = s.partition
        return (self.partitions.get(tp) is s and p.leader_epoch == s.leader_epoch
                and p.leader_id == self.leader_id and not p.is_leader and p.log is log)

    async def _truncate(self, tp: TopicPartition, s: FetchState, div: Divergence) -> None:
        m = self.manager
        log = s.partition.log
        own = log.end_offset_for_epoch(div.epoch) if div.epoch >= 0 else (-1, -1)
        decision = truncation.follower_truncation(div, own, log.log_end_offset, log.high_watermark)
        before, before_epoch = log.log_end_offset, log.latest_epoch
        await m.log_manager.run(tp, log.truncate_to, decision.offset)
        m.events.info("truncated", partition=str(tp), leader=self.leader_id,
                      leader_epoch=s.leader_epoch, diverging_epoch=div.epoch,
                      diverging_end_offset=div.end_offset, from_offset=before,
                      to_offset=log.log_end_offset, complete=decision.complete)
        if (log.log_end_offset, log.latest_epoch) == (before, before_epoch):
            # The truncation changed nothing, so the next fetch would carry the same offset
            # and epoch and get the same answer: back off instead of spinning (a
            # hot RPC loop cost every partition of the fetcher its long poll).
            s.delayed_until = self.monotonic() + m.backoff_s

    async def _reset_offset(self, tp: TopicPartition, s: FetchState) -> None:
        """The fetch offset is outside the leader's log: ask the leader for its log start and
        end (ListOffsets as a replica) and truncate to fit (Kafka's handleOutOfRangeError)."""
        m = self.manager
        log = s.partition.log
        stub = self._stub_or_none()
        if stub is None:
            return

        async def offset(ts: int) -> int:
            resp = await stub.ListOffsets(pb.ListOffsetsRequest(replica_id=m.broker_id, topics=[
                pb.ListOffsetsTopic(topic=tp.topic, partitions=[pb.ListOffsetsPartition(
                    partition=tp.partition, current_leader_epoch=s.leader_epoch,
                    timestamp=ts)])]), timeout=10)
            r = resp.topics[0].partitions[0]
            if r.error_code != ErrorCode.NONE:
                raise _ListOffsetsRefused(r.error_code)
            return r.offset
        try:
            # Each RPC is an await: re-check that the partition still follows this leader at
            # this epoch before touching the log, which may lead by now.
            leader_end = await offset(-1)
            if not self.still_following(tp, s, log):
                return
            if log.log_end_offset > leader_end:
                await m.log_manager.run(tp, log.truncate_to, leader_end)
            else:
                leader_start = await offset(-2)
                if not self.still_following(tp, s, log):
                    return
                # Kafka's fetchOffsetAndTruncate: a follower behind the leader's log start
                # starts over there; one within the leader's range whose offset the leader
                # refused (its last epoch is unknown to the leader) cannot be matched
                # batch-by-batch either, so it also re-fetches from the leader's start.
                await m.log_manager.run(tp, log.truncate_fully_and_start_at, leader_start)
            m.events.info("fetch_offset_reset", partition=str(tp), leader=self.leader_id,
                          leo=log.log_end_offset)
        except grpc.aio.AioRpcError:
            s.delayed_until = self.monotonic() + m.backoff_s


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, broker_epoch, config, log_manager, metrics, events,
                 channel_factory: ChannelFactory = insecure_channel,
                 monotonic: Callable[[], float] = time.monotonic,
                 stub_factory: Callable[[int, str], LeaderStub] | None = None):
        """``monotonic``: seconds for partition back-off and the follower quota's rate, handed
        to every fetcher (the replica manager's clock in a simulation). ``stub_factory``: the
        transport seam - a leader's id and address -> the stub its fetcher calls (none: a gRPC
        BrokerStub over ``channel_factory``'s channel; the cluster simulation's is in memory
        and answers at once)."""
        self.broker_id = broker_id
        self.monotonic = monotonic
        self.channel_factory = channel_factory  # the transport to leaders (tests inject one)
        self.stub_factory = stub_factory
        self.broker_epoch = broker_epoch
        self.log_manager = log_manager
        self.closed = False  # shut down: no fetcher starts any more
        self.metrics = metrics
        self.events = events
        self.num_fetchers = config["num.replica.fetchers"]
        self.max_wait_ms = config["replica.fetch.wait.max.ms"]
        self.min_bytes = config["replica.fetch.min.bytes"]
        self.partition_max_bytes = config["replica.fetch.max.bytes"]
        self.response_max_bytes = config["replica.fetch.response.max.bytes"]
        self.backoff_s = config["replica.fetch.backoff.ms"] / 1000
        self.fetch_stream_enable = config["replica.fetch.stream.enable"]
        self.isolate_failures = config["replica.fetcher.isolate.partition.failures"]
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self.addresses: dict[int, str] = {}
        self.failed_partitions = FailedPartitions()
        # KIP-73: the broker's follower quota; the replica manager hands over the one it
        # keeps in step with the configs (unlimited until then).
        self.quota = ReplicationQuota(monotonic, UNLIMITED)
        metrics.throttled_partitions.labels(direction="follower").set_function(
            lambda: sum(f.held_back for f in list(self.fetchers.values())))
        metrics.fetcher_max_lag.labels(clientId=CLIENT_ID).set_function(self.max_lag)
        metrics.failed_partitions.labels(clientId=CLIENT_ID).set_function(
            lambda: len(self.failed_partitions))
        metrics.registry.register(_PerFetcherLag(self))

    def set_fetch_stream(self, enable: bool) -> None:
        """replica.fetch.stream.enable changed (a dynamic broker config): each fetcher's next
        request goes over the new transport."""
        if enable == self.fetch_stream_enable:
            return
        self.fetch_stream_enable = enable
        for f in list(self.fetchers.values()):
            f._unary_only = not enable
            f._drop_stream()
            f._wake.set()  # a parked request is given up and sent again the new way
        self.events.info("fetch_transport_changed", stream=enable)

    def record_received(self, tp: TopicPartition, p: Partition, nbytes: int) -> None:
        """Bytes appended as a follower: replication, and reassignment when this replica is
        being added (KIP-455); on a throttled partition they count against the follower quota
        whether or not the replica is in sync (Kafka's processPartitionData)."""
        self.metrics.replication_bytes_in.inc(nbytes)
        if self.quota.is_throttled(tp):
            self.quota.record(nbytes)
            self.metrics.throttled_bytes.labels(direction="follower").inc(nbytes)
        if p.local_id in p.adding_replicas:
            self.metrics.reassignment_bytes_in.inc(nbytes)

    def mark_failed(self, f: ReplicaFetcher, tp: TopicPartition, s: FetchState, error: str,
                    log_dir: str | None = None) -> None:
        """KIP-461: stop tracking one partition, keep fetching the others."""
        f.partitions.pop(tp, None)  # out of the fetch state and the lag metrics
        self.failed_partitions.fail(tp, s.leader_epoch)
        self.events.error("fetcher_partition_failed", partition=str(tp), fetcher=f.name,
                          leader=f.leader_id, leader_epoch=s.leader_epoch, log_dir=log_dir,
                          error=error, failed_partitions=len(self.failed_partitions))
        if not self.isolate_failures:
            # replica.fetcher.isolate.partition.failures=false, the pre-design behaviour kept
            # for comparison: before KIP-461 an error in one partition ended the whole
            # AbstractFetcherThread, and every partition it fetched stopped replicating. Each
            # is left failed at its epoch, so the same ways out (a higher leader epoch,
            # StopReplica, its log dir offline) bring it back.
            for other, st in list(f.partitions.items()):
                f.partitions.pop(other)
                self.failed_partitions.fail(other, st.leader_epoch)
                self.events.error("fetcher_partition_failed", partition=str(other),
                                  fetcher=f.name, leader=f.leader_id,
                                  leader_epoch=st.leader_epoch, log_dir=None,
                                  error=f"fetcher stopped by {tp}'s failure: {error}"[:300],
                                  failed_partitions=len(self.failed_partitions))

    def on_leader_and_isr(self, tp: TopicPartition, leader_epoch: int) -> None:
        if self.failed_partitions.on_leader_and_isr(tp, leader_epoch):
            self._unfailed(tp, f"leader epoch {leader_epoch}")

    def on_stop_replica(self, tp: TopicPartition) -> None:
        if self.failed_partitions.on_stop_replica(tp):
            self._unfailed(tp, "StopReplica")

    def on_log_dir_offline(self, tps) -> None:
        for tp in self.failed_partitions.on_log_dir_offline(tps):
            self._unfailed(tp, "log dir offline")

    def _unfailed(self, tp: TopicPartition, reason: str) -> None:
        self.events.info("fetcher_partition_unfailed", partition=str(tp), reason=reason,
                         failed_partitions=len(self.failed_partitions))

    def max_lag(self) -> float:
        return max((s.lag for f in list(self.fetchers.values())
                    for s in list(f.partitions.values())), default=0)

    def update_endpoints(self, brokers) -> None:
        self.addresses.update({b: e.address for b, e in brokers.items()})
        for (leader, _), f in self.fetchers.items():
            f.set_address(self.addresses.get(leader))

    def add_partitions(self, parts: dict[TopicPartition, Partition], live_leaders) -> None:
        if self.closed:
            # A LeaderAndIsr answered during shutdown (the server serves until the fetchers
            # have stopped) must not start a fetcher: nothing would stop it, and its appends
            # raced the logs' close (EBADF after a 10k-partition controlled shutdown).
            return
        for b, e in live_leaders.items():
            self.addresses[b] = f"{e.host}:{e.port}"
        for tp, p in parts.items():
            f = self.track(tp, p)
            f._wake.set()
            if f.task is None or f.task.done():
                f.start()
            else:
                f.set_address(self.addresses.get(p.leader_id))

    def track(self, tp: TopicPartition, p: Partition) -> ReplicaFetcher:
        """Fetch ``tp`` from its leader at its leader epoch: a new fetch state in the fetcher
        for (leader, fetcher id), made if needed - not started (``add_partitions`` starts it;
        the cluster simulation drives its requests and answers itself)."""
        key = (p.leader_id, fetcher_id_for(tp, self.num_fetchers))
        f = self.fetchers.get(key)
        if f is None:
            f = self.fetchers[key] = ReplicaFetcher(self, p.leader_id, key[1],
                                                    self.addresses.get(p.leader_id),
                                                    self.monotonic)
        f.partitions[tp] = FetchState(p, p.leader_epoch)
        return f

    def remove_partitions(self, tps) -> None:
        for f in self.fetchers.values():
            for tp in tps:
                f.partitions.pop(tp, None)

    def _fetcher_idle(self, f: ReplicaFetcher) -> None:
        """A fetcher with no partitions left ends; drop it from the map."""
        if self.fetchers.get((f.leader_id, f.fetcher_id)) is f and not f.partitions:
            del self.fetchers[(f.leader_id, f.fetcher_id)]
            f._close_channel()

    async def shutdown(self) -> None:
        self.closed = True
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        for f in fetchers:
            await f.stop()


class _PerFetcherLag:
    """``replog_replicafetcher_maxlag{clientId, fetcher}``: each fetcher's largest partition
    lag (Kafka reports lag per fetcher thread and partition; the manager-level MaxLag is
    kafka_server_replicafetchermanager_maxlag)."""

    def __init__(self, manager: ReplicaFetcherManager):
        self.manager = manager

    def collect(self):
        g = GaugeMetricFamily("replog_replicafetcher_maxlag",
                              "largest lag (messages) among one fetcher's partitions",
                              labels=["clientId", "fetcher"])
        for f in list(self.manager.fetchers.values()):
            g.add_metric([CLIENT_ID, f.name],
                         max((s.lag for s in list(f.partitions.values())), default=0))
        yield g

    def describe(self):
        return []


class _ListOffsetsRefused(Exception):
    """The leader answered the offset reset's ListOffsets with an error code."""

    def __init__(self, code: int):
        super().__init__(_name(code))
        self.code = code


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)

"""A Kafka-protocol listener: unmodified Kafka clients (kafka-python, librdkafka, kcat) produce
to and consume from a replog broker over the same replica manager as the gRPC API.

Phase 1 of the wire protocol (docs/kafka-protocol.md says what is served and what is left):
ApiVersions, Metadata, Produce, Fetch (KIP-320 leader epochs, KIP-227 sessions through the
broker's FetchSessionCache), ListOffsets and OffsetForLeaderEpoch. Replication and the
controller's requests stay on gRPC; this module only translates, as broker/servicer.py does:
every decision is broker/apis/' (over the replica manager and the metadata cache).

Connection rules, as Kafka's SocketServer/Processor:
- frames are a 4-byte size then the request; a size above ``socket.request.max.bytes`` (or
  negative) closes the connection before anything is read (Kafka's InvalidReceiveException);
- requests on one connection are answered one at a time, in order (Kafka mutes a channel while
  its request is in flight), so a client's pipelined requests get their answers in order;
- a request that cannot be parsed, an API key replog does not serve or a version out of range
  closes that connection only (Kafka: InvalidRequestException "Received request api key ...
  which is not enabled"), except ApiVersions, whose unknown versions get KIP-511's v0 answer:
  UNSUPPORTED_VERSION listing the ApiVersions versions served, so the client steps down;
- Produce with acks=0 gets no answer; if it failed, the connection is closed so the producer
  refreshes its metadata (Kafka's KafkaApis.handleProduceRequest).

TLS (a listener mapped to SSL in ``listener.security.protocol.map``): the server is started with
an ``ssl.SSLContext`` (common/security/tls.py builds it, client auth per ``ssl.client.auth``);
each connection's principal is built once from its peer certificate and set in
``current_kafka_principal`` for every request the connection sends. Fetch answers are read
into memory instead of sent with ``sendfile``: the bytes must pass through TLS, and Kafka too
gives up zero-copy on an SSL channel (SslTransportLayer.transferFrom).

Authorization (``authorizer``, common/security/authorizer.py; None allows everything) is
KafkaApis', and lives in broker/apis/ with the rest of what each API does, shared with the
gRPC servicer (docs/kafka-protocol.md, "The API layer"): this module and broker/kafka_*.py
decode a request, call broker/apis/ with the connection's principal (``api_context``), and
encode the answer. The admin APIs are checked there before they are forwarded (the broker
forwards under its own principal, so the client's is checked here).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import ssl
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from broker import (
    kafka_acl_apis,
    kafka_admin,
    kafka_config_apis,
    kafka_create_partitions,
    kafka_delete_records,
    kafka_unserved,
)
from broker.apis import fetch as apis_fetch
from broker.apis import metadata as apis_metadata
from broker.apis import offsets as apis_offsets
from broker.apis import produce as apis_produce
from broker.apis.context import ApiContext
from broker.auto_topic_creation import AutoTopicCreation
from broker.config_manager import ConfigManager
from broker.controller_client import ControllerClient
from broker.group import kafka_apis as group_apis
from broker.kafka_connections import (
    ConnectionQuotas,
    ConnectionSettings,
    RequestMemoryPool,
    seconds,
)
from broker.replica_manager import ReplicaManager
from broker.replica_types import FetchPartitionRequest
from common.errors import ErrorCode
from common.kafka_protocol import limits
from common.kafka_protocol.api import APIS, ApiKey
from common.kafka_protocol.generated import api_versions_response as av
from common.kafka_protocol.generated import fetch_response as fr
from common.kafka_protocol.generated import list_offsets_response as lo
from common.kafka_protocol.generated import metadata_response as mr
from common.kafka_protocol.generated import offset_for_leader_epoch_response as olr
from common.kafka_protocol.generated import produce_response as pr
from common.kafka_protocol.headers import RequestHeader, read_request_header, response_header
from common.kafka_protocol.primitives import ProtocolError, Reader, uuid_bytes
from common.names import TopicPartition
from common.security.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
)
from common.security.authorizer import ALLOW_ALL, Requester
from common.security.principal import (
    PrincipalBuilder,
    SslAuthenticationFailed,
    current_kafka_principal,
)

UNSUPPORTED_VERSION = 35  # Kafka's Errors.UNSUPPORTED_VERSION
DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes
DECODE_OFF_LOOP_BYTES = 8 * 1024  # larger request bodies are decoded on a worker thread
DECODE_THREADS = 2
# The address of the Kafka connection a request arrived on, set with its principal (Kafka's
# RequestContext.clientAddress): ACLs may name hosts.
current_kafka_client_host: ContextVar[str] = ContextVar("current_kafka_client_host", default="")
# The APIs whose handlers take and return the generated classes; the others (the admin,
# config, ACL, DeleteRecords and unserved modules) still read the request's to_dict form,
# converted where it is decoded (off the loop for a large one), and return dicts that the
# codec's from_dict types; what they decide is broker/apis/' either way, typed there.
_TYPED_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH,
                         ApiKey.LIST_OFFSETS, ApiKey.OFFSET_FOR_LEADER_EPOCH})


class _Close(Exception):
    """Close this connection (after logging why)."""


class KafkaListener:
    """One listener whose protocol is Kafka's. ``listener`` is its name: the Metadata answer
    gives every broker's endpoint of the same name, as Kafka does per listener (KIP-103)."""

    def __init__(self, rm: ReplicaManager, broker_id: int, listener: str, host: str, port: int,
                 events: Any, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, *,
                 controller: ControllerClient | None = None,
                 configs: ConfigManager | None = None,
                 ssl_context: ssl.SSLContext | None = None,
                 principal_builder: PrincipalBuilder | None = None, authorizer=None,
                 auto_topics: AutoTopicCreation | None = None,
                 connections: ConnectionSettings | None = None, groups=None):
        self.rm = rm
        self.groups = groups  # the broker's GroupCoordinator (broker/group/kafka_apis.py)
        # SocketServer's bounds: per-ip connections, idle expiry, queued bytes, slow senders
        self.connection_settings = connections or ConnectionSettings()
        self.quotas = ConnectionQuotas(self.connection_settings)
        self.request_memory = RequestMemoryPool(
            self.connection_settings.queued_max_request_bytes)
        # the broker's one (shared with its gRPC Metadata), or this listener's own
        self.auto_topics = auto_topics or AutoTopicCreation(
            controller, rm.config if rm is not None else None)
        self.authorizer = authorizer or ALLOW_ALL
        self.ssl_context = ssl_context  # None: PLAINTEXT
        # the principal of each connection, from its peer certificate (ANONYMOUS without one)
        self.principal_builder = principal_builder or PrincipalBuilder()
        self.controller = controller  # admin APIs are forwarded to the active controller
        self.configs = configs  # DescribeConfigs / IncrementalAlterConfigs
        self.broker_id = broker_id
        self.listener = listener
        self.host = host
        self.port = port
        self.events = events
        self.max_request_bytes = max_request_bytes
        self._server: asyncio.base_events.Server | None = None
        # requests larger than this are decoded off the event loop (issue 42)
        self.decode_off_loop_bytes = DECODE_OFF_LOOP_BYTES
        self.element_budget: Callable[[int], int | None] = limits.element_budget
        self._decode_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._connections: set[asyncio.Task] = set()
        # each takes the generated request class and returns the response class (or None)
        self._handlers: dict[int, Callable[[Any, int], Awaitable[Any]]] = {
            ApiKey.API_VERSIONS: self._api_versions,
            ApiKey.METADATA: self._metadata,
            ApiKey.PRODUCE: self._produce,
            ApiKey.FETCH: self._fetch,
            ApiKey.LIST_OFFSETS: self._list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self._offset_for_leader_epoch,
            # not yet typed (_TYPED_APIS)
            **{k: h for m in (kafka_admin, kafka_create_partitions, kafka_config_apis,
                              kafka_acl_apis, kafka_delete_records, kafka_unserved)
               for k, h in m.handlers(self).items()},
            **group_apis.handlers(self),  # typed; replace kafka_unserved's group answers
        }
        self._on_dicts = frozenset(self._handlers) - _TYPED_APIS - (
            group_apis.API_KEYS if self.groups is not None else frozenset())

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> int:
        """Bind and serve; the bound port (the configured one, or one picked for port 0)."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port,
                                                  reuse_address=True, ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def _decoder(self) -> concurrent.futures.ThreadPoolExecutor:
        """The listener's own decode threads: a hostile frame waits for them, never for the
        default executor the broker's other work uses."""
        if self._decode_pool is None:
            self._decode_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=DECODE_THREADS, thread_name_prefix=f"kafka-decode-{self.listener}")
        return self._decode_pool

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._connections):
            t.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._decode_pool is not None:
            self._decode_pool.shutdown(wait=False, cancel_futures=True)
            self._decode_pool = None
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    # ------------------------------------------------------------------ authorization

    def requester(self) -> Requester:
        """Who sent the request being served: its connection's principal and address."""
        return Requester(current_kafka_principal.get(), current_kafka_client_host.get())

    def api_context(self) -> ApiContext:
        """The API layer's context of the request being served (broker/apis/context.py)."""
        return ApiContext(self.rm, self.broker_id, self.listener, self.requester(),
                          self.authorizer, self.auto_topics, self.configs)

    # ------------------------------------------------------------------ connections

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        peer = writer.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if not self.quotas.accept(address):
            # Kafka's ConnectionQuotas: TooManyConnectionsException, the socket is closed
            self.events.warning("kafka_connection_refused", listener=self.listener,
                                peer=str(peer), reason=f"max.connections.per.ip "
                                f"{self.quotas.limit(address)} reached for {address}")
            writer.close()
            return
        self._connections.add(task)
        current_kafka_client_host.set(address)
        idle = seconds(self.connection_settings.max_idle_ms)
        read_timeout = seconds(self.connection_settings.request_read_timeout_ms)
        try:
            # The TLS handshake is done before this is called: the peer certificate is known.
            ssl_object = writer.get_extra_info("ssl_object")
            try:
                current_kafka_principal.set(self.principal_builder.from_peer_certificate(
                    ssl_object.getpeercert(binary_form=True) if ssl_object is not None
                    else None))
            except SslAuthenticationFailed as e:
                # Kafka closes a connection whose principal cannot be built
                # (DefaultKafkaPrincipalBuilder's NoMatchingRule), one line in its log
                self.events.warning("kafka_authentication_failed", listener=self.listener,
                                    peer=str(peer), reason=str(e)[:300])
                return
            while True:
                try:
                    async with asyncio.timeout(idle):
                        size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
                except asyncio.IncompleteReadError:
                    return  # the client went away between requests
                except TimeoutError:
                    raise _Close(f"no request for connections.max.idle.ms "
                                 f"{self.connection_settings.max_idle_ms}") from None
                if size < 0 or size > self.max_request_bytes:
                    raise _Close(f"request size {size} is larger than socket.request.max.bytes "
                                 f"{self.max_request_bytes}" if size > 0
                                 else f"invalid request size {size}")
                held = await self.request_memory.acquire(size)
                try:
                    try:
                        async with asyncio.timeout(read_timeout):
                            frame = await reader.readexactly(size)
                    except TimeoutError:
                        # a size prefix followed by a trickle (issue 42)
                        raise _Close(f"request of {size} bytes not received within "
                                     f"socket.request.read.timeout.ms "
                                     f"{self.connection_settings.request_read_timeout_ms}"
                                     ) from None
                    chunks = await self._answer(frame)
                finally:
                    self.request_memory.release(held)
                if chunks is None:
                    continue
                try:
                    await send_answer(writer, chunks)
                finally:
                    _close_regions(chunks)
        except _Close as e:
            self.events.warning("kafka_connection_closed", listener=self.listener,
                                peer=str(peer), reason=str(e)[:300])
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # a truncated frame or a reset: nothing to answer
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - one connection's failure never stops the broker
            self.events.error("kafka_request_failed", listener=self.listener, peer=str(peer),
                              error=f"{type(e).__name__}: {e}"[:300])
        finally:
            self._connections.discard(task)
            self.quotas.release(address)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def handle(self, frame: bytes) -> bytes | None:
        """One request frame -> its answer (header and body, without the size), None when the
        request gets no answer (acks=0); raises _Close when the connection must close. The
        answer as bytes (file regions read in): for tests and in-process callers."""
        chunks = await self._answer(frame)
        if chunks is None:
            return None
        try:
            return b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)
        finally:
            _close_regions(chunks)

    async def _answer(self, frame: bytes) -> list | None:
        """``handle``'s answer as chunks: bytes, and the file regions of a Fetch's records."""
        r = Reader(frame)
        try:
            header = read_request_header(r)
        except ProtocolError as e:
            raise _Close(f"unreadable request header: {e}") from None
        api = APIS.get(header.api_key)
        if header.api_key == ApiKey.API_VERSIONS and header.api_version not in api.served:
            return [self._unsupported_api_versions(header)]
        if api is None or header.api_version not in api.served:
            # Kafka's SocketServer: "Received request api key K with version V which is not
            # enabled" -> InvalidRequestException -> the channel is closed.
            raise _Close(f"request api key {header.api_key} with version {header.api_version} "
                         f"is not served on this listener")
        # Issue 42: the element budget bounds the work one request can ask for, and a large
        # frame is decoded on a worker thread (Kafka parses on its request-handler threads,
        # not its network threads), so the loop keeps serving replication, gRPC and the
        # controller meanwhile: the thread gives the GIL back every switch interval.
        budget = self.element_budget(header.api_key)
        large = len(frame) - r.pos > self.decode_off_loop_bytes
        decode = api.request.decode
        if header.api_key in self._on_dicts:
            def decode(r, v, b, codec=api.request):  # noqa: E306 - with the decode it replaces
                return codec.decode(r, v, b).to_dict()
        try:
            if large:
                request = await asyncio.get_running_loop().run_in_executor(
                    self._decoder(), decode, r, header.api_version, budget)
            else:
                request = decode(r, header.api_version, budget)
        except ProtocolError as e:
            raise _Close(f"malformed {api.name} v{header.api_version} request: {e}") from None
        group_apis.current_client_id.set(header.client_id or "")
        body = await self._handlers[header.api_key](request, header.api_version)
        if body is None:
            return None
        head = response_header(header.api_key, header.api_version, header.correlation_id)
        try:
            if large:  # a large request's answer may be as large: encoded off the loop too
                chunks = await asyncio.get_running_loop().run_in_executor(
                    self._decoder(), api.response.encode_chunks, body, header.api_version)
            else:
                chunks = api.response.encode_chunks(body, header.api_version)
        except BaseException:
            _close_regions(_fetch_regions(body))
            raise
        if chunks and isinstance(chunks[0], bytes):
            return [head + chunks[0], *chunks[1:]]
        return [head, *chunks]

    def _unsupported_api_versions(self, header: RequestHeader) -> bytes:
        """KIP-511: an ApiVersions request of a version the broker does not know is answered
        in v0's format (header v0 too) with UNSUPPORTED_VERSION and the ApiVersions range."""
        api = APIS[ApiKey.API_VERSIONS]
        body = av.ApiVersionsResponse(error_code=UNSUPPORTED_VERSION, api_keys=[
            av.ApiVersion(api_key=api.key, min_version=api.served.lo,
                          max_version=api.served.hi)])
        return response_header(api.key, 0, header.correlation_id) + api.response.encode(body, 0)

    # ------------------------------------------------------------------ ApiVersions

    async def _api_versions(self, _req, _version: int) -> av.ApiVersionsResponse:
        return av.ApiVersionsResponse(error_code=0, throttle_time_ms=0, api_keys=[
            av.ApiVersion(api_key=a.key, min_version=a.served.lo, max_version=a.served.hi)
            for a in sorted(APIS.values(), key=lambda a: a.key)])

    # ------------------------------------------------------------------ Metadata

    async def _metadata(self, req, version: int) -> mr.MetadataResponse:
        wanted = req.topics
        every = wanted is None or (version == 0 and not wanted)  # v0: an empty list means all
        r = await apis_metadata.metadata(self.api_context(), apis_metadata.MetadataRequest(
            topics=None if every else [t.name for t in wanted if t.name is not None],
            topic_ids=[] if every else [t.topic_id for t in wanted if t.name is None],
            allow_auto_topic_creation=req.allow_auto_topic_creation,
            include_topic_authorized_operations=version >= 8
            and req.include_topic_authorized_operations,
            include_cluster_authorized_operations=8 <= version <= 10
            and req.include_cluster_authorized_operations))
        topics = []
        for t in r.topics:
            # a topic named null (asked for by id): "" before v12, whose name is not nullable
            out = _metadata_topic(t.name if t.name is not None or version >= 12 else "",
                                  t.error, t.asked_id if t.asked_id is not None
                                  else uuid_bytes(t.topic_id) if t.error == ErrorCode.NONE
                                  else None)
            if t.authorized_operations is not None:
                out.topic_authorized_operations = t.authorized_operations
            out.partitions = [mr.MetadataResponsePartition(
                error_code=int(p.error), partition_index=p.partition, leader_id=p.leader,
                leader_epoch=p.leader_epoch, replica_nodes=p.replicas, isr_nodes=p.isr,
                offline_replicas=p.offline_replicas) for p in t.partitions]
            topics.append(out)
        return mr.MetadataResponse(
            throttle_time_ms=0,
            brokers=[mr.MetadataResponseBroker(node_id=e.broker_id, host=e.host, port=e.port,
                                               rack=e.rack) for e in r.brokers],
            cluster_id=r.cluster_id or None,
            # replog's controller is not a broker, and a Kafka client sends admin requests to
            # the controller id it is given; like a KRaft broker (which forwards them), name a
            # live broker: this one.
            controller_id=self.broker_id if r.controller_id >= 0 else -1,
            topics=topics,
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED
            if r.cluster_authorized_operations is None else r.cluster_authorized_operations,
        )

    # ------------------------------------------------------------------ Produce

    async def _produce(self, req, _version: int) -> pr.ProduceResponse | None:
        answers = await apis_produce.produce(self.api_context(), apis_produce.ProduceRequest(
            req.acks, req.timeout_ms, [(TopicPartition(t.name, p.index), p.records)
                                       for t in req.topic_data for p in t.partition_data]))
        if req.acks == 0:
            if any(a.result.error != ErrorCode.NONE for a in answers):
                raise _Close("an acks=0 produce failed; closing so the producer refreshes "
                             "its metadata (as Kafka does)")
            return None
        by_topic: dict[str, list[pr.PartitionProduceResponse]] = {}
        for a in answers:
            r = a.result
            by_topic.setdefault(a.tp.topic, []).append(pr.PartitionProduceResponse(
                index=a.tp.partition, error_code=int(r.error), base_offset=r.base_offset,
                log_append_time_ms=-1, log_start_offset=r.log_start_offset,
                record_errors=[pr.BatchIndexAndErrorMessage(
                    batch_index=i, batch_index_error_message=m) for i, m in r.record_errors],
                error_message=r.message or None))
        return pr.ProduceResponse(throttle_time_ms=0, responses=[
            pr.TopicProduceResponse(name=t, partition_responses=ps)
            for t, ps in by_topic.items()])

    # ------------------------------------------------------------------ Fetch

    async def _fetch(self, req, version: int) -> fr.FetchResponse:
        parts = []
        for t in req.topics:
            for p in t.partitions:
                cle, lfe = p.current_leader_epoch, p.last_fetched_epoch
                parts.append(FetchPartitionRequest(
                    TopicPartition(t.topic, p.partition), p.fetch_offset,
                    apis_fetch.partition_max_bytes(p.partition_max_bytes),
                    cle if cle >= 0 else None,  # KIP-320: -1 is "no epoch given"
                    lfe if lfe >= 0 else None, p.log_start_offset))
        # replica id -1: a consumer, served up to the HW; replication stays on gRPC. Zero-copy
        # on a plaintext listener: the records are file regions, sent with sendfile by _send;
        # under TLS they are read in (no sendfile through TLS, as in Kafka). Before v7 (no
        # session fields) every fetch is sessionless (KIP-227).
        answer = await apis_fetch.fetch(self.api_context(), apis_fetch.FetchRequest(
            parts, max_wait_ms=max(0, min(req.max_wait_ms, apis_fetch.MAX_WAIT_MS)),
            min_bytes=req.min_bytes, max_bytes=req.max_bytes, session_id=req.session_id,
            session_epoch=req.session_epoch if version >= 7 else None,
            forgotten=[TopicPartition(t.topic, p) for t in req.forgotten_topics_data
                       for p in t.partitions],
            zero_copy=self.ssl_context is None))
        if answer.error:
            return fr.FetchResponse(throttle_time_ms=0, error_code=int(answer.error),
                                    session_id=answer.session_id, responses=[])
        topics: dict[str, list[fr.PartitionData]] = {}
        for a in answer.partitions:
            r = a.result
            out = fr.PartitionData(
                partition_index=a.tp.partition, error_code=int(r.error),
                high_watermark=r.high_watermark, last_stable_offset=r.high_watermark,
                log_start_offset=r.log_start_offset, aborted_transactions=None,
                preferred_read_replica=-1, records=r.records)
            if r.diverging is not None:
                out.diverging_epoch = fr.EpochEndOffset(epoch=r.diverging[0],
                                                        end_offset=r.diverging[1])
            if a.current_leader is not None:
                out.current_leader = fr.LeaderIdAndEpoch(leader_id=a.current_leader[0],
                                                         leader_epoch=a.current_leader[1])
            topics.setdefault(a.tp.topic, []).append(out)
        return fr.FetchResponse(throttle_time_ms=0, error_code=0, session_id=answer.session_id,
                                responses=[fr.FetchableTopicResponse(topic=t, partitions=ps)
                                           for t, ps in topics.items()])

    # ------------------------------------------------------------------ offsets

    async def _list_offsets(self, req, version: int) -> lo.ListOffsetsResponse:
        answers = iter(await apis_offsets.list_offsets(self.api_context(), [
            apis_offsets.ListOffsetsPartition(
                TopicPartition(t.name, p.partition_index), p.timestamp,
                p.current_leader_epoch if p.current_leader_epoch >= 0 else None)
            for t in req.topics for p in t.partitions]))  # as a consumer: up to the HW
        return lo.ListOffsetsResponse(throttle_time_ms=0, topics=[lo.ListOffsetsTopicResponse(
            name=t.name, partitions=[lo.ListOffsetsPartitionResponse(
                partition_index=a.tp.partition, error_code=int(a.error),
                old_style_offsets=[a.offset] if a.offset >= 0 else [],
                timestamp=a.timestamp, offset=a.offset, leader_epoch=a.leader_epoch)
                for a in (next(answers) for _ in t.partitions)])
            for t in req.topics])

    async def _offset_for_leader_epoch(self, req, _version: int
                                       ) -> olr.OffsetForLeaderEpochResponse:
        answers = iter(apis_offsets.offset_for_leader_epoch(self.api_context(), [
            apis_offsets.EpochPartition(
                TopicPartition(t.topic, p.partition), p.leader_epoch,
                p.current_leader_epoch if p.current_leader_epoch >= 0 else None)
            for t in req.topics for p in t.partitions]))
        return olr.OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[
            olr.OffsetForLeaderTopicResult(topic=t.topic, partitions=[olr.EpochEndOffset(
                error_code=int(a.error), partition=a.tp.partition, leader_epoch=a.leader_epoch,
                end_offset=a.end_offset) for a in (next(answers) for _ in t.partitions)])
            for t in req.topics])


async def send_answer(writer: asyncio.StreamWriter, chunks: list) -> None:
        """One answer: its size, then each chunk; a file region goes from the page cache to
        the socket with sendfile, never through Python bytes, as Kafka's
        FileRecords.writeTo (FileChannel.transferTo) does."""
        writer.write(sum(len(c) for c in chunks).to_bytes(4, "big"))
        for c in chunks:
            if isinstance(c, bytes):
                writer.write(c)
                continue
            sent = await _sendfile(writer, c)
            if sent < c.length:
                # Kafka's FileRecords.writeTo: "Size of FileRecords ... has been truncated
                # during write". The size already sent cannot be honoured: close.
                raise _Close(f"segment file truncated while sending {c!r}: {sent} bytes sent")
        await writer.drain()


async def _sendfile(writer: asyncio.StreamWriter, region) -> int:
    """os.sendfile of a region to the connection's socket once the bytes written before it
    have left; the number of bytes sent (short only if the file shrank). asyncio's
    loop.sendfile would do, but uvloop (the broker's loop) does not implement it."""
    transport = writer.transport
    # Write-buffer limit 0: drain() returns only once the transport's buffer is empty, so
    # the region's bytes follow the header on the wire.
    transport.set_write_buffer_limits(0)
    await writer.drain()
    if transport.is_closing():
        raise ConnectionResetError("the connection closed before the records were sent")
    sock = transport.get_extra_info("socket").fileno()
    src = region.file.fileno()
    loop = asyncio.get_running_loop()
    offset, left = region.position, region.length
    watch = None  # a dup of the socket to wait on: the transport owns the socket's own fd
    try:
        while left > 0:
            try:
                n = os.sendfile(sock, src, offset, left)
            except BlockingIOError:
                if watch is None:
                    watch = os.dup(sock)
                writable = loop.create_future()
                loop.add_writer(watch, lambda f=writable: f.done() or f.set_result(None))
                try:
                    await writable
                finally:
                    loop.remove_writer(watch)
                continue
            if n == 0:
                break  # end of file: the segment was truncated below the region
            offset += n
            left -= n
    finally:
        if watch is not None:
            os.close(watch)
    return region.length - left


def _close_regions(chunks) -> None:
    for c in chunks:
        if not isinstance(c, bytes):
            c.close()


def _fetch_regions(body) -> list:
    """The file regions of a Fetch answer's records (closed if its encoding fails)."""
    if not isinstance(body, fr.FetchResponse):
        return []
    return [p.records for t in body.responses for p in t.partitions
            if p.records is not None and not isinstance(p.records, bytes)]


def _metadata_topic(name: str | None, error: ErrorCode, topic_id: bytes | None = None
                    ) -> mr.MetadataResponseTopic:
    out = mr.MetadataResponseTopic(error_code=int(error), name=name, is_internal=False,
                                   partitions=[],
                                   topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
    if topic_id is not None:
        out.topic_id = topic_id
    return out

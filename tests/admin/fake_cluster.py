"""An in-process fake of replog's Broker and Controller services, for client unit tests.

Several grpc.aio servers (one per fake broker, one per fake controller candidate) share one
in-memory cluster state: topics with per-partition logs, leaders, ISRs and configs. Offsets are
assigned the way a leader does (the batch's first 16 bytes rewritten), Fetch long-polls, and
ListOffsets answers -1/-2. Tests steer it: move a leader, make the next N produce calls to a
partition fail with an error code, leave KIP-951's leader hint out of NOT_LEADER_OR_FOLLOWER
answers, kill a broker's server, make a controller candidate inactive.
It implements only what the client uses, with replog's wire conventions (proto convention 1).
"""

from __future__ import annotations

import asyncio
import struct
from collections import defaultdict, deque
from dataclasses import dataclass, field

import grpc
import grpc.aio

from common.errors import ErrorCode
from common.names import validate_topic
from common.records import LOG_OVERHEAD, iter_batches
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc as rpc


@dataclass
class FakePartition:
    leader: int
    replicas: list[int]
    isr: list[int]
    leader_epoch: int = 0
    log: list[tuple[int, bytes]] = field(default_factory=list)  # (base offset, batch)
    next_offset: int = 0
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


@dataclass
class FakeTopic:
    name: str
    topic_id: str
    partitions: list[FakePartition]
    configs: dict[str, str]


class FakeState:
    def __init__(self) -> None:
        self.topics: dict[str, FakeTopic] = {}
        self.brokers: dict[int, str] = {}  # id -> address (live)
        self.controllers: dict[int, str] = {}
        self.active_controller: int | None = None
        self.produce_errors: dict[tuple[str, int], deque[int]] = defaultdict(deque)
        self.produce_calls: list[tuple[int, int]] = []  # (broker id, acks) per request
        self.produce_gate: asyncio.Event | None = None  # Produce answers once it is set
        self.appended = asyncio.Condition()
        self.not_controller_answers = 0  # the next N controller calls answer NOT_CONTROLLER
        self.unknown_to_metadata: set[str] = set()  # topics hidden from Metadata for a while
        self.metadata_answers = 0  # Metadata requests answered, by any broker
        self.hidden_answers = 0  # of those, answers that hid a topic of unknown_to_metadata
        self.configs_unavailable: set[int] = set()  # brokers failing DescribeConfigs UNAVAILABLE
        self.describe_configs_by: list[int] = []  # broker id per DescribeConfigs answered
        # NOT_LEADER_OR_FOLLOWER answers carry KIP-951's current_leader hint (False: a broker
        # that gives none, so the client must ask for metadata)
        self.leader_hints = True
        self._ids = 0

    def new_topic_id(self) -> str:
        self._ids += 1
        return f"FakeTopicId{self._ids:011d}"

    def add_topic(self, name: str, partitions: int, rf: int, configs=None,
                  assignment: dict[int, list[int]] | None = None) -> FakeTopic:
        ids = sorted(self.brokers)
        parts = []
        for p in range(partitions):
            replicas = (assignment[p] if assignment else
                        [ids[(p + i) % len(ids)] for i in range(rf)])
            parts.append(FakePartition(replicas[0], list(replicas), list(replicas)))
        t = FakeTopic(name, self.new_topic_id(), parts, dict(configs or {}))
        self.topics[name] = t
        return t

    def move_leader(self, topic: str, partition: int, leader: int) -> None:
        p = self.topics[topic].partitions[partition]
        p.leader = leader
        p.leader_epoch += 1

    def records(self, topic: str, partition: int) -> bytes:
        return b"".join(b for _, b in self.topics[topic].partitions[partition].log)


async def _abort(context, status: grpc.StatusCode, code: int, message: str):
    await context.abort(status, message, trailing_metadata=(("replog-error-code", str(code)),))


def _endpoint(broker_id: int, address: str) -> pb.BrokerEndpoint:
    host, port = address.rsplit(":", 1)
    return pb.BrokerEndpoint(broker_id=broker_id, host=host, port=int(port))


class FakeBroker(rpc.BrokerServicer):
    def __init__(self, state: FakeState, broker_id: int):
        self.state = state
        self.id = broker_id

    async def Metadata(self, request, context):
        s = self.state
        resp = pb.MetadataResponse(cluster_id="fake-cluster", controller_id=-1)
        for b, addr in sorted(s.brokers.items()):
            resp.brokers.append(_endpoint(b, addr))
        if s.active_controller is not None:
            resp.controller_id = s.active_controller
            resp.controller.CopyFrom(_endpoint(s.active_controller,
                                               s.controllers[s.active_controller]))
        names = sorted(s.topics) if request.all_topics else list(request.topics)
        for name in names:
            t = s.topics.get(name)
            if t is None or name in s.unknown_to_metadata:
                resp.topics.add(topic=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                s.hidden_answers += t is not None
                continue
            mt = resp.topics.add(topic=name, topic_id=t.topic_id)
            if request.include_topic_configs:
                mt.configs.update(t.configs)
            for i, p in enumerate(t.partitions):
                mt.partitions.add(
                    partition=i, leader_id=p.leader, leader_epoch=p.leader_epoch,
                    replicas=p.replicas, isr=p.isr, elr=p.elr, last_known_elr=p.last_known_elr,
                    adding_replicas=p.adding, removing_replicas=p.removing,
                    error_code=ErrorCode.NONE if p.leader >= 0 else
                    ErrorCode.LEADER_NOT_AVAILABLE)
        s.metadata_answers += 1
        return resp

    async def DescribeConfigs(self, request, context):
        # Topic overrides only, as DYNAMIC_TOPIC_CONFIG entries (what `topics describe` reads).
        if self.id in self.state.configs_unavailable:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"broker {self.id} is unreachable")
        self.state.describe_configs_by.append(self.id)
        resp = pb.DescribeConfigsResponse()
        for r in request.resources:
            out = resp.results.add(resource_type=r.resource_type, resource_name=r.resource_name)
            t = self.state.topics.get(r.resource_name)
            if r.resource_type != pb.TOPIC or t is None:
                out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                out.error_message = f"The topic '{r.resource_name}' does not exist."
                continue
            for k, v in sorted(t.configs.items()):
                out.configs.add(name=k, value=v, config_source=pb.DYNAMIC_TOPIC_CONFIG)
        return resp

    async def Produce(self, request, context):
        s = self.state
        if request.acks not in (-1, 0, 1):
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                         ErrorCode.INVALID_REQUIRED_ACKS, f"acks {request.acks}")
        s.produce_calls.append((self.id, request.acks))
        if s.produce_gate is not None:
            await s.produce_gate.wait()
        resp = pb.ProduceResponse()
        for td in request.topic_data:
            tr = resp.responses.add(topic=td.topic)
            t = s.topics.get(td.topic)
            for pd in td.partition_data:
                pr = tr.partition_responses.add(partition=pd.partition, base_offset=-1,
                                                log_append_time_ms=-1)
                if t is None or pd.partition >= len(t.partitions):
                    pr.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                p = t.partitions[pd.partition]
                if p.leader != self.id:
                    pr.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if p.leader >= 0 and s.leader_hints:
                        pr.current_leader.CopyFrom(pb.LeaderAndEpoch(
                            leader_id=p.leader, leader_epoch=p.leader_epoch))
                        resp.node_endpoints.append(_endpoint(p.leader, s.brokers[p.leader]))
                    continue
                errors = s.produce_errors[(td.topic, pd.partition)]
                if errors:
                    pr.error_code = errors.popleft()
                    pr.error_message = f"injected {ErrorCode(pr.error_code).name}"
                    continue
                base = p.next_offset
                buf = bytearray(pd.records)
                for bv in iter_batches(bytes(pd.records)):
                    h = bv.header
                    struct.pack_into(">qii", buf, bv.position, p.next_offset, h.batch_length,
                                     p.leader_epoch)
                    data = bytes(buf[bv.position:bv.position + h.batch_length + LOG_OVERHEAD])
                    p.log.append((p.next_offset, data))
                    p.next_offset += h.last_offset_delta + 1
                pr.base_offset = base if request.acks != 0 else -1
        async with s.appended:
            s.appended.notify_all()
        return resp

    async def Fetch(self, request, context):
        s = self.state
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.max_wait_ms / 1000
        while True:
            resp = pb.FetchResponse()
            total = 0
            for ft in request.topics:
                tr = resp.responses.add(topic=ft.topic)
                t = s.topics.get(ft.topic)
                for fp in ft.partitions:
                    pr = tr.partitions.add(partition=fp.partition)
                    if t is None or fp.partition >= len(t.partitions):
                        pr.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        continue
                    p = t.partitions[fp.partition]
                    if p.leader != self.id:
                        pr.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                        continue
                    pr.high_watermark = p.next_offset
                    if fp.fetch_offset > p.next_offset:
                        pr.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                        continue
                    chunks = []
                    for base, data in p.log:
                        last = base + struct.unpack_from(">i", data, 23)[0]
                        if last >= fp.fetch_offset:
                            chunks.append(data)
                    pr.records = b"".join(chunks)
                    total += len(pr.records)
            if total >= max(request.min_bytes, 1) or loop.time() >= deadline:
                return resp
            async with s.appended:
                try:
                    await asyncio.wait_for(s.appended.wait(), deadline - loop.time())
                except TimeoutError:
                    pass

    async def ListOffsets(self, request, context):
        s = self.state
        resp = pb.ListOffsetsResponse()
        for lt in request.topics:
            tr = resp.topics.add(topic=lt.topic)
            t = s.topics.get(lt.topic)
            for lp in lt.partitions:
                pr = tr.partitions.add(partition=lp.partition, timestamp=-1, offset=-1,
                                       leader_epoch=-1)
                if t is None:
                    pr.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                p = t.partitions[lp.partition]
                if p.leader != self.id:
                    pr.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    continue
                pr.offset = 0 if lp.timestamp == -2 else p.next_offset
        return resp


class FakeController(rpc.ControllerServicer):
    def __init__(self, state: FakeState, controller_id: int):
        self.state = state
        self.id = controller_id

    async def _check_active(self, context):
        s = self.state
        if s.not_controller_answers > 0 or s.active_controller != self.id:
            s.not_controller_answers = max(0, s.not_controller_answers - 1)
            await _abort(context, grpc.StatusCode.FAILED_PRECONDITION, ErrorCode.NOT_CONTROLLER,
                         f"controller {self.id} is not the active controller")

    async def CreateTopics(self, request, context):
        await self._check_active(context)
        s = self.state
        resp = pb.CreateTopicsResponse()
        for ct in request.topics:
            r = resp.topics.add(name=ct.name, num_partitions=-1, replication_factor=-1)
            try:
                validate_topic(ct.name)
            except ValueError as e:
                r.error_code, r.error_message = ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)
                continue
            if ct.name in s.topics:
                r.error_code = ErrorCode.TOPIC_ALREADY_EXISTS
                r.error_message = f"Topic '{ct.name}' already exists."
                continue
            assignment = {a.partition: list(a.broker_ids) for a in ct.assignments} or None
            n = len(assignment) if assignment else (
                ct.num_partitions if ct.HasField("num_partitions") and ct.num_partitions != -1
                else 1)
            rf = len(next(iter(assignment.values()))) if assignment else (
                ct.replication_factor if ct.HasField("replication_factor")
                and ct.replication_factor != -1 else 1)
            if n <= 0:
                r.error_code = ErrorCode.INVALID_PARTITIONS
                r.error_message = "Number of partitions must be larger than 0."
                continue
            if rf > len(s.brokers):
                r.error_code = ErrorCode.INVALID_REPLICATION_FACTOR
                r.error_message = (f"Replication factor: {rf} larger than available brokers: "
                                   f"{len(s.brokers)}.")
                continue
            if request.validate_only:
                continue
            t = s.add_topic(ct.name, n, rf, dict(ct.configs), assignment)
            r.topic_id, r.num_partitions, r.replication_factor = t.topic_id, n, rf
            r.configs.update(t.configs)
        return resp

    async def DeleteTopics(self, request, context):
        await self._check_active(context)
        resp = pb.DeleteTopicsResponse()
        for name in request.topic_names:
            r = resp.responses.add(name=name)
            if self.state.topics.pop(name, None) is None:
                r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return resp

    async def DescribeCluster(self, request, context):
        await self._check_active(context)
        s = self.state
        resp = pb.DescribeClusterResponse(cluster_id="fake-cluster", controller_id=self.id,
                                          controller_epoch=1)
        for b, addr in sorted(s.brokers.items()):
            resp.brokers.append(_endpoint(b, addr))
        resp.controller.CopyFrom(_endpoint(self.id, s.controllers[self.id]))
        return resp


class FakeCluster:
    """``async with FakeCluster(brokers=3) as fc``: servers on free loopback ports."""

    def __init__(self, brokers: int = 3, controllers: int = 1):
        self.state = FakeState()
        self.num_brokers = brokers
        self.num_controllers = controllers
        self.servers: dict[tuple[str, int], grpc.aio.Server] = {}

    async def _serve(self, kind: str, node_id: int, servicer) -> str:
        server = grpc.aio.server()
        if kind == "broker":
            rpc.add_BrokerServicer_to_server(servicer, server)
        else:
            rpc.add_ControllerServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self.servers[(kind, node_id)] = server
        return f"127.0.0.1:{port}"

    async def __aenter__(self) -> FakeCluster:
        for b in range(1, self.num_brokers + 1):
            self.state.brokers[b] = await self._serve("broker", b, FakeBroker(self.state, b))
        for c in range(100, 100 + self.num_controllers):
            self.state.controllers[c] = await self._serve("controller", c,
                                                          FakeController(self.state, c))
        self.state.active_controller = 100
        return self

    async def __aexit__(self, *exc) -> None:
        for server in self.servers.values():
            await server.stop(None)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.state.brokers.values())

    async def kill_broker(self, broker_id: int) -> None:
        """Stop the broker's server and drop it from the live set (as if it died)."""
        await self.servers[("broker", broker_id)].stop(None)
        del self.state.brokers[broker_id]

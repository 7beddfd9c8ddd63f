"""Test doubles for the controller's shell tests: a fake broker (a real gRPC server that
records the controller's requests and fences stale controller/broker epochs the way the
broker contract says), broker registration znodes, config building and polling."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from kazoo.client import KazooClient

from common.config import build_config
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.zk_layout import BrokerRegistration, broker_path, encode_broker
from tests.polling import async_wait_until as wait_for  # noqa: F401  (re-exported)

ERROR_CODE_KEY = "replog-error-code"


def controller_config(zk_hosts: str, controller_id: int, **overrides):
    entries = {"controller.id": str(controller_id), "listeners": "127.0.0.1:0",
               "zookeeper.connect": zk_hosts, "zookeeper.session.timeout.ms": "4000",
               "zookeeper.connection.timeout.ms": "10000"}
    entries.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return build_config([(k, v, "test") for k, v in entries.items()])


class RecordingLog:
    """A structlog-like logger that keeps (event, fields)."""

    def __init__(self):
        self.records: list[tuple[str, dict]] = []

    def info(self, event: str, **kw) -> None:
        self.records.append((event, kw))

    warning = error = info

    def named(self, event: str) -> list[dict]:
        return [kw for e, kw in self.records if e == event]


@dataclass
class Received:
    kind: str
    request: object


@dataclass
class FakeBroker(replog_pb2_grpc.BrokerServicer):
    """Serves LeaderAndIsr / UpdateMetadata / StopReplica, recording them. Rejects a
    controller epoch older than the newest seen (FAILED_PRECONDITION + 11) and a broker epoch
    older than its registration's (FAILED_PRECONDITION + 77), as the broker contract says."""

    broker_id: int
    rack: str | None = None
    server: grpc.aio.Server | None = None
    port: int = 0
    epoch: int = -1
    received: list[Received] = field(default_factory=list)
    rejected: list[Received] = field(default_factory=list)
    max_controller_epoch: int = -1
    stop_replica_error: int = 0
    leader_and_isr_error: int = 0  # refuse every partition of a LeaderAndIsr with this code
    # Refuse this many requests with STALE_BROKER_EPOCH whatever their epoch: a broker that
    # re-registered and has not recorded its new epoch yet.
    lagging_epoch_refusals: int = 0
    # KIP-966 GetReplicaLogInfo answers: (topic, partition) -> (last written epoch, LEO)
    logs: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)

    async def start(self) -> FakeBroker:
        self.server = grpc.aio.server()
        replog_pb2_grpc.add_BrokerServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return self

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(0)

    async def _fence(self, kind: str, request, context) -> None:
        if request.controller_epoch < self.max_controller_epoch:
            self.rejected.append(Received(kind, request))
            context.set_trailing_metadata(((ERROR_CODE_KEY, "11"),))
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "stale controller epoch")
        lagging = self.lagging_epoch_refusals > 0
        self.lagging_epoch_refusals = max(0, self.lagging_epoch_refusals - 1)
        if request.broker_epoch < self.epoch or lagging:
            self.rejected.append(Received(kind, request))
            context.set_trailing_metadata(((ERROR_CODE_KEY, "77"),))
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "stale broker epoch")
        self.max_controller_epoch = request.controller_epoch
        self.received.append(Received(kind, request))

    async def LeaderAndIsr(self, request, context):
        await self._fence("LeaderAndIsr", request, context)
        return pb.LeaderAndIsrResponse(partition_errors=[
            pb.PartitionResult(topic=s.topic, partition=s.partition,
                               error_code=self.leader_and_isr_error)
            for s in request.partition_states if self.leader_and_isr_error])

    async def UpdateMetadata(self, request, context):
        await self._fence("UpdateMetadata", request, context)
        return pb.UpdateMetadataResponse()

    async def StopReplica(self, request, context):
        await self._fence("StopReplica", request, context)
        return pb.StopReplicaResponse(partition_errors=[
            pb.PartitionResult(topic=s.topic, partition=s.partition,
                               error_code=self.stop_replica_error)
            for s in request.partition_states])

    async def GetReplicaLogInfo(self, request, context):
        self.received.append(Received("GetReplicaLogInfo", request))
        out = []
        for t in request.topic_partitions:
            infos = []
            for p in t.partitions:
                log = self.logs.get((t.topic, p))
                infos.append(pb.PartitionLogInfo(
                    partition=p, last_written_leader_epoch=log[0] if log else -1,
                    log_end_offset=log[1] if log else -1,
                    error_code=0 if log else 3))  # UNKNOWN_TOPIC_OR_PARTITION
            out.append(pb.TopicPartitionLogInfo(topic=t.topic, topic_id=t.topic_id,
                                                partition_log_info=infos))
        return pb.GetReplicaLogInfoResponse(broker_epoch=self.epoch,
                                            topic_partition_log_info=out)

    def of(self, kind: str) -> list:
        return [r.request for r in self.received if r.kind == kind]

    def registration(self) -> BrokerRegistration:
        return BrokerRegistration(self.broker_id, "127.0.0.1", self.port, rack=self.rack)


def register(zk: KazooClient, reg: BrokerRegistration) -> int:
    """Create the ephemeral /brokers/ids/<id> with `zk`'s session; returns the broker epoch
    (the znode's czxid)."""
    zk.ensure_path("/brokers/ids")
    zk.create(broker_path(reg.broker_id), encode_broker(reg), ephemeral=True)
    return zk.exists(broker_path(reg.broker_id)).czxid


class BrokerSessions:
    """One kazoo session per registered broker, so a broker "dies" by closing its session."""

    def __init__(self, hosts: str):
        self.hosts = hosts
        self.clients: dict[int, KazooClient] = {}

    def register(self, reg: BrokerRegistration) -> int:
        c = self.clients.get(reg.broker_id)
        if c is None:
            c = self.clients[reg.broker_id] = KazooClient(self.hosts, timeout=10)
            c.start(timeout=15)
        return register(c, reg)

    def kill(self, broker_id: int) -> None:
        c = self.clients.pop(broker_id)
        c.stop()
        c.close()

    def close(self) -> None:
        for b in list(self.clients):
            self.kill(b)

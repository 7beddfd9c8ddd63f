"""In-process brokers for replication tests: a ReplicaManager, LogManager and fetcher manager
per broker behind a real gRPC server, driven by hand-made LeaderAndIsr requests (no
controller)."""

import json

import grpc

from broker.fetcher import ReplicaFetcherManager
from broker.metadata_cache import MetadataCache
from broker.metrics import BrokerMetrics
from broker.replica_manager import ReplicaManager
from broker.servicer import BrokerServicer
from broker.storage.log_manager import LogManager
from common.config import build_config
from common.grpc_options import SERVER_OPTIONS
from common.names import TopicPartition
from common.observability import configure_event_log
from common.records import ProducerRecord, build_batch
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from tests.polling import async_wait_until as wait_until  # noqa: F401  (re-exported)

TP = TopicPartition("t", 0)


class Node:
    def __init__(self, broker_id, tmp_path, fileops=None, overrides=(), channel_factory=None,
                 log_dirs=1, lost_replicas=None, topic_config_loader=None):
        cfg = build_config([("broker.id", str(broker_id), "test"),
                            ("replica.fetch.wait.max.ms", "100", "test"),
                            ("replica.fetch.backoff.ms", "50", "test"),
                            *((k, v, "test") for k, v in overrides)])
        self.id = broker_id
        # log_dirs: how many (under tmp_path/b<id>), or the paths themselves
        dirs = log_dirs if isinstance(log_dirs, list) else [tmp_path / f"b{broker_id}"] \
            if log_dirs == 1 else [tmp_path / f"b{broker_id}" / f"d{i}" for i in range(log_dirs)]
        self.lm = LogManager([str(d) for d in dirs], broker_id, fileops=fileops,
                             lost_replicas=lost_replicas)
        self.lm.startup()
        self.events_path = tmp_path / f"b{broker_id}.json"
        events = configure_event_log(str(self.events_path), "broker", broker=broker_id)
        metrics = BrokerMetrics(broker_id)
        fetchers = ReplicaFetcherManager(broker_id, lambda: self.rm.broker_epoch, cfg, self.lm,
                                         metrics, events,
                                         **({"channel_factory": channel_factory}
                                            if channel_factory is not None else {}))
        self.rm = ReplicaManager(broker_id, cfg, self.lm, MetadataCache(), metrics, events,
                                 topic_config_loader, fetcher_manager=fetchers)
        self.rm.broker_epoch = 100 + broker_id

    def events_logged(self) -> list[dict]:
        return [json.loads(line) for line in self.events_path.read_text().splitlines()]

    async def start(self):
        self.server = grpc.aio.server(options=SERVER_OPTIONS)
        replog_pb2_grpc.add_BrokerServicer_to_server(BrokerServicer(self.rm, self.id),
                                                     self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = replog_pb2_grpc.BrokerStub(self.channel)

    async def stop(self):
        await self.rm.fetcher_manager.shutdown()
        await self.rm.stop_background()  # as BrokerServer.stop: before the logs close
        await self.channel.close()
        await self.server.stop(0)
        self.lm.shutdown()

    def endpoint(self):
        return pb.BrokerEndpoint(broker_id=self.id, host="127.0.0.1", port=self.port)


def leader_and_isr(target, leader, epoch, isr, replicas, nodes, controller_epoch=1,
                   partition_epoch=None, tp=TP, is_new=False):
    return pb.LeaderAndIsrRequest(
        controller_id=0, controller_epoch=controller_epoch, broker_epoch=target.rm.broker_epoch,
        partition_states=[pb.LeaderAndIsrPartitionState(
            topic=tp.topic, partition=tp.partition, controller_epoch=controller_epoch,
            leader=leader, leader_epoch=epoch, isr=isr,
            partition_epoch=epoch if partition_epoch is None else partition_epoch,
            replicas=replicas, is_new=is_new)],
        live_leaders=[n.endpoint() for n in nodes if n.id == leader])


def produce_req(tag, n=5, acks=-1, tp=TP, timeout_ms=5000):
    recs = [ProducerRecord(f"{tag}{i}".encode(), f"value-{tag}{i}".encode()) for i in range(n)]
    return pb.ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[pb.ProduceTopicData(
        topic=tp.topic, partition_data=[pb.ProducePartitionData(
            partition=tp.partition, records=build_batch(recs))])])

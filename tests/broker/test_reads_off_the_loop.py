"""A leader reads its log files off the event loop thread: a slow disk (each read 1.5 s in the
lab's kip-501 runs) may hold up the requests that read, never the whole broker - every
partition, every RPC and the ZooKeeper session run on that one thread.

The log's file operations here note every pread made on a thread that runs an event loop,
while a round of produce, follower fetch, consumer fetch and ListOffsets (latest, earliest, by
time, KIP-734's largest timestamp) runs.
"""

from __future__ import annotations

import asyncio
import traceback

from broker.metadata_cache import MetadataCache
from broker.metrics import BrokerMetrics
from broker.replica_manager import ReplicaManager
from broker.replica_types import FetchPartitionRequest
from broker.servicer import leader_and_isr_request
from broker.storage.fileops import FileOps
from broker.storage.log import MAX_TIMESTAMP
from broker.storage.log_manager import LogManager
from common.config import build_config
from common.names import TopicPartition
from common.observability import configure_event_log
from common.records import ProducerRecord, build_batch
from common.rpc import replog_pb2 as pb

TP = TopicPartition("t", 0)
EARLIEST, LATEST = -2, -1


class LoopThreadReads(FileOps):
    """FileOps noting the stack of each pread made on an event loop's thread."""

    def __init__(self) -> None:
        self.on_loop: list[str] = []

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # an executor thread: where reads belong
        else:
            self.on_loop.append("".join(traceback.format_stack(limit=8)))
        return super().pread(fd, n, offset)


async def test_produce_fetch_and_list_offsets_read_nothing_on_the_event_loop(tmp_path):
    fileops = LoopThreadReads()
    cfg = build_config([("broker.id", "1", "test")])
    lm = LogManager([str(tmp_path / "b1")], 1, fileops=fileops)
    lm.startup()
    events = configure_event_log(str(tmp_path / "b1.json"), "broker", broker=1)
    rm = ReplicaManager(1, cfg, lm, MetadataCache(), BrokerMetrics(1), events)
    rm.broker_epoch = 7
    req = pb.LeaderAndIsrRequest(controller_id=0, controller_epoch=1, broker_epoch=7,
                                 partition_states=[pb.LeaderAndIsrPartitionState(
                                     topic=TP.topic, partition=TP.partition,
                                     controller_epoch=1, leader=1, leader_epoch=0,
                                     partition_epoch=0, isr=[1, 2], replicas=[1, 2])])
    try:
        assert {e for _, e in await rm.leader_and_isr(leader_and_isr_request(req))} == {0}
        for ts in (1000, 2000, 3000):
            r = (await rm.produce(1, 5000, [(TP, build_batch(
                [ProducerRecord(b"k", b"v" * 100, timestamp=ts)]))]))[0]
            assert r.error == 0
        leo = rm.partitions[TP].log.log_end_offset
        # the follower reads it all (the HW moves to the LEO), then a consumer does
        follower = await rm.fetch(2, 11, 0, 1, 1 << 20, [FetchPartitionRequest(TP, 0, 1 << 20,
                                                                               0, 0, 0)])
        assert follower[0].records
        await rm.fetch(2, 11, 0, 1, 1 << 20, [FetchPartitionRequest(TP, leo, 1 << 20, 0, 0, 0)])
        consumer = await rm.fetch(-1, -1, 0, 1, 1 << 20,
                                  [FetchPartitionRequest(TP, 0, 1 << 20, 0, 0, 0)])
        assert consumer[0].records
        found = {ts: await rm.list_offset_and_timestamp(TP, ts, None, -1)
                 for ts in (EARLIEST, LATEST, 1500, MAX_TIMESTAMP)}
        assert found[EARLIEST][2] == 0 and found[LATEST][2] == leo
        assert found[1500][1:3] == (2000, 1)
        assert found[MAX_TIMESTAMP][1:3] == (3000, 2)
        assert fileops.on_loop == [], fileops.on_loop[0]
    finally:
        lm.shutdown()

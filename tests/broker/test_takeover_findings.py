"""What a controlled shutdown of a broker leading 10k partitions found.

1. A broker that becomes leader answers LeaderAndIsr before it writes the new leader
epochs' ``leader-epoch-checkpoint`` files. A controlled shutdown of a broker leading 10k
partitions made the new leaders write 10k files before answering, and the UpdateMetadata queued
behind that answer reached clients seconds late. The start offset is recorded in memory, in the
log dir's job, before the answer; the files follow in chunks, and the next flush syncs them.

The writes are blocked with a real hold on the file operation (FaultInjectingFileOps.hold): the
old code never answered while they were held.

2. The new leaders proposed the shutting-down broker back into the ISR on each of its fetches
(refused: KIP-841), and 3. a LeaderAndIsr answered after the fetchers stopped started a fetcher
that raced the logs' close."""

from __future__ import annotations

import asyncio
import errno

from broker.replica_core import AlterPartitionAnswer
from broker.replica_types import EPOCH_CHECKPOINT_CHUNK, FetchPartitionRequest
from broker.servicer import leader_and_isr_request
from broker.storage.fileops import FaultInjectingFileOps
from broker.storage.log import Log
from common.errors import ErrorCode
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from tests.broker.inprocess import Node, leader_and_isr, wait_until
from tests.storage.helpers import batch

TOPIC = "t"


def _checkpoint(node, tp) -> list[tuple[int, int]]:
    log = node.lm.get_log(tp)
    return log._epoch_checkpoint.read()


def _lead_all(node, tps, epoch):
    """One LeaderAndIsr making ``node`` the sole-ISR leader of ``tps`` at ``epoch``."""
    return pb.LeaderAndIsrRequest(
        controller_id=0, controller_epoch=1, broker_epoch=node.rm.broker_epoch,
        partition_states=[pb.LeaderAndIsrPartitionState(
            topic=tp.topic, partition=tp.partition, controller_epoch=1, leader=node.id,
            leader_epoch=epoch, isr=[node.id], partition_epoch=epoch, replicas=[node.id])
            for tp in tps])


async def test_leader_and_isr_is_answered_while_the_epoch_checkpoints_are_still_unwritten(
        tmp_path):
    fo = FaultInjectingFileOps()
    node = Node(1, tmp_path, fileops=fo)
    await node.start()
    try:
        tps = [TopicPartition(TOPIC, i) for i in range(EPOCH_CHECKPOINT_CHUNK + 3)]
        for tp in tps:
            node.lm.get_or_create_log(tp).append_as_leader(batch(2), 1)
        # Every rename under the log dir blocks: write_file_atomically's rename of the
        # checkpoint's .tmp, and nothing else this LeaderAndIsr needs.
        hold = fo.hold(str(tmp_path / "b1"), ops={"rename"})
        answer = await asyncio.wait_for(
            node.rm.leader_and_isr(leader_and_isr_request(_lead_all(node, tps, 5))), 60)
        assert all(code == 0 for _, code in answer)
        # Answered: the start of epoch 5 is known in memory and to the partition ...
        for tp in tps:
            assert node.lm.get_log(tp).epoch_cache.entries == [(1, 0), (5, 2)]
            assert node.rm.partitions[tp].leader_epoch_start_offset == 2
        # ... while the files are still held, unwritten.
        await wait_until(hold.entered.is_set)
        assert _checkpoint(node, tps[0]) == [(1, 0)]
        hold.release()
        fo.clear()
        await wait_until(lambda: all(_checkpoint(node, tp) == [(1, 0), (5, 2)] for tp in tps))
        assert not any(node.lm.get_log(tp).epoch_cache.deferred for tp in tps)
    finally:
        fo.clear()
        await node.stop()


async def test_an_append_on_the_log_dir_passes_the_remaining_checkpoint_chunks(tmp_path):
    """The files are written a chunk per log-dir job: a produce append queued while the first
    chunk is held runs before the later chunks, not behind all of them."""
    fo = FaultInjectingFileOps()
    node = Node(1, tmp_path, fileops=fo)
    await node.start()
    try:
        tps = [TopicPartition(TOPIC, i) for i in range(3 * EPOCH_CHECKPOINT_CHUNK)]
        for tp in tps:
            node.lm.get_or_create_log(tp)
        hold = fo.hold(str(tmp_path / "b1"), ops={"rename"})
        await node.rm.leader_and_isr(leader_and_isr_request(_lead_all(node, tps, 1)))
        await wait_until(hold.entered.is_set)  # the first chunk's writer is blocked
        last = tps[-1]
        append = asyncio.ensure_future(node.lm.append_as_leader(last, batch(1), 1))
        await asyncio.sleep(0)
        hold.release()
        fo.clear()
        await append
        # The append ran after the first chunk, before the last partition's file was written.
        assert _checkpoint(node, last) == []
        assert node.lm.get_log(last).log_end_offset == 1
        await wait_until(lambda: _checkpoint(node, last) == [(1, 0)])
    finally:
        fo.clear()
        await node.stop()


async def test_a_failed_deferred_checkpoint_write_is_a_storage_failure_as_before(tmp_path):
    """Written after the answer, an EIO still reaches the log dir failure channel; the disk
    probe passes here, so the failure scope takes just the replica offline."""
    fo = FaultInjectingFileOps()
    node = Node(1, tmp_path, fileops=fo)
    await node.start()
    consumer = asyncio.ensure_future(node.rm.log_dir_failure_loop())
    try:
        tp = TopicPartition(TOPIC, 0)
        node.lm.get_or_create_log(tp)
        fo.fail(str(tmp_path / "b1" / "t-0"), errno.EIO, ops={"rename"})
        answer = await node.rm.leader_and_isr(leader_and_isr_request(_lead_all(node, [tp], 1)))
        assert [code for _, code in answer] == [0]

        def logged(name):
            return [e for e in node.events_logged() if e.get("event") == name]
        await wait_until(lambda: logged("log_offline"))
        assert logged("leader_epoch_checkpoint_failed")[0]["partition"] == "t-0"
        assert "EIO" in logged("log_dir_failure")[0]["error"]
        assert logged("log_offline")[0]["partition"] == "t-0"
    finally:
        consumer.cancel()
        fo.clear()
        await node.stop()


def test_deferred_epoch_is_written_and_synced_by_the_flush(tmp_path):
    log = Log.open(str(tmp_path), TopicPartition(TOPIC, 0), needs_recovery=False)
    log.append_as_leader(batch(2), 3)
    log.epoch_cache.assign(4, log.log_end_offset, defer=True)
    assert log._epoch_checkpoint.read() == [(3, 0)]
    log.flush()
    assert log._epoch_checkpoint.read() == [(3, 0), (4, 2)]
    assert not log.epoch_cache.deferred


# test_a_crash_before_the_deferred_write_rebuilds_the_epoch_from_the_batches: in
# tests/storage/test_deferred_epochs.py, reopened from the checkpoints on disk.


def test_a_clean_close_writes_the_deferred_epoch(tmp_path):
    tp = TopicPartition(TOPIC, 0)
    log = Log.open(str(tmp_path), tp, needs_recovery=False)
    log.epoch_cache.assign(2, 0, defer=True)
    log.append_as_leader(batch(1), 2)  # same epoch: no new entry, the file still unwritten
    assert log._epoch_checkpoint.read() == []
    log.close()
    assert Log.open(str(tmp_path), tp, needs_recovery=False).epoch_cache.entries == [(2, 0)]


class _RefusingAlterPartition:
    """Stands in for the AlterPartition manager: records each expansion proposed and answers
    it at once as the controller does for a broker in controlled shutdown (KIP-841:
    INELIGIBLE_REPLICA, recorded against the broker epoch the follower fetched with)."""

    def __init__(self):
        self.expansions: list[int] = []

    def enqueue(self, p, proposal):
        self.expansions.append(proposal.new_isr[-1])
        p.run(p.core.step(AlterPartitionAnswer(
            proposal.new_isr, proposal.kind, False, proposal.broker_epochs,
            ErrorCode.INELIGIBLE_REPLICA, p.leader_id, p.leader_epoch, p.isr, p.partition_epoch,
            p.leader_recovery_state, p.elr, p.log_end_offset, p.high_watermark)))

    def shrink_isr(self, p, out, now_ms):
        raise AssertionError(f"nothing is out of sync here: {sorted(out)}")


async def test_each_isr_expiration_round_clears_refused_expansions(nodes):
    """KIP-841 refusals (broker/isr.expansion_refused) hold a follower back only until the next
    isr-expiration round: nothing waits on a refusal forever. The caught-up follower's fetches
    propose it once, then not while refused, then again after the round."""
    a, _ = nodes
    tp = TopicPartition(TOPIC, 0)
    request = _lead_all(a, [tp], 1)
    request.partition_states[0].replicas.append(2)  # ISR [1], replicas [1, 2]
    await a.rm.leader_and_isr(leader_and_isr_request(request))
    a.rm.alter_partition = controller = _RefusingAlterPartition()

    async def follower_fetch():
        await a.rm.fetch(2, 102, 0, 1, 1 << 20, [FetchPartitionRequest(tp, 0, 1 << 20, 1)])

    await follower_fetch()
    assert controller.expansions == [2]
    for _ in range(3):  # refused at broker epoch 102, which it still fetches with
        await follower_fetch()
    assert controller.expansions == [2]
    a.rm.maybe_shrink_isr()
    await follower_fetch()
    assert controller.expansions == [2, 2]


async def test_a_leader_and_isr_after_fetcher_shutdown_starts_no_fetcher(nodes):
    """A controlled shutdown's last LeaderAndIsr (become follower) can arrive after the
    fetchers were stopped: a fetcher started then ran on, its appends racing the logs' close
    (EBADF on a 10k-partition shutdown)."""
    a, b = nodes
    await a.rm.fetcher_manager.shutdown()
    answer = await a.rm.leader_and_isr(
        leader_and_isr_request(leader_and_isr(a, 2, 1, [1, 2], [1, 2], [a, b])))
    assert [code for _, code in answer] == [0]
    assert a.rm.partitions[TopicPartition(TOPIC, 0)].leader_id == 2
    assert a.rm.fetcher_manager.fetchers == {}

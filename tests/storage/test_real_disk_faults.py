"""Real disk faults under a broker's log dir (design.md#jbod), as root, no mocks:

- a genuine ext4 error: an ext4 image loop-mounted with ``errors=remount-ro``; writing to
  ``/sys/fs/ext4/<loop>/trigger_fs_error`` makes the kernel remount it read-only at once, and
  every write - open files included - fails with EROFS, as on a dying disk;
- a full disk: a log dir on a 2 MB tmpfs, filled until ENOSPC.

The dir goes offline, the broker keeps serving its other dir. Each test first checks that it
can mount; if it cannot (not root, no loop devices, no ext4) it says why and skips - the EIO
variants through the file seam (tests/broker/test_log_dir_failure.py) cover the same handler.
Mounts and loop devices are always removed in the fixtures' teardown.

The last test runs a real broker process whose only dir fails: it exits 1 with one line.
"""

import asyncio
import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.errors import ErrorCode
from common.names import TopicPartition
from common.records import ProducerRecord, build_batch
from common.rpc import replog_pb2 as pb
from harness.local_cluster import free_port
from tests.broker.inprocess import Node, leader_and_isr, produce_req, wait_until

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
REPO = Path(__file__).resolve().parents[2]


def _run(*cmd):
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60)


def _skip_unless_root():
    if os.geteuid() != 0:
        pytest.skip("real disk faults need root (mount, losetup); the EIO seam tests cover it")


def _unmount(mnt: Path) -> None:
    if _run("umount", str(mnt)).returncode != 0:
        _run("umount", "-l", str(mnt))  # something still holds it: detach lazily


@pytest.fixture
def ext4_dir(tmp_path):
    """(mount point, loop device name) of a fresh 64 MB ext4 with errors=remount-ro."""
    _skip_unless_root()
    img, mnt = tmp_path / "disk.img", tmp_path / "ext4"
    mnt.mkdir()
    for cmd in (("truncate", "-s", "64M", str(img)), ("mkfs.ext4", "-q", "-F", str(img))):
        r = _run(*cmd)
        if r.returncode != 0:
            pytest.skip(f"cannot make an ext4 image ({' '.join(cmd)}): {r.stderr.strip()}")
    r = _run("losetup", "--find", "--show", str(img))
    if r.returncode != 0:
        pytest.skip(f"cannot attach a loop device: {r.stderr.strip()}")
    dev = r.stdout.strip()
    try:
        r = _run("mount", "-t", "ext4", "-o", "errors=remount-ro", dev, str(mnt))
        if r.returncode != 0:
            pytest.skip(f"cannot mount {dev}: {r.stderr.strip()}")
        try:
            trigger = Path("/sys/fs/ext4") / os.path.basename(dev) / "trigger_fs_error"
            if not trigger.exists():
                pytest.skip(f"{trigger} is missing: this kernel cannot raise an ext4 error")
            yield mnt, trigger
        finally:
            _unmount(mnt)
    finally:
        _run("losetup", "-d", dev)


@pytest.fixture
def tiny_tmpfs(tmp_path):
    _skip_unless_root()
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    r = _run("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt))
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        _unmount(mnt)


async def _broker(tmp_path, faulty_dir: Path):
    """An in-process broker with log dirs [faulty_dir/d0, tmp_path/healthy], leading t-0
    (in the faulty dir) and t-1 (in the healthy one), its failure handler running."""
    node = Node(1, tmp_path, log_dirs=[faulty_dir / "d0", tmp_path / "healthy"])
    node.halted = []
    node.rm.halt = node.halted.append
    await node.start()
    node.handler = asyncio.ensure_future(node.rm.log_dir_failure_loop())
    for tp in (T0, T1):
        await node.stub.LeaderAndIsr(leader_and_isr(node, 1, 0, [1], [1], [], tp=tp))
    assert [node.lm.log_dir_of(tp) for tp in (T0, T1)] == node.lm.dirs
    return node


async def _stop(node):
    node.handler.cancel()
    await node.stop()  # closes every fd before the fixture unmounts


async def _produce(node, tp, records=None):
    req = produce_req("x", acks=1, tp=tp) if records is None else pb.ProduceRequest(
        acks=1, timeout_ms=5000, topic_data=[pb.ProduceTopicData(topic=tp.topic, partition_data=[
            pb.ProducePartitionData(partition=tp.partition, records=records)])])
    resp = await node.stub.Produce(req)
    return resp.responses[0].partition_responses[0].error_code


async def _assert_only_the_faulty_dir_went_offline(node, err: int):
    d0, healthy = node.lm.dirs
    await wait_until(lambda: not d0.online, what=f"{d0.path} offline")
    assert errno.errorcode[err] in d0.error
    assert await _produce(node, T0) == ErrorCode.KAFKA_STORAGE_ERROR
    assert healthy.online and await _produce(node, T1) == ErrorCode.NONE
    assert node.rm.offline_replicas == {T0: d0.path} and node.halted == []
    assert node.rm.metrics.registry.get_sample_value(
        "kafka_log_logmanager_offlinelogdirectorycount") == 1


async def test_a_real_ext4_error_takes_the_dir_offline_and_the_broker_lives(tmp_path, ext4_dir):
    mnt, trigger = ext4_dir
    node = await _broker(tmp_path, mnt)
    try:
        assert await _produce(node, T0) == ErrorCode.NONE
        trigger.write_text("replog test: disk failure\n")  # the kernel remounts it read-only
        assert await _produce(node, T0) == ErrorCode.KAFKA_STORAGE_ERROR
        await _assert_only_the_faulty_dir_went_offline(node, errno.EROFS)
    finally:
        await _stop(node)


async def test_a_full_disk_takes_the_dir_offline_and_the_broker_lives(tmp_path, tiny_tmpfs):
    node = await _broker(tmp_path, tiny_tmpfs)
    big = build_batch([ProducerRecord(b"k", os.urandom(200_000))])
    try:
        for _ in range(20):  # 2 MB fill up within 11 batches of 200 kB
            if await _produce(node, T0, big) != ErrorCode.NONE:
                break
        else:
            pytest.fail("4 MB appended to a 2 MB tmpfs without ENOSPC")
        await _assert_only_the_faulty_dir_went_offline(node, errno.ENOSPC)
    finally:
        await _stop(node)


@pytest.mark.integration
def test_a_broker_process_whose_every_dir_fails_exits_1_with_one_line(tmp_path, zk_hosts):
    """The only log dir fails under a running broker (EIO through its fault-injection file, so
    this also runs without root): the next HW checkpoint hits it, the handler takes the dir
    offline, and with none left the process halts - exit code 1, one FATAL line on stderr."""
    log_dir, faults = tmp_path / "d0", tmp_path / "faults.json"
    config = tmp_path / "broker.properties"
    config.write_text("\n".join([
        "broker.id=1", f"listeners=127.0.0.1:{free_port()}", f"log.dirs={log_dir}",
        f"zookeeper.connect={zk_hosts}", f"event.log.file={tmp_path / 'events.json'}",
        f"fault.injection.file={faults}", "replica.high.watermark.checkpoint.interval.ms=100",
        "controlled.shutdown.enable=false", ""]))
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "admin.cli", "broker", "--config",
                             str(config)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on" in proc.stdout.readline()  # started: its dir is healthy
        faults.write_text(json.dumps([{"path": str(log_dir), "errno": "EIO"}]))
        assert proc.wait(timeout=60) == 1
        stderr = proc.stderr.read().strip().splitlines()
        assert len(stderr) == 1, stderr
        assert stderr[0].startswith("FATAL: broker 1 halting: every log dir is offline")
        assert str(log_dir) in stderr[0]
        events = [json.loads(line)["event"]
                  for line in (tmp_path / "events.json").read_text().splitlines()]
        assert "log_dir_offline" in events and events[-1] == "broker_halting"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

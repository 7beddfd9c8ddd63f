"""design.md#jbod acceptance (design.md#jbod; Kafka's log_dir_failure_test) with real processes, a
real ZooKeeper and real disk faults: 3 brokers with 2 log dirs each, a topic of RF 3 and
min.insync.replicas=2, an acks=all producer running; one of broker 2's dirs fails. Then:

- broker 2 stays up and keeps serving its other dir;
- its replicas in the failed dir are restarted through /restart_partitions (the entry is
  consumed), re-created in its healthy dir, and rejoin the ISR;
- no acknowledged record is lost, and the replicas are byte-identical up to the HW.

The fault is a genuine ext4 error on a loop-mounted dir (``errors=remount-ro`` +
``trigger_fs_error``), a full dir (ENOSPC), or - without root, or for one partition only - EIO
through the broker's file-operation seam.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess

import pytest

from admin.log_dirs_cmd import STORAGE_ERROR
from chaos import disk
from client.admin_client import AdminClient
from common import zk_layout as zl
from tests.admin.test_cli import replog
from tests.cluster.helpers import (
    LoadProducer,
    assert_acked_read_back,
    eventually,
    replica_batches,
    scrape,
)

pytestmark = pytest.mark.integration

FAST = {"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 3000,
        "replica.fetch.wait.max.ms": 200, "auto.leader.rebalance.enable": "false"}
PARTITIONS = 12
VICTIM = 2


def _events(node, name: str) -> list[dict]:
    try:
        with open(node.event_log_file, encoding="utf-8") as f:
            return [e for e in map(json.loads, f) if e.get("event") == name]
    except FileNotFoundError:
        return []


def _replicas_in(path) -> set[int]:
    """Partitions of t with a replica dir in log dir ``path``."""
    try:
        names = os.listdir(path)
    except OSError:
        return set()
    return {int(n[2:]) for n in names if n.startswith("t-") and n[2:].isdigit()}


async def _full_isr(admin: AdminClient) -> bool:
    t = (await admin.describe_topics(["t"]))["t"]
    return all(len(p.isr) == 3 and p.leader >= 0 for p in t.partitions)


async def _start_load(c, admin: AdminClient) -> tuple[LoadProducer, asyncio.Task]:
    await admin.create_topic("t", PARTITIONS, 3, configs={"min.insync.replicas": "2"})
    await eventually(lambda: _full_isr(admin), timeout=60, what="t fully replicated")
    load = LoadProducer(c.bootstrap_servers, "t", PARTITIONS)
    task = asyncio.create_task(load.run())
    await eventually(lambda: len(load.acked) >= 300, timeout=30,
                     what="records acknowledged before the fault")
    return load, task


async def _keeps_producing(load: LoadProducer, what: str) -> None:
    before = len(load.acked)
    await eventually(lambda: len(load.acked) >= before + 300, timeout=30, what=what)


async def _stop(load: LoadProducer, task: asyncio.Task) -> None:
    load.stop.set()
    await task


async def _check_no_loss(c, load: LoadProducer, failed_dir) -> None:
    """Every acknowledged record at its offset; every replica byte-identical up to the HW
    (broker 2's read from its healthy dir: the failed one may still hold a stale copy)."""
    bs = c.bootstrap_servers
    hws = await assert_acked_read_back(bs, load)
    for p in range(PARTITIONS):
        logs = [replica_batches(c, b, "t", p, hws[p], skip_dirs=[failed_dir] if b == VICTIM
                                else []) for b in (1, 2, 3)]
        assert logs[0] == logs[1] == logs[2], f"t-{p}: replicas differ below HW {hws[p]}"
        assert sum(last - base + 1 for base, last, _ in logs[0]) == hws[p] > 0, f"t-{p}"


async def _restarted_and_back(c, admin: AdminClient, lost: set[int], healthy) -> None:
    """The controller consumed broker 2's restart entry for exactly the lost partitions, and
    they are re-created in its healthy dir and back in every ISR."""
    async def done():
        if c.zk_client().get_children(zl.RESTART_PARTITIONS):
            return False
        if not lost <= _replicas_in(healthy):
            return False
        return await _full_isr(admin)
    await eventually(done, timeout=90, what="lost replicas re-created and back in the ISR")
    restarted = {int(p.rsplit("-", 1)[1]) for node in c.controllers.values()
                 for e in _events(node, "partitions_restarted") if e["broker"] == VICTIM
                 for p in e["partitions"] if p.startswith("t-")}
    assert restarted == lost


async def _fault_scenario(c, fail, failed_dir, *, one_partition: bool = False) -> None:
    """The acceptance scenario; `fail(lost)` makes the fault in broker 2's `failed_dir`. The
    whole dir goes offline - or, with `one_partition`, only the lowest partition in it
    fails (a fault on one log's files: the dir passes its availability check)."""
    bs = c.bootstrap_servers
    b2 = c.broker(VICTIM)
    healthy = next(d for d in b2.log_dirs if str(d) != str(failed_dir))
    whole_dir = not one_partition
    async with AdminClient(bs) as admin:
        load, task = await _start_load(c, admin)
        try:
            in_dir = _replicas_in(failed_dir)
            assert in_dir and _replicas_in(healthy), "the topic spans both of broker 2's dirs"
            lost = in_dir if whole_dir else {min(in_dir)}
            t0 = asyncio.get_running_loop().time()
            fail(lost)
            if whole_dir:
                await eventually(lambda: _events(b2, "log_dir_offline"), timeout=30,
                                 what="broker 2 takes the failed dir offline")
            await _restarted_and_back(c, admin, lost, healthy)
            assert b2.is_running(), "broker 2 must survive its dir's failure"
            await _keeps_producing(load, "records acknowledged after the recovery")
        finally:
            await _stop(load, task)
    assert load.failed == 0, f"{load.failed} records failed"
    print(f"longest gap between acknowledgements after the fault: {load.max_gap(t0):.2f} s")
    await _check_no_loss(c, load, failed_dir if whole_dir else None)
    if not whole_dir:
        assert not _events(b2, "log_dir_offline")
        return
    m = scrape(f"http://127.0.0.1:{b2.metrics_port}/metrics")
    assert m["kafka_log_logmanager_offlinelogdirectorycount"] == 1
    assert m[f'kafka_log_logmanager_logdirectoryoffline{{logDirectory="{failed_dir}"}}'] == 1
    reg = json.loads(c.zk_client().get(zl.broker_path(VICTIM))[0])
    assert reg["offline_log_dirs"] == [str(failed_dir)]
    rc, out, _ = await replog("log-dirs", "describe", "--bootstrap-server", bs,
                              "--broker-list", str(VICTIM))
    assert rc == 0, out
    dirs = {d["logDir"]: d for d in json.loads(out.splitlines()[2])["brokers"][0]["logDirs"]}
    assert dirs[str(failed_dir)] == {"logDir": str(failed_dir), "error": STORAGE_ERROR,
                                     "partitions": []}
    assert {d["partition"] for d in dirs[str(healthy)]["partitions"]} >= \
        {f"t-{p}" for p in lost}


def _mounted(c, tmp_path) -> disk.LoopMountedLogDir:
    why = disk.unavailable()
    if why:
        pytest.skip(f"real disk faults {why}; the EIO variant covers the same path")
    d = disk.LoopMountedLogDir(c.broker(VICTIM).log_dirs[1], tmp_path / "broker2-dir1.img")
    try:
        d.create_and_mount()
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot loop-mount an ext4 image here: {e}")
    return d


async def test_real_ext4_error_takes_only_that_dir_offline(cluster_factory, tmp_path):
    c = cluster_factory(brokers=3, log_dirs_per_broker=2, overrides=FAST, start=False)
    d = _mounted(c, tmp_path)
    try:
        c.start()
        await _fault_scenario(c, lambda lost: d.trigger_error(), d.log_dir)
        # the fault was the kernel's: the file system refuses every write now
        with pytest.raises(OSError) as e:
            (d.log_dir / "probe-after").write_bytes(b"x")
        assert e.value.errno == errno.EROFS
    finally:
        c.stop(graceful=False)
        d.unmount()


async def test_full_dir_enospc_takes_only_that_dir_offline(cluster_factory, tmp_path):
    c = cluster_factory(brokers=3, log_dirs_per_broker=2, overrides=FAST, start=False)
    d = _mounted(c, tmp_path)
    try:
        c.start()
        await _fault_scenario(c, lambda lost: d.fill(), d.log_dir)
    finally:
        c.stop(graceful=False)
        d.unmount()


async def test_eio_on_one_partition_restarts_only_that_partition(cluster_factory, tmp_path):
    """EIO through the file seam on one partition's files in broker 2 (a fault no real device
    gives on demand): the dir passes its availability check, so only that partition restarts,
    re-created in broker 2's other dir."""
    rules = tmp_path / "faults.json"
    rules.write_text("[]")
    c = cluster_factory(brokers=3, log_dirs_per_broker=2, overrides=FAST,
                        per_broker_overrides={VICTIM: {"fault.injection.file": str(rules)}})
    first = c.broker(VICTIM).log_dirs[0]

    def fail(lost: set[int]) -> None:
        [p] = lost
        rules.write_text(json.dumps([{"path": os.path.join(str(first), f"t-{p}"),
                                      "errno": "EIO", "ops": ["write", "fsync"]}]))
    await _fault_scenario(c, fail, first, one_partition=True)


async def test_all_dirs_failed_the_broker_exits_and_its_partitions_move(cluster_factory,
                                                                        tmp_path):
    """Every dir of broker 2 fails (EIO through the seam on both): it exits non-zero with one
    clear line, and its partitions are handled as for a dead broker."""
    rules = tmp_path / "faults.json"
    rules.write_text("[]")
    c = cluster_factory(brokers=3, log_dirs_per_broker=2, overrides=FAST,
                        per_broker_overrides={VICTIM: {"fault.injection.file": str(rules)}})
    b2 = c.broker(VICTIM)
    async with AdminClient(c.bootstrap_servers) as admin:
        load, task = await _start_load(c, admin)
        try:
            rules.write_text(json.dumps([{"path": str(d), "errno": "EIO"}
                                         for d in b2.log_dirs]))
            await eventually(lambda: not b2.is_running(), timeout=60,
                             what="broker 2 halts once every dir is offline")
            assert b2.returncode not in (0, None)

            async def moved():
                t = (await admin.describe_topics(["t"]))["t"]
                return all(p.leader not in (VICTIM, -1) and VICTIM not in p.isr
                           for p in t.partitions)
            await eventually(moved, timeout=60, what="leadership and ISRs off broker 2")
            await _keeps_producing(load, "producing goes on without broker 2")
        finally:
            await _stop(load, task)
    assert load.failed == 0, f"{load.failed} records failed"
    fatal = [line for line in b2.log_file.read_text(encoding="utf-8").splitlines()
             if "FATAL" in line]
    assert len(fatal) == 1 and "every log dir is offline" in fatal[0], fatal


async def test_controller_killed_after_applying_a_restart_entry_before_deleting_it(
        cluster_factory, tmp_path):
    """design.md#jbod processing is at least once: the active controller applies broker 2's
    /restart_partitions entry (state written, LeaderAndIsr is_new sent) and is SIGKILLed
    before deleting it (test-only hook). The standby takes over, applies the same entry again
    - idempotent: the same leaders, ISRs and ELRs, only the epochs move on - and deletes it;
    the lost replicas are re-created, rejoin every ISR, and no acknowledged record is lost."""
    rules = tmp_path / "faults.json"
    rules.write_text("[]")
    c = cluster_factory(brokers=3, controllers=2, log_dirs_per_broker=2, overrides=FAST,
                        per_broker_overrides={VICTIM: {"fault.injection.file": str(rules)}},
                        start=False)
    first = min(c.controllers)
    c.controller(first).overrides["replog.test.kill.after.restart.entry"] = "true"
    c.start()
    if c.active_controller_id() != first:  # only the first carries the hook: make it active
        other = c.active_controller_id()
        c.controller(other).restart()
        c.wait_for_controller(timeout=30, exclude=[other])
    assert c.active_controller_id() == first
    failed_dir = c.broker(VICTIM).log_dirs[0]
    await _fault_scenario(c, lambda lost: rules.write_text(json.dumps(
        [{"path": str(failed_dir), "errno": "EIO"}])), failed_dir)
    killed = c.controller(first)
    assert not killed.is_running() and killed.returncode in (-9, 137)
    standby = next(n for i, n in c.controllers.items() if i != first)
    applied_by_killed = {e["entry"] for e in _events(killed, "partitions_restarted")}
    assert applied_by_killed, "the killed controller applied the entry"
    assert applied_by_killed <= {e["entry"] for e in _events(standby, "partitions_restarted")}

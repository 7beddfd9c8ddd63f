"""design.md#kip-501 side by side, real processes: the leader's reads of one partition
turn slow (injected through the file-operation seam, since a slow disk cannot be produced for
real on demand). Flag off (Kafka's behaviour): the followers drop out of the ISR and acks=all
produce stalls with NOT_ENOUGH_REPLICAS. Flag on: they stay in the ISR, the slow leader gives
up leadership, a follower leads, and produce resumes with no acknowledged record lost."""

from __future__ import annotations

import asyncio
import json

import pytest

from client.admin_client import AdminClient
from client.consumer import Consumer
from client.errors import KafkaError
from client.producer import Producer
from tests.cluster.helpers import eventually, partition_dir, partition_state, scrape

pytestmark = pytest.mark.integration

LAG_MS = 1500
SLOW_MS = 1000  # per read call; a fetch makes 2-3 of them: longer than the lag limit


def start(cluster_factory, tmp_path, flag: bool):
    faults = tmp_path / "faults-1.json"
    c = cluster_factory(
        brokers=3,
        overrides={"replica.lag.time.max.ms": LAG_MS, "replica.fetch.wait.max.ms": 200,
                   "replica.fetch.backoff.ms": 200, "zookeeper.session.timeout.ms": 30000,
                   "follower.fetch.pending.reads.insync.enable": str(flag).lower(),
                   "follower.fetch.process.time.max.ms": 500},
        per_broker_overrides={1: {"fault.injection.file": str(faults)}})
    return c, faults


async def setup_topic(c, faults):
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        await admin.create_topic("t", replica_assignment={0: [1, 2, 3]},
                                 configs={"min.insync.replicas": "2"})
    await eventually(lambda: _full_isr(bs), what="ISR 1,2,3")
    acked = {}
    async with Producer(bs, acks="all", linger_ms=1) as p:
        for i in range(10):
            md = await p.send_and_wait("t", f"before-{i}".encode(), partition=0)
            acked[md.offset] = f"before-{i}".encode()
    faults.write_text(json.dumps([{"path": partition_dir(c, 1, "t", 0), "delay_ms": SLOW_MS,
                                   "ops": ["pread"]}]))
    return acked


async def _full_isr(bs):
    s = await partition_state(bs, "t")
    return s is not None and s.leader == 1 and set(s.isr) == {1, 2, 3}


async def produce_for(bs, seconds, acked, errors, tag):
    """acks=all records for a while; collects what was acknowledged and the errors."""
    async with Producer(bs, acks="all", linger_ms=1, delivery_timeout_ms=3000,
                        request_timeout_ms=2000, retries=0) as p:
        deadline = asyncio.get_running_loop().time() + seconds
        i = 0
        while asyncio.get_running_loop().time() < deadline:
            value = f"{tag}-{i}".encode()
            try:
                md = await p.send_and_wait("t", value, partition=0)
                acked[md.offset] = value
            except KafkaError as e:
                errors.append(e.name)
                await asyncio.sleep(0.2)
            i += 1


async def test_flag_off_followers_drop_out_and_acks_all_stalls(cluster_factory, tmp_path):
    c, faults = start(cluster_factory, tmp_path, flag=False)
    bs = c.bootstrap_servers
    acked = await setup_topic(c, faults)
    errors: list[str] = []
    # The followers may rejoin briefly: with the HW frozen below min.insync.replicas a follower
    # that fetches at the HW is back in sync (Kafka's rule), until the slow read lags it again.
    writer = asyncio.ensure_future(produce_for(bs, 45, acked, errors, "slow"))

    async def isr_shrunk():
        s = await partition_state(bs, "t")
        return s.leader == 1 and s.isr == (1,) and s
    await eventually(isr_shrunk, timeout=40, interval=0.05, what="followers out of the ISR")
    await eventually(lambda: "NOT_ENOUGH_REPLICAS" in errors, timeout=40,
                     what="acks=all refused with NOT_ENOUGH_REPLICAS")
    writer.cancel()
    s = await partition_state(bs, "t")
    assert s.leader == 1  # Kafka's behaviour: the slow leader keeps leading
    assert scrape(c.broker(1).metrics_url)["replog_leadership_relinquished_total"] == 0
    # the disk recovers: nothing acknowledged (before or during the stall) was lost
    faults.write_text("[]")
    await assert_acked_read_back(bs, acked)


async def test_flag_on_followers_stay_and_slow_leader_relinquishes(cluster_factory, tmp_path):
    c, faults = start(cluster_factory, tmp_path, flag=True)
    bs = c.bootstrap_servers
    acked = await setup_topic(c, faults)
    errors: list[str] = []
    isr_seen: list[tuple[int, ...]] = []
    writer = asyncio.ensure_future(produce_for(bs, 30, acked, errors, "slow"))

    async def new_leader():
        s = await partition_state(bs, "t")
        isr_seen.append(tuple(sorted(s.isr)))
        return s.leader in (2, 3) and s
    s = await eventually(new_leader, timeout=40, what="a follower leads")  # noqa: F841
    count = len(acked)
    await eventually(lambda: len(acked) >= count + 20, timeout=30,
                     what="produce resumed on the new leader")
    writer.cancel()
    await eventually(lambda: scrape(c.broker(1).metrics_url)[
        "replog_leadership_relinquished_total"] == 1, what="relinquishment counted")
    # the followers were never pushed out of the ISR by the slow leader
    assert all({2, 3} <= set(isr) for isr in isr_seen), isr_seen
    # nothing acknowledged was lost: every acked record is read back (from the new leader)
    await assert_acked_read_back(bs, acked)


async def assert_acked_read_back(bs, acked: dict[int, bytes]) -> None:
    """Every acknowledged record is read back by a consumer at its offset."""
    got = {}
    async with Consumer(bs, auto_offset_reset="earliest") as cons:
        await cons.assign([("t", 0)])
        cons.seek_to_beginning(("t", 0))
        deadline = asyncio.get_running_loop().time() + 30
        while not set(acked) <= set(got) and asyncio.get_running_loop().time() < deadline:
            for r in await cons.poll(500):
                got[r.offset] = r.value
    for offset, value in acked.items():
        assert got.get(offset) == value, f"acknowledged offset {offset} lost"

"""Min ISR never weaker than configured, with real processes: a topic's min.insync.replicas
changed at runtime through `replog configs` reaches the leader at once, and acks=all is then
refused with NOT_ENOUGH_REPLICAS; the CLI's describe and `topics describe` show the live value;
bad changes are one `Error:` line and change nothing."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from client.errors import KafkaError
from client.producer import Producer
from common.errors import ErrorCode
from tests.cluster.helpers import eventually, partition_state
from tests.cluster.test_replication_faults import FAST, create

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


async def replog(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "admin.cli", *args, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode, out.decode(), err.decode()


async def produce_outcome(bs: str) -> int:
    """The error code of one acks=all record (0: acknowledged); no retries, so the broker's
    answer is what comes back."""
    async with Producer(bs, acks="all", retries=0, linger_ms=0, delivery_timeout_ms=10000,
                        request_timeout_ms=5000) as p:
        try:
            await p.send_and_wait("t", b"x", partition=0)
        except KafkaError as e:
            return e.error_code
    return 0


# About 40 s of a paused follower and config round trips: make soak runs it. make test keeps
# the min ISR change at runtime through its sources on real processes
# (tests/cluster/test_min_isr_sources.py) and the resolver's rules
# (tests/broker/test_dynamic_config_rules.py).
@pytest.mark.soak
async def test_min_insync_replicas_change_applies_at_runtime(cluster_factory):
    # The session timeout is longer than the pause: the follower stays registered, so only
    # the leader's lag rule takes it out of the ISR (as in test_replication_faults).
    c = cluster_factory(brokers=3, overrides={**FAST, "zookeeper.session.timeout.ms": 30000})
    bs = c.bootstrap_servers
    state = await create(bs, "t", rf=3, min_isr=2)
    follower = next(b for b in state.replicas if b != state.leader)
    configs = ["configs", "--bootstrap-server", bs, "--entity-type", "topics",
               "--entity-name", "t"]
    c.broker(follower).pause()
    try:
        async def shrunk():
            s = await partition_state(bs, "t")
            return len(s.isr) == 2 and follower not in s.isr and s
        await eventually(shrunk, timeout=60, what="paused follower out of the ISR")
        assert await produce_outcome(bs) == 0  # ISR 2 >= min.insync.replicas 2

        rc, out, err = await replog(*configs, "--alter", "--add-config",
                                    "min.insync.replicas=3")
        assert (rc, out, err) == (0, "Completed updating config for topic t.\n", "")
        # Before the fix the leader kept its cached min ISR of 2 and acknowledged forever.
        code = await eventually(
            lambda: produce_outcome_if(bs, ErrorCode.NOT_ENOUGH_REPLICAS), timeout=60,
            what="acks=all refused with NOT_ENOUGH_REPLICAS")
        assert code == ErrorCode.NOT_ENOUGH_REPLICAS

        rc, out, _ = await replog(*configs, "--describe")
        assert rc == 0 and out.splitlines() == [
            "Dynamic configs for topic t are:",
            ("  min.insync.replicas=3 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
            "min.insync.replicas=3, DEFAULT_CONFIG:min.insync.replicas=1}")]
        rc, out, _ = await replog("topics", "describe", "--bootstrap-server", bs, "--topic", "t")
        assert rc == 0 and "\tConfigs: min.insync.replicas=3" in out.splitlines()[0]
        rc, out, _ = await replog("topics", "describe", "--bootstrap-server", bs,
                                  "--under-min-isr-partitions")
        assert rc == 0 and "\tPartition: 0\t" in out

        # Refused changes: one line, nothing applied.
        for extra, message in (
                (["--add-config", "min.insync.replicas=0"],
                 "Invalid value 0 for configuration min.insync.replicas"),
                (["--add-config", "min.insync.replicas=2,no.such.key=1"],
                 "Unknown topic config name: no.such.key"),
                (["--delete-config", "retention.ms"], "Invalid config(s): retention.ms")):
            rc, _, err = await replog(*configs, "--alter", *extra)
            assert rc == 1 and err.startswith("Error: ") and message in err, err
            assert len(err.strip().splitlines()) == 1, err
        rc, _, err = await replog("configs", "--bootstrap-server", bs, "--entity-type",
                                  "topics", "--entity-name", "missing", "--alter",
                                  "--add-config", "min.insync.replicas=2")
        assert rc == 1 and "The topic 'missing' does not exist." in err, err

        # Deleting the override brings back the topic's... nothing: the broker default, 1.
        rc, out, _ = await replog(*configs, "--alter", "--delete-config", "min.insync.replicas")
        assert rc == 0
        await eventually(lambda: produce_outcome_if(bs, 0), timeout=60,
                         what="acks=all accepted again with min ISR 1")
    finally:
        c.broker(follower).resume()


async def produce_outcome_if(bs: str, wanted: int) -> int | bool:
    code = await produce_outcome(bs)
    return (code if code else True) if code == wanted else False

"""Issue 42's acceptance for a broker's exit: ``replog produce --acks all`` with its default
retries (3) fails no record while the leader is SIGKILLed. Its calls on the dead connection
are transport errors (retriable; INTERNAL from grpc.aio no longer a server error), and its
batches for the dead leader wait, their retries unspent, until the controller has elected a new
leader (after the dead broker's ZooKeeper session expired)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from client.admin_client import AdminClient
from harness.local_cluster import REPO_ROOT
from tests.cluster.helpers import partition_state

N = 300


@pytest.mark.integration
def test_replog_produce_acks_all_fails_no_record_while_the_leader_is_killed(cluster_factory):
    c = cluster_factory(brokers=3)

    async def create():
        async with AdminClient(c.bootstrap_servers, request_timeout_ms=10000) as admin:
            await admin.create_topic("exit", 1, 3, configs={"min.insync.replicas": "2"})
    asyncio.run(create())
    c.wait_for_metadata()
    leader = asyncio.run(partition_state(c.bootstrap_servers, "exit")).leader
    producer = subprocess.Popen(
        [sys.executable, "-m", "admin.cli", "produce", "--bootstrap-server",
         c.bootstrap_servers, "--topic", "exit", "--acks", "all"],
        cwd=REPO_ROOT, env=c.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)

    for i in range(N):
        producer.stdin.write(b"record-%d\n" % i)
        producer.stdin.flush()
        if i == N // 3:
            c.broker(leader).kill()  # SIGKILL, mid-stream
        time.sleep(0.01)
    _, err = producer.communicate(timeout=180)  # closes stdin: the end of the records
    assert producer.returncode == 0, err.decode()
    assert b"Error" not in err and b"failed" not in err.lower(), err.decode()
    out = subprocess.run(
        [sys.executable, "-m", "admin.cli", "consume", "--bootstrap-server",
         c.bootstrap_servers, "--topic", "exit", "--from-beginning", "--max-messages", str(N),
         "--timeout-ms", "30000"], cwd=REPO_ROOT, env=c.env, capture_output=True, timeout=90,
        check=False)
    got = out.stdout.decode().split()
    assert sorted(set(got)) == sorted(f"record-{i}" for i in range(N)), out.stderr.decode()

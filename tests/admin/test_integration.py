"""Client, CLI and local cluster against real processes: ZooKeeper, a controller, brokers.

Each test runs a LocalCluster (harness/testing.py); nothing is faked and nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from client import AdminClient, Consumer, KafkaError, Producer, TopicPartition
from common.errors import ErrorCode
from harness.local_cluster import LocalCluster, LocalClusterError
from tests.polling import wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def replog(*args: str, stdin: bytes | None = None, timeout: float = 120
           ) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "admin.cli", *args], input=stdin,
                          capture_output=True, timeout=timeout, cwd=REPO, env=env)


def one_line_error(p: subprocess.CompletedProcess, contains: str) -> None:
    err = p.stderr.decode()
    assert p.returncode == 1, (p.stdout, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and contains in lines[0], err
    assert "Traceback" not in err


def exited(pid: int) -> bool:
    """Gone, or a zombie (exited, not yet reaped by its parent)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def describe(bootstrap: str, *extra: str) -> list[str]:
    p = replog("topics", "describe", "--bootstrap-server", bootstrap, *extra)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode().splitlines()


def test_topic_create_describe_list_delete(cluster: LocalCluster):
    b = cluster.bootstrap_servers
    p = replog("topics", "create", "--bootstrap-server", b, "--topic", "orders",
               "--partitions", "3", "--replication-factor", "3",
               "--config", "min.insync.replicas=2")
    assert (p.returncode, p.stdout.decode()) == (0, "Created topic orders.\n"), p.stderr

    def fully_replicated():
        lines = describe(b, "--topic", "orders")
        return lines if len(lines) == 4 and all(
            re.search(r"\tIsr: \d,\d,\d\t", ln) for ln in lines[1:]) else None

    lines = wait_until(fully_replicated, what="all ISRs full")
    assert re.fullmatch(r"Topic: orders\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 3"
                        r"\tConfigs: min\.insync\.replicas=2", lines[0]), lines[0]
    leaders = []
    for i, line in enumerate(lines[1:]):
        m = re.fullmatch(rf"\tTopic: orders\tPartition: {i}\tLeader: (\d)\tReplicas: "
                         r"(\d),(\d),(\d)\tIsr: (\d,\d,\d)\tElr: (\S*)\tLastKnownElr: (\S*)", line)
        assert m, line
        leader, replicas = int(m.group(1)), [int(m.group(k)) for k in (2, 3, 4)]
        assert sorted(replicas) == [1, 2, 3] and leader == replicas[0]
        leaders.append(leader)
    assert sorted(leaders) == [1, 2, 3]  # balanced assignment: one preferred leader each

    p = replog("topics", "list", "--bootstrap-server", b)
    assert p.stdout.decode() == "orders\n"
    assert describe(b, "--under-replicated-partitions") == []
    assert describe(b, "--unavailable-partitions") == []

    p = replog("topics", "delete", "--bootstrap-server", b, "--topic", "orders")
    assert p.returncode == 0, p.stderr.decode()
    wait_until(lambda: replog("topics", "list", "--bootstrap-server", b).stdout == b"",
               what="the topic to disappear")


def test_produce_acks_all_and_consume_back_at_offsets(cluster: LocalCluster):
    async def run():
        async with AdminClient(cluster.bootstrap_servers) as admin:
            await admin.create_topic("t", 3, 3, configs={"min.insync.replicas": "2"})
        async with Producer(cluster.bootstrap_servers, acks="all", linger_ms=5,
                            max_block_ms=30000) as producer:
            futs = [await producer.send("t", b"value-%d" % i, key=b"key-%d" % (i % 17))
                    for i in range(2000)]
            await producer.flush()
            acked = [f.result() for f in futs]
        per_partition: dict[int, list[int]] = {}
        for md in acked:
            per_partition.setdefault(md.partition, []).append(md.offset)
        assert len(per_partition) == 3
        for offsets in per_partition.values():
            assert sorted(offsets) == list(range(len(offsets)))
        async with Consumer(cluster.bootstrap_servers) as consumer:
            tps = await consumer.assign_topic("t")
            consumer.seek_to_beginning()
            ends = await consumer.end_offsets(tps)
            assert sum(ends.values()) == 2000
            got: dict[tuple[int, int], bytes] = {}
            deadline = time.monotonic() + 60
            while len(got) < 2000 and time.monotonic() < deadline:
                for r in await consumer.poll(1000):
                    assert (r.partition, r.offset) not in got
                    got[(r.partition, r.offset)] = r.value
        for i, md in enumerate(acked):
            assert got[(md.partition, md.offset)] == b"value-%d" % i

    asyncio.run(run())


def test_cli_produce_consume_and_perf_mode(cluster: LocalCluster):
    b = cluster.bootstrap_servers
    assert replog("topics", "create", "--bootstrap-server", b, "--topic", "lines",
                  "--partitions", "1", "--replication-factor", "3").returncode == 0
    lines = b"".join(b"k%d:line %d\n" % (i, i) for i in range(100))
    # A 30 s request timeout (the console producer's is 1.5 s): a retry on a loaded machine
    # could store a line twice (no idempotence), and this checks the exact sequence.
    p = replog("produce", "--bootstrap-server", b, "--topic", "lines", "--acks", "all",
               "--request-timeout-ms", "30000", "--property", "parse.key=true", "--property", "key.separator=:", stdin=lines)
    assert p.returncode == 0, p.stderr.decode()
    p = replog("consume", "--bootstrap-server", b, "--topic", "lines", "--from-beginning",
               "--max-messages", "100", "--property", "print.key=true",
               "--property", "print.offset=true", "--timeout-ms", "30000")
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode().splitlines() == [f"Offset:{i}\tk{i}\tline {i}" for i in range(100)]
    assert p.stderr.decode().strip().splitlines()[-1] == "Processed a total of 100 messages"

    p = replog("produce", "--bootstrap-server", b, "--topic", "lines", "--num-records", "5000",
               "--record-size", "100", "--throughput", "-1", "--batch-size", "16384",
               "--acks", "all")
    assert p.returncode == 0, p.stderr.decode()
    last = p.stdout.decode().strip().splitlines()[-1]
    assert re.fullmatch(r"5000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg "
                        r"latency, [\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, "
                        r"\d+ ms 99\.9th\.", last), last

    async def end_offset():
        async with Consumer(b) as c:
            return (await c.end_offsets([TopicPartition("lines", 0)]))[TopicPartition("lines", 0)]
    assert asyncio.run(end_offset()) == 5100


def test_bad_input_fails_with_one_line_and_creates_nothing(cluster: LocalCluster):
    b = cluster.bootstrap_servers
    one_line_error(replog("topics", "create", "--bootstrap-server", b, "--topic", "big",
                          "--partitions", "1", "--replication-factor", "4"),
                   "Replication factor: 4 larger than available brokers: 3.")
    one_line_error(replog("topics", "create", "--bootstrap-server", b, "--topic", "bad/name",
                          "--partitions", "1", "--replication-factor", "1"), "illegal")
    one_line_error(replog("topics", "create", "--bootstrap-server", b, "--topic", "zero",
                          "--partitions", "0", "--replication-factor", "1"),
                   "The partitions must be greater than 0")
    # (an unknown topic is auto-created, as by Kafka: auto.create.topics.enable)
    one_line_error(replog("produce", "--bootstrap-server", b, "--topic", "bad/name",
                          stdin=b"hello\n"), "Invalid topic")
    one_line_error(replog("topics", "describe", "--bootstrap-server", b, "--topic", "missing"),
                   "Topic 'missing' does not exist as expected")
    # The client checks and the controller's own checks both refuse; the server side alone:
    async def server_side():
        async with AdminClient(b) as admin:
            with pytest.raises(KafkaError) as e:
                await admin.create_topic("zero", 0, 1)
            assert e.value.error_code == ErrorCode.INVALID_PARTITIONS
            with pytest.raises(KafkaError) as e:
                await admin.create_topic("bad/name", 1, 1)
            assert e.value.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
            with pytest.raises(KafkaError) as e:
                await admin.create_topic("big", 1, 4)
            assert e.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
            return await admin.list_topics()
    assert asyncio.run(server_side()) == []
    assert replog("topics", "list", "--bootstrap-server", b).stdout == b""
    for h in cluster.brokers.values():
        for d in h.log_dirs:
            assert not [x for x in os.listdir(d) if "-" in x and not x.startswith(".")
                        and (d / x).is_dir()], f"a partition dir appeared in {d}"


def test_local_cluster_handles_and_cluster_json(cluster: LocalCluster):
    info = json.loads(cluster.cluster_json_path.read_text())
    assert info["bootstrap_servers"] == cluster.bootstrap_servers
    assert [b["id"] for b in info["brokers"]] == [1, 2, 3]
    assert all(len(b["log_dirs"]) == 2 and b["metrics_url"].startswith("http://")
               for b in info["brokers"])
    assert info["controllers"][0]["id"] == cluster.active_controller_id()
    b2 = cluster.broker(2)
    old_pid = b2.pid
    b2.kill()
    assert not b2.is_running()
    b2.start()  # waits for a new registration and metadata
    assert b2.pid != old_pid
    info = json.loads(cluster.cluster_json_path.read_text())
    assert [b["pid"] for b in info["brokers"] if b["id"] == 2] == [b2.pid]
    b3 = cluster.broker(3)
    b3.pause()
    b3.resume()
    assert b3.stop() is not None and not b3.is_running()


def test_cluster_up_and_down_cli(tmp_path, zk_server):
    data = tmp_path / "data"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    up = subprocess.Popen([sys.executable, "-m", "admin.cli", "cluster", "up", "--brokers", "2",
                           "--log-dirs-per-broker", "1", "--data-dir", str(data),
                           "--zookeeper", zk_server.hosts + "/cluster-up-test"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    try:
        bootstrap = None
        deadline = time.monotonic() + 90
        while bootstrap is None and time.monotonic() < deadline:
            line = up.stdout.readline().decode()
            if not line and up.poll() is not None:
                raise AssertionError(f"cluster up exited: {up.stderr.read().decode()}")
            if line.startswith("Bootstrap servers: "):
                bootstrap = line.split(": ", 1)[1].strip()
        assert bootstrap, "no bootstrap line"
        info = json.loads((data / "cluster.json").read_text())
        assert info["bootstrap_servers"] == bootstrap
        assert info["zookeeper"].endswith("/cluster-up-test")
        pids = [b["pid"] for b in info["brokers"]] + [c["pid"] for c in info["controllers"]]
        assert all(pids)
        # A second cluster in the same data dir is refused with one clear line.
        one_line_error(replog("cluster", "up", "--data-dir", str(data)),
                       "a replog cluster is already running in")
        assert replog("topics", "create", "--bootstrap-server", bootstrap, "--topic", "t",
                      "--partitions", "1", "--replication-factor", "2").returncode == 0
        p = replog("cluster", "down", "--data-dir", str(data))
        assert p.returncode == 0, p.stderr.decode()
        assert up.wait(60) == 0
        for pid in pids:
            wait_until(lambda pid=pid: exited(pid), what=f"pid {pid} to exit")
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            up.wait(60)


def test_second_local_cluster_in_same_dir_is_refused(cluster: LocalCluster):
    with pytest.raises(LocalClusterError, match="already running"):
        LocalCluster(cluster.data_dir, brokers=1).start()


def test_producer_and_consumer_follow_a_killed_leader(cluster_factory):
    """acks=all while the leader's broker is SIGKILLed: the producer retries to the new leader,
    every acknowledged record is read back at its offset, and the consumer follows too."""
    cluster = cluster_factory(overrides={"zookeeper.session.timeout.ms": 3000})
    b = cluster.bootstrap_servers

    async def run():
        async with AdminClient(b) as admin:
            await admin.create_topic("f", 1, 3, configs={"min.insync.replicas": "2"})
            leader = (await admin.describe_topics(["f"]))["f"].partitions[0].leader
        acked = {}
        failed = 0
        async with Producer(b, acks="all", linger_ms=2, retry_backoff_ms=50,
                            delivery_timeout_ms=60000, max_block_ms=30000) as producer:
            futs = []
            for i in range(3000):
                futs.append((i, await producer.send("f", b"v%d" % i)))
                if i == 1000:
                    await cluster.broker(leader).akill()
                if i % 50 == 0:
                    await asyncio.sleep(0.01)
            await producer.flush()
            for i, f in futs:
                if f.exception() is None:
                    acked[f.result().offset] = b"v%d" % i
                else:
                    failed += 1
        assert len(acked) >= 2000, f"only {len(acked)} acknowledged, {failed} failed"
        async with Consumer(b) as consumer:
            await consumer.assign([("f", 0)])
            consumer.seek_to_beginning()
            got = {}
            deadline = time.monotonic() + 60
            end = (await consumer.end_offsets([("f", 0)]))[TopicPartition("f", 0)]
            while len(got) < end and time.monotonic() < deadline:
                for r in await consumer.poll(1000):
                    got[r.offset] = r.value
        for offset, value in acked.items():
            assert got.get(offset) == value, f"offset {offset}"
        async with AdminClient(b) as admin:
            new_leader = (await admin.describe_topics(["f"]))["f"].partitions[0].leader
        assert new_leader not in (leader, -1)

    asyncio.run(run())

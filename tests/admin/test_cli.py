"""The CLI (`replog topics|produce|consume`): Kafka's outputs, and every user error is one line
on stderr with exit status 1 — never a traceback. Runs the real `python -m admin.cli` in a
subprocess against in-process fake brokers/controllers."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest

from common.errors import ErrorCode
from tests.admin.fake_cluster import FakeCluster

REPO = Path(__file__).resolve().parents[2]


async def replog(*args: str, stdin: bytes | None = None, timeout: float = 60
                 ) -> tuple[int, str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "admin.cli", *args, cwd=REPO, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    return proc.returncode, out.decode(), err.decode()


def assert_one_line_error(rc: int, err: str, contains: str) -> None:
    assert rc == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("Error: ") and contains in lines[0], err
    assert "Traceback" not in err


@pytest.fixture
async def fake():
    async with FakeCluster(brokers=3) as fc:
        yield fc


@pytest.mark.parametrize("args,contains", [
    (["topics", "create", "--bootstrap-server", "127.0.0.1:1", "--topic", "a/b",
      "--partitions", "1"], 'Topic name "a/b" is illegal'),
    (["topics", "create", "--bootstrap-server", "127.0.0.1:1", "--topic", "..",
      "--partitions", "1"], 'Topic name cannot be ".."'),
    (["topics", "create", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
      "--partitions", "0"], "The partitions must be greater than 0"),
    (["topics", "create", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
      "--replication-factor", "0"], "The replication factor must be between 1 and 32767"),
    (["topics", "create", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
      "--replica-assignment", "1:1"], "duplicate entries: 1"),
    (["topics", "create", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
      "--replica-assignment", "1:2", "--partitions", "2"], "can't be used with option"),
    (["topics", "create", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
      "--config", "x"], 'format "key=val"'),
    (["topics", "create", "--bootstrap-server", "127.0.0.1:1"], "required: --topic"),
    (["topics", "create", "--bootstrap-server", "nonsense", "--topic", "t"],
     "invalid server address"),
    (["topics", "list", "--bootstrap-server", "127.0.0.1:1", "--timeout-ms", "300"],
     "no broker answered"),
    (["consume", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--offset", "3"],
     "The partition is required when offset is specified."),
    (["produce", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--acks", "2"],
     "Invalid value 2 for configuration acks"),
    (["cluster", "up", "--override", "no.such.key=1"], "unknown configuration key"),
])
async def test_user_errors_are_one_line(args, contains):
    rc, _, err = await replog(*args)
    assert_one_line_error(rc, err, contains)


async def test_topics_create_describe_list_delete(fake):
    b = fake.bootstrap
    rc, out, err = await replog("topics", "create", "--bootstrap-server", b, "--topic", "orders",
                                "--partitions", "3", "--replication-factor", "3",
                                "--config", "min.insync.replicas=2")
    assert (rc, out) == (0, "Created topic orders.\n"), err
    fake.state.topics["orders"].partitions[1].isr = [2, 3]
    rc, out, _ = await replog("topics", "describe", "--bootstrap-server", b, "--topic", "orders")
    tid = fake.state.topics["orders"].topic_id
    assert rc == 0
    assert out.splitlines() == [
        f"Topic: orders\tTopicId: {tid}\tPartitionCount: 3\tReplicationFactor: 3\t"
        "Configs: min.insync.replicas=2",
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tElr: "
        "\tLastKnownElr: ",
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3\tElr: "
        "\tLastKnownElr: ",
        "\tTopic: orders\tPartition: 2\tLeader: 3\tReplicas: 3,1,2\tIsr: 3,1,2\tElr: "
        "\tLastKnownElr: ",
    ]
    rc, out, _ = await replog("topics", "describe", "--bootstrap-server", b,
                              "--under-replicated-partitions")
    assert rc == 0 and out.splitlines() == [
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3\tElr: "
        "\tLastKnownElr: "]
    rc, out, _ = await replog("topics", "list", "--bootstrap-server", b)
    assert (rc, out) == (0, "orders\n")
    rc, _, err = await replog("topics", "create", "--bootstrap-server", b, "--topic", "orders")
    assert_one_line_error(rc, err, "Topic 'orders' already exists.")
    rc, _, err = await replog("topics", "create", "--bootstrap-server", b, "--topic", "orders",
                              "--if-not-exists")
    assert rc == 0, err
    rc, _, err = await replog("topics", "delete", "--bootstrap-server", b, "--topic", "orders")
    assert rc == 0, err
    assert "orders" not in fake.state.topics
    rc, _, err = await replog("topics", "describe", "--bootstrap-server", b, "--topic", "orders")
    assert_one_line_error(rc, err, "Topic 'orders' does not exist as expected")


async def test_create_rf_larger_than_brokers_creates_nothing(fake):
    rc, _, err = await replog("topics", "create", "--bootstrap-server", fake.bootstrap,
                              "--topic", "t", "--partitions", "1", "--replication-factor", "4")
    assert_one_line_error(rc, err, "Replication factor: 4 larger than available brokers: 3.")
    assert fake.state.topics == {}


async def test_produce_lines_then_consume_them(fake):
    fake.state.add_topic("t", 1, 3)
    b = fake.bootstrap
    rc, out, err = await replog("produce", "--bootstrap-server", b, "--topic", "t",
                                "--property", "parse.key=true", "--property", "key.separator=:",
                                stdin=b"k1:one\nk2:two\nk3:three\n")
    assert rc == 0, err
    rc, out, err = await replog("consume", "--bootstrap-server", b, "--topic", "t",
                                "--from-beginning", "--max-messages", "3",
                                "--property", "print.key=true", "--property", "print.offset=true")
    assert rc == 0, err
    assert out == "Offset:0\tk1\tone\nOffset:1\tk2\ttwo\nOffset:2\tk3\tthree\n"
    assert err.strip().splitlines()[-1] == "Processed a total of 3 messages"
    rc, out, err = await replog("consume", "--bootstrap-server", b, "--topic", "t",
                                "--partition", "0", "--offset", "1", "--timeout-ms", "500")
    assert (rc, out) == (0, "two\nthree\n"), err
    assert "Processed a total of 2 messages" in err


async def test_produce_key_separator_missing_is_one_line(fake):
    fake.state.add_topic("t", 1, 1)
    rc, _, err = await replog("produce", "--bootstrap-server", fake.bootstrap, "--topic", "t",
                              "--property", "parse.key=true", stdin=b"novalue\n")
    assert_one_line_error(rc, err, "No key separator found on line number 1")


async def test_produce_to_unknown_topic(fake):
    rc, _, err = await replog("produce", "--bootstrap-server", fake.bootstrap, "--topic", "nope",
                              "--max-block-ms", "500", stdin=b"x\n")
    assert_one_line_error(rc, err, "Topic nope not present in metadata after 500 ms.")


async def test_consume_unknown_topic(fake):
    rc, _, err = await replog("consume", "--bootstrap-server", fake.bootstrap, "--topic", "nope",
                              "--max-block-ms", "300")
    assert rc == 1 and "Error: Topic nope not present in metadata" in err
    assert "Traceback" not in err


async def test_perf_mode_prints_kafkas_summary_line(fake):
    fake.state.add_topic("t", 2, 3)
    rc, out, err = await replog("produce", "--bootstrap-server", fake.bootstrap, "--topic", "t",
                                "--num-records", "2000", "--record-size", "100",
                                "--throughput", "-1", "--batch-size", "4096")
    assert rc == 0, err
    last = out.strip().splitlines()[-1]
    m = re.fullmatch(r"2000 records sent, \d+\.\d{6} records/sec \(\d+\.\d{2} MB/sec\), "
                     r"\d+\.\d{2} ms avg latency, \d+\.\d{2} ms max latency, \d+ ms 50th, "
                     r"\d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.", last)
    assert m, last
    total = sum(len(p.log) and p.next_offset for p in fake.state.topics["t"].partitions)
    assert total == 2000


async def test_perf_mode_counts_failed_records_and_exits_non_zero(fake):
    fake.state.add_topic("t", 1, 3)
    fake.state.produce_errors[("t", 0)].append(ErrorCode.MESSAGE_TOO_LARGE)
    rc, _, err = await replog("produce", "--bootstrap-server", fake.bootstrap, "--topic", "t",
                              "--num-records", "50", "--record-size", "100",
                              "--throughput", "-1")
    assert rc == 1 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("Error: ") and "MESSAGE_TOO_LARGE" in lines[0], err
    assert re.search(r"Error: 50 of 50 records failed \(first error: .*MESSAGE_TOO_LARGE", err)

"""``replog e2e-latency`` (kafka-e2e-latency) and ``replog consume --messages``
(kafka-consumer-perf-test): Kafka's output lines, and bad input as one ``Error:`` line. Runs the
real CLI in a subprocess against the in-process fake brokers."""

from __future__ import annotations

import re

import pytest

from tests.admin.fake_cluster import FakeCluster
from tests.admin.test_cli import assert_one_line_error, replog


@pytest.fixture
async def fake():
    async with FakeCluster(brokers=3) as fc:
        yield fc


@pytest.mark.parametrize("extra,contains", [
    (["--producer-acks", "0"], "Latency testing requires synchronous acknowledgement"),
    (["--acks", "2"], "Invalid value 2 for configuration acks"),
    (["--num-records", "0"], "--num-records must be a positive number"),
    (["--record-size", "4"], "--record-size must be at least 8"),
    (["--throughput", "0"], "--throughput must be a positive number"),
    (["--consumer-property", "no.such=1"], "Unknown consumer property 'no.such'"),
])
async def test_e2e_latency_bad_input_is_one_line(extra, contains):
    args = ["e2e-latency", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
            "--num-records", "10", "--record-size", "100", *extra]
    rc, _, err = await replog(*args)
    assert_one_line_error(rc, err, contains)


async def test_e2e_latency_unknown_topic(fake):
    rc, _, err = await replog("e2e-latency", "--bootstrap-server", fake.bootstrap, "--topic",
                              "nope", "--num-records", "5", "--record-size", "100",
                              "--max-block-ms", "300")
    assert_one_line_error(rc, err, "Topic nope not present in metadata after 300 ms.")


@pytest.mark.parametrize("schedule", [[], ["--throughput", "200"]])
async def test_e2e_latency_prints_kafkas_lines(fake, schedule):
    fake.state.add_topic("t", 4, 3)
    rc, out, err = await replog("e2e-latency", "--bootstrap-server", fake.bootstrap, "--topic",
                                "t", "--num-records", "50", "--record-size", "64",
                                "--acks", "all", *schedule)
    assert rc == 0, err
    lines = out.splitlines()
    assert re.fullmatch(r"0\t\d+\.\d{2}", lines[0]), out
    assert re.fullmatch(r"Avg latency: \d+\.\d{4} ms", lines[1]), out
    assert re.fullmatch(r"Percentiles: 50th = \d+\.\d{2}, 99th = \d+\.\d{2}, "
                        r"99\.9th = \d+\.\d{2}", lines[3]), out
    assert re.fullmatch(r"Max latency: \d+\.\d{2} ms", lines[4]), out
    # every record it timed was written once
    assert sum(p.next_offset for p in fake.state.topics["t"].partitions) == 50


async def test_consume_perf_mode_prints_kafkas_columns(fake):
    fake.state.add_topic("t", 3, 3)
    rc, _, err = await replog("produce", "--bootstrap-server", fake.bootstrap, "--topic", "t",
                              "--num-records", "3000", "--record-size", "100")
    assert rc == 0, err
    rc, out, err = await replog("consume", "--bootstrap-server", fake.bootstrap, "--topic", "t",
                                "--messages", "3000")
    assert rc == 0, err
    header, line = out.strip().splitlines()
    assert header == ("start.time, end.time, data.consumed.in.MB, MB.sec, "
                      "data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, "
                      "fetch.MB.sec, fetch.nMsg.sec")
    date = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
    m = re.fullmatch(rf"{date}, {date}, (\d+\.\d{{4}}), \d+\.\d{{4}}, (\d+), \d+\.\d{{4}}, "
                     rf"\d+, \d+, \d+\.\d{{4}}, \d+\.\d{{4}}", line)
    assert m, line
    assert m.group(2) == "3000"
    assert float(m.group(1)) == round(3000 * 100 / (1024 * 1024), 4)


async def test_consume_perf_mode_stops_after_timeout_with_kafkas_warning(fake):
    fake.state.add_topic("t", 1, 1)
    rc, out, err = await replog("consume", "--bootstrap-server", fake.bootstrap, "--topic", "t",
                                "--messages", "10", "--timeout", "300", "--hide-header")
    assert rc == 0, err
    assert "WARNING: Exiting before consuming the expected number of messages: timeout " \
           "(300 ms) exceeded." in err
    assert ", 0, " in out.strip()


async def test_consume_perf_mode_refuses_console_options():
    rc, _, err = await replog("consume", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
                              "--messages", "10", "--max-messages", "3")
    assert_one_line_error(rc, err, "cannot be used with --max-messages")

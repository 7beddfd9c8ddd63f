"""`replog produce` behaves as kafka-console-producer does by default (Kafka's
tools/.../ConsoleProducer.java): the tool's own defaults for retries (3), request.timeout.ms
(1500), linger.ms (1000), retry.backoff.ms (100) and acks (-1), merged into the producer configs
as CommandLineUtils.maybeMergeOptions does; the Java producer's delivery.timeout.ms rule; a
failed record logged once, as ErrorLoggingCallback logs it; `--sync` sending one record at a
time and stopping at the first failure with exit status 1.

The configuration tests build the producer the command builds (no cluster). The cluster test runs
the real CLI against a real cluster (harness/testing.py): an RF 3 topic with
min.insync.replicas=3 and one broker stopped, so every acks=all produce is refused with
NOT_ENOUGH_REPLICAS. How many Produce requests the brokers answered (their
kafka_network_requestmetrics_requests_total{request="Produce"} counters) says how many times
the tool tried; nothing is timed.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from admin import produce_cmd
from admin.cli import build_parser
from client import Consumer, TopicPartition
from harness.local_cluster import LocalCluster
from tests.cluster.helpers import scrape
from tests.polling import wait_until

REPO = Path(__file__).resolve().parents[2]
PRODUCE_REQUESTS = 'kafka_network_requestmetrics_requests_total{request="Produce"}'
LOGGED = re.compile(
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ERROR Error when sending message to topic "
    r"(\S+) with key: (\d+ bytes|null), value: (\d+ bytes|null) with error: "
    r"\(org\.apache\.kafka\.clients\.producer\.internals\.ErrorLoggingCallback\)$")


def replog(*args: str, stdin: bytes | None = None, timeout: float = 90
           ) -> subprocess.CompletedProcess:
    # The timeout only keeps a hung run from hanging the suite; no assertion is about time.
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "admin.cli", *args], input=stdin,
                          capture_output=True, timeout=timeout, cwd=REPO, env=env, check=False)


def built(*argv: str):
    """The Producer `replog produce ARGV` would use, and its parsed arguments."""
    args = build_parser().parse_args(["produce", "--bootstrap-server", "127.0.0.1:1",
                                      "--topic", "t", *argv])
    return produce_cmd.make_producer(args, perf=args.num_records is not None)


# ---------------------------------------------------------------- configuration, no cluster


def test_console_mode_takes_kafka_console_producers_defaults():
    p = built()
    assert p.retries == 3                       # --message-send-max-retries
    assert p.request_timeout_ms == 1500         # --request-timeout-ms
    assert p.linger_s == 1.0                    # --timeout (linger.ms)
    assert p.retry_backoff_s == 0.1             # --retry-backoff-ms
    assert p.acks == -1                         # --request-required-acks
    assert p.batch_size == 16384                # --batch-size / --max-partition-memory-bytes
    assert p.buffer_memory == 32 * 1024 * 1024  # --max-memory-bytes
    # ConsoleProducer leaves delivery.timeout.ms alone: the producer's 120000 stays, since it is
    # above linger.ms + request.timeout.ms (2500).
    assert p.delivery_timeout_s == 120.0


def test_options_set_the_producer_configs_they_name():
    p = built("--message-send-max-retries", "0", "--request-timeout-ms", "700",
              "--timeout", "20", "--retry-backoff-ms", "50", "--request-required-acks", "1",
              "--max-partition-memory-bytes", "4096", "--max-memory-bytes", "1048576",
              "--metadata-expiry-ms", "9000")
    assert (p.retries, p.request_timeout_ms, p.linger_s, p.retry_backoff_s, p.acks,
            p.batch_size, p.buffer_memory) == (0, 700, 0.02, 0.05, 1, 4096, 1048576)
    assert p.metadata.max_age_s == 9.0


def test_an_option_given_beats_a_producer_property_which_beats_the_tools_default(tmp_path):
    # CommandLineUtils.maybeMergeOptions: a property file, then --producer-property over it;
    # an option replaces the property only when given on the command line.
    config = tmp_path / "producer.properties"
    config.write_text("# comment\nretries=9\nlinger.ms=7\nrequest.timeout.ms=2000\n")
    p = built("--producer.config", str(config), "--producer-property", "linger.ms=8",
              "--request-timeout-ms", "2500")
    assert (p.retries, p.linger_s, p.request_timeout_ms) == (9, 0.008, 2500)


def test_perf_mode_keeps_the_producers_own_defaults():
    # kafka-producer-perf-test sets none of the console tool's defaults.
    p = built("--num-records", "1", "--record-size", "1")
    assert (p.retries, p.request_timeout_ms, p.linger_s) == (None, 30000, 0.005)
    p = built("--num-records", "1", "--record-size", "1", "--producer-props", "retries=2")
    assert p.retries == 2


def test_delivery_timeout_follows_the_java_producers_rule():
    # Left unset, it is raised to linger.ms + request.timeout.ms (KafkaProducer
    # .configureDeliveryTimeout) ...
    assert built("--timeout", "200000").delivery_timeout_s == 201.5
    # ... set explicitly below that sum, it is refused.
    r = replog("produce", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
               "--producer-property", "delivery.timeout.ms=2000", stdin=b"x\n")
    rule = "delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms"
    assert (r.returncode, r.stderr.decode()) == (1, f"Error: {rule}\n")


@pytest.mark.parametrize("argv,message", [
    (["--message-send-max-retries", "-1"],
     "Invalid value -1 for configuration retries: Value must be at least 0"),
    (["--request-timeout-ms", "-5"],
     "Invalid value -5 for configuration request.timeout.ms: Value must be at least 0"),
    (["--producer-property", "retry.backoff.ms=-1"],
     "Invalid value -1 for configuration retry.backoff.ms: Value must be at least 0"),
    (["--producer.config", "/nonexistent/producer.properties"],
     "cannot read config file /nonexistent/producer.properties"),
])
def test_bad_settings_are_one_line_errors(argv, message):
    r = replog("produce", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", *argv,
               stdin=b"x\n")
    err = r.stderr.decode()
    assert r.returncode == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("Error: ") and message in err, err


# ---------------------------------------------------------------- a real cluster


def _produce_requests(cluster: LocalCluster) -> int:
    """Produce requests answered by the running brokers, summed (only this test produces)."""
    return int(sum(scrape(h.metrics_url).get(PRODUCE_REQUESTS, 0)
                   for h in cluster.brokers.values() if h.is_running()))


def _isr(bootstrap: str, topic: str) -> list[int] | None:
    r = replog("topics", "describe", "--bootstrap-server", bootstrap, "--topic", topic)
    m = re.search(r"\tLeader: (-?\d+)\tReplicas: ([\d,]+)\tIsr: ([\d,]*)\t",
                  r.stdout.decode())
    return [int(x) for x in m.group(3).split(",") if x] if m else None


def _logged_failures(stderr: str) -> list[tuple[str, str, str, str]]:
    """(topic, key, value, exception line) of each ErrorLoggingCallback report."""
    lines = stderr.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = LOGGED.match(line)
        if m:
            out.append((*m.groups(), lines[i + 1] if i + 1 < len(lines) else ""))
    return out


def _end_offset(bootstrap: str, topic: str) -> int:
    async def run() -> int:
        async with Consumer(bootstrap) as c:
            tp = TopicPartition(topic, 0)
            return (await c.end_offsets([tp]))[tp]
    return asyncio.run(run())


@pytest.mark.integration
def test_below_min_isr_the_tool_gives_up_after_its_retries_as_kafkas_does(
        cluster: LocalCluster):
    b = cluster.bootstrap_servers
    r = replog("topics", "create", "--bootstrap-server", b, "--topic", "strict",
               "--partitions", "1", "--replication-factor", "3",
               "--config", "min.insync.replicas=3")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: len(_isr(b, "strict") or []) == 3, what="a full ISR")
    describe = replog("topics", "describe", "--bootstrap-server", b, "--topic", "strict")
    leader = int(re.search(r"\tLeader: (\d+)", describe.stdout.decode()).group(1))
    stopped = next(i for i in sorted(cluster.brokers) if i != leader)
    cluster.brokers[stopped].stop()  # controlled shutdown: the controller shrinks the ISR
    rest = sorted(set(cluster.brokers) - {stopped})
    wait_until(lambda: sorted(_isr(b, "strict") or []) == rest,
               what=f"broker {stopped} out of the ISR")

    # The defaults: one batch, tried once and retried 3 times, each answer NOT_ENOUGH_REPLICAS;
    # each record is logged once; the tool's exit status is 0, as ConsoleProducer's is after
    # an asynchronous send failed.
    before = _produce_requests(cluster)
    r = replog("produce", "--bootstrap-server", b, "--topic", "strict",
               stdin=b"one\ntwo\nthree\n")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    failures = _logged_failures(err)
    assert [(t, k, v) for t, k, v, _ in failures] == [
        ("strict", "null", "3 bytes"), ("strict", "null", "3 bytes"),
        ("strict", "null", "5 bytes")], err
    assert all(e.startswith("org.apache.kafka.common.errors.NotEnoughReplicasException: ")
               for *_, e in failures), err
    assert _produce_requests(cluster) - before == 1 + 3

    # --message-send-max-retries 0: one try; a key is logged by its size, as Kafka logs it.
    before = _produce_requests(cluster)
    r = replog("produce", "--bootstrap-server", b, "--topic", "strict",
               "--message-send-max-retries", "0", "--property", "parse.key=true",
               "--property", "key.separator=:", stdin=b"k1:x\n")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert [f[:3] for f in _logged_failures(err)] == [("strict", "2 bytes", "1 bytes")], err
    assert _produce_requests(cluster) - before == 1

    # --sync: the first record fails after its retries, the tool stops there with status 1 and
    # one line; the records after it are never sent.
    before = _produce_requests(cluster)
    r = replog("produce", "--bootstrap-server", b, "--topic", "strict", "--sync",
               stdin=b"a\nb\nc\n")
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.splitlines() == [err.strip()] and err.startswith(
        "Error: org.apache.kafka.common.errors.NotEnoughReplicasException: "), err
    assert _produce_requests(cluster) - before == 1 + 3
    assert _end_offset(b, "strict") == 0  # nothing was appended by any of the runs

    # With the ISR full again, --sync sends each record by itself: one request per record.
    cluster.brokers[stopped].start()
    wait_until(lambda: len(_isr(b, "strict") or []) == 3, what="a full ISR again")
    before = _produce_requests(cluster)
    r = replog("produce", "--bootstrap-server", b, "--topic", "strict", "--sync",
               stdin=b"a\nb\nc\n")
    assert (r.returncode, r.stderr.decode()) == (0, "")
    assert _produce_requests(cluster) - before == 3

    # A record refused by send() itself is logged too, and the records after it are sent.
    r = replog("produce", "--bootstrap-server", b, "--topic", "strict",
               "--producer-property", "max.request.size=200", stdin=b"x" * 300 + b"\nd\n")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    failures = _logged_failures(err)
    assert [f[:3] for f in failures] == [("strict", "null", "300 bytes")], err
    assert failures[0][3].startswith(
        "org.apache.kafka.common.errors.RecordTooLargeException: The message is "), err
    r = replog("consume", "--bootstrap-server", b, "--topic", "strict", "--from-beginning",
               "--max-messages", "4", "--timeout-ms", "30000")
    assert r.stdout.decode().splitlines() == ["a", "b", "c", "d"], r.stderr

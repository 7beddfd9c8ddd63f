"""``replog produce`` — kafka-console-producer, and kafka-producer-perf-test in perf mode.

Console mode reads lines from stdin and sends each as one record (``--property parse.key=true
--property key.separator=:`` splits a key off each line), with kafka-console-producer's options
and defaults (Kafka's tools/.../ConsoleProducer.java): ``--message-send-max-retries`` (retries,
3), ``--request-timeout-ms`` (1500), ``--timeout`` (linger.ms, 1000), ``--retry-backoff-ms``
(100), ``--request-required-acks`` (-1), ``--batch-size``/``--max-partition-memory-bytes``
(batch.size), ``--max-memory-bytes`` (buffer.memory), ``--metadata-expiry-ms``
(metadata.max.age.ms), ``--producer-property``, ``--producer.config``. An option given on the
command line beats the same setting in ``--producer-property``, which beats
``--producer.config``; an option's default applies only when neither sets it (Kafka's
CommandLineUtils.maybeMergeOptions). delivery.timeout.ms follows the Java producer's rule: at
least linger.ms + request.timeout.ms (raised to that sum when unset, refused when set lower).

Sends are asynchronous and batched; records keep their input order (one batch in flight per
partition). A record that cannot be delivered - after its retries, or when the delivery timeout
ends them - is logged once on stderr as Kafka's ErrorLoggingCallback logs it, and the rest of the
input is still sent. As with kafka-console-producer, the exit status is then 0 (its
asynchronous failures are only logged). ``--sync`` sends one record at a time, waiting for each;
the first record that fails stops the command with one ``Error:`` line and exit status 1, as
ConsoleProducer's ``send(record).get()`` does.

An unknown topic is created by the broker when its ``auto.create.topics.enable`` is true (Kafka's
default), as for Kafka's producer; ``--max-block-ms`` (Kafka's 60000) bounds the wait for it.
Where replog differs: a topic that is not there by then fails once, before any input is read,
with one line (Kafka logs a metadata timeout for every record); a synchronous send does not
wait out linger.ms (Kafka's ``--timeout`` is
documented for asynchronous mode); the idempotent producer does not exist.

Perf mode (``--num-records N --record-size S``) sends N records of S bytes as fast as allowed by
``--throughput`` (records/s, -1 = unthrottled), printing a window line every 5 s and Kafka's
final line::

    N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency,
    p50 ms 50th, p95 ms 95th, p99 ms 99th, p999 ms 99.9th.

Latency is from send() to acknowledgement, as in Kafka's ProducerPerformance; only acknowledged
records are counted. Perf mode keeps the producer's own defaults (kafka-producer-perf-test sets
none of the console tool's).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import sys
import time
from array import array
from datetime import datetime
from typing import NamedTuple

from admin import options
from client import KafkaError, Producer
from client.errors import KafkaTimeoutError, RecordTooLargeError, UnknownTopicError
from common import event_loop
from common.compression import codec_of
from common.errors import ErrorCode, ReplogError
from common.properties import parse_properties_text


def _kafka_bool(text: str) -> bool:
    """A boolean config as Kafka's ConfigDef parses one: true or false, any case."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(text)
    return value == "true"


def _codec_name(text: str) -> str:
    codec_of(text)  # ValueError: Kafka's ConfigException for an unknown codec
    return text.strip().lower()


# Producer settings accepted by --producer-property / --producer-props (Kafka's names).
_PRODUCER_KEYS = {
    "acks": ("acks", str),
    "batch.size": ("batch_size", int),
    "linger.ms": ("linger_ms", float),
    "buffer.memory": ("buffer_memory", int),
    "max.request.size": ("max_request_size", int),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retries": ("retries", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "retry.backoff.max.ms": ("retry_backoff_max_ms", int),
    "max.block.ms": ("max_block_ms", int),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests_per_connection", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    # replog's own: false sends each request as a unary Produce call instead of on the
    # broker's long-lived ProduceStream (the A/B baseline; client/producer.py).
    "produce.stream.enable": ("produce_stream_enable", _kafka_bool),
    "compression.type": ("compression_type", _codec_name),
    # Accepted and ignored: replog has no idempotent producer.
    "bootstrap.servers": (None, str),
    "enable.idempotence": (None, str),
    "client.id": (None, str),
    "key.serializer": (None, str),
    "value.serializer": (None, str),
}


def parse_kv(items: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise ReplogError(f"Invalid {what} {item!r}: expected key=value")
        out[k.strip()] = v.strip()
    return out


def client_kwargs(props: dict[str, str], keys: dict[str, tuple[str | None, type]],
                  what: str) -> dict:
    """Kafka-named client settings -> the client class's keyword arguments (``keys`` maps a
    Kafka name to (argument name or None to ignore it, converter))."""
    out: dict = {}
    for k, v in props.items():
        spec = keys.get(k)
        if spec is None:
            raise ReplogError(f"Unknown {what} property '{k}' (supported: "
                              f"{', '.join(sorted(keys))})")
        name, conv = spec
        if name is None:
            continue
        try:
            out[name] = conv(v)
        except ValueError:
            raise ReplogError(f"Invalid value {v!r} for {what} property '{k}'") from None
    return out


def producer_kwargs(props: dict[str, str]) -> dict:
    return client_kwargs(props, _PRODUCER_KEYS, "producer")


def _unescape(s: str) -> str:
    return s.encode("utf-8").decode("unicode_escape") if "\\" in s else s


class LineParser:
    """Kafka's LineMessageReader: ``parse.key``, ``key.separator``, ``ignore.error``."""

    def __init__(self, props: dict[str, str]):
        self.parse_key = props.get("parse.key", "false").lower() == "true"
        self.key_separator = _unescape(props.get("key.separator", "\t"))
        self.ignore_error = props.get("ignore.error", "false").lower() == "true"
        self.null_marker = props.get("null.marker")
        unknown = set(props) - {"parse.key", "key.separator", "ignore.error", "null.marker"}
        if unknown:
            raise ReplogError(f"Unknown --property {', '.join(sorted(unknown))} (supported: "
                              f"parse.key, key.separator, ignore.error, null.marker)")

    def parse(self, line: bytes, lineno: int) -> tuple[bytes | None, bytes | None]:
        key = None
        value: bytes | None = line
        if self.parse_key:
            sep = self.key_separator.encode("utf-8")
            idx = line.find(sep)
            if idx < 0:
                if not self.ignore_error:
                    raise ReplogError(f"No key separator found on line number {lineno}: "
                                      f"'{line.decode('utf-8', 'replace')}'")
            else:
                key, value = line[:idx], line[idx + len(sep):]
        if self.null_marker is not None:
            marker = self.null_marker.encode("utf-8")
            key = None if key == marker else key
            value = None if value == marker else value
        return key, value


async def _read_lines(fd: int):
    """Lines of ``fd`` (without the newline), read off the event loop in chunks, so piped
    input is read fast and interactive input is sent line by line."""
    loop = asyncio.get_running_loop()
    pending = b""
    while True:
        chunk = await loop.run_in_executor(None, os.read, fd, 1 << 16)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    if pending:
        yield pending


class _Option(NamedTuple):
    """A kafka-console-producer option that sets a producer config."""

    flags: tuple[str, ...]
    dest: str
    config: str
    default: str | None  # kafka-console-producer's (ConsoleProducerOptions), None: none
    type: type
    help: str


# In ConsoleProducer.producerProps' merge order (batch.size twice: --max-partition-memory-bytes
# replaces --batch-size only when given)
_CONSOLE_OPTIONS = (
    _Option(("--timeout",), "linger_ms", "linger.ms", "1000", float,
            "linger.ms: how long a batch waits for more records"),
    _Option(("--request-required-acks", "--acks"), "acks", "acks", "-1", str,
            "acks: all (-1), 1 or 0"),
    _Option(("--request-timeout-ms",), "request_timeout_ms", "request.timeout.ms", "1500", int,
            "request.timeout.ms: the ack timeout of a produce request"),
    _Option(("--message-send-max-retries",), "message_send_max_retries", "retries", "3", int,
            "retries: attempts after the first before a record fails"),
    _Option(("--retry-backoff-ms",), "retry_backoff_ms", "retry.backoff.ms", "100", int,
            "retry.backoff.ms: the wait before a retry"),
    _Option(("--max-memory-bytes",), "max_memory_bytes", "buffer.memory",
            str(32 * 1024 * 1024), int, "buffer.memory: bytes buffered for sending"),
    _Option(("--batch-size",), "batch_size", "batch.size", "16384", int,
            "batch.size in bytes"),
    _Option(("--max-partition-memory-bytes",), "max_partition_memory_bytes", "batch.size",
            "16384", int, "batch.size too; replaces --batch-size when given"),
    _Option(("--metadata-expiry-ms",), "metadata_expiry_ms", "metadata.max.age.ms", "300000",
            int, "metadata.max.age.ms: the forced metadata refresh period"),
    _Option(("--max-block-ms",), "max_block_ms", "max.block.ms", "60000", int,
            "max.block.ms: how long to wait for the topic's metadata or buffer space"),
    # ConsoleProducer: given without a value it is gzip
    _Option(("--compression-codec",), "compression_codec", "compression.type", "none",
            _codec_name, "compression.type: none, gzip, snappy, lz4 or zstd; gzip when given "
                         "without a value"),
)
# Perf mode: only options given on the command line (kafka-producer-perf-test keeps the
# producer's defaults).
_PERF_DEFAULTS: dict[str, str] = {}


def _producer_default(name: str):
    return inspect.signature(Producer).parameters[name].default


def _read_properties(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ReplogError(f"cannot read config file {path}: {e.strerror or e}") from None
    return {k: v for k, v, _ in parse_properties_text(text, path)}


def producer_settings(args, props: dict[str, str], perf: bool) -> dict[str, str]:
    """The producer configs, by Kafka name: ``--producer.config``'s file, then ``props`` over
    it, then each option as CommandLineUtils.maybeMergeOptions merges it - always when given,
    otherwise (console mode) its default only where nothing set the key."""
    out = _read_properties(args.producer_config) if args.producer_config else {}
    out.update(props)
    for opt in _CONSOLE_OPTIONS:
        given = getattr(args, opt.dest)
        if given is not None:
            out[opt.config] = str(given)
        elif opt.config not in out:
            fallback = _PERF_DEFAULTS.get(opt.config) if perf else opt.default
            if fallback is not None:
                out[opt.config] = fallback
    return out


def _check_delivery_timeout(kw: dict) -> None:
    """KafkaProducer.configureDeliveryTimeout: a record must be allowed its linger and one
    request. An unset delivery.timeout.ms below linger.ms + request.timeout.ms is raised to that
    sum; one set below it is refused."""
    linger = kw.get("linger_ms", _producer_default("linger_ms"))
    request = kw.get("request_timeout_ms", _producer_default("request_timeout_ms"))
    floor = linger + request
    if "delivery_timeout_ms" in kw:
        if kw["delivery_timeout_ms"] < floor:
            raise ReplogError("delivery.timeout.ms should be equal to or larger than "
                              "linger.ms + request.timeout.ms")
    elif _producer_default("delivery_timeout_ms") < floor:
        kw["delivery_timeout_ms"] = int(floor) if floor == int(floor) else floor


def make_producer(args, perf: bool) -> Producer:
    props = parse_kv(args.producer_props if perf else args.producer_property,
                     "--producer-props" if perf else "--producer-property")
    if not perf:
        # Input order is record order: one batch in flight per partition (replog has no
        # idempotent producer to keep the order with more).
        props.setdefault("max.in.flight.requests.per.connection", "1")
    kw = producer_kwargs(producer_settings(args, props, perf))
    for key, (name, conv) in _PRODUCER_KEYS.items():
        # ProducerConfig's validators: these are all atLeast(0).
        if name is not None and conv in (int, float) and kw.get(name, 0) < 0:
            raise ReplogError(f"Invalid value {kw[name]:g} for configuration {key}: "
                              f"Value must be at least 0")
    _check_delivery_timeout(kw)
    return Producer(args.bootstrap_server, **kw)


# The Kafka exception a producer callback receives for an error code, and its message when the
# broker sent none (org.apache.kafka.common.protocol.Errors), for the codes a produce can end
# with. Any other code's class is its name in CamelCase + "Exception".
_JAVA_EXCEPTIONS = {
    ErrorCode.UNKNOWN_SERVER_ERROR: (
        "UnknownServerException",
        "The server experienced an unexpected error when processing the request."),
    ErrorCode.CORRUPT_MESSAGE: (
        "CorruptRecordException",
        ("This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
         "compacted topic, or is otherwise corrupt.")),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: (
        "UnknownTopicOrPartitionException", "This server does not host this topic-partition."),
    ErrorCode.LEADER_NOT_AVAILABLE: (
        "LeaderNotAvailableException",
        ("There is no leader for this topic-partition as we are in the middle of a leadership "
         "election.")),
    ErrorCode.NOT_LEADER_OR_FOLLOWER: (
        "NotLeaderOrFollowerException",
        ("For requests intended only for the leader, this error indicates that the broker is not "
         "the current leader.")),
    ErrorCode.REQUEST_TIMED_OUT: ("TimeoutException", "The request timed out."),
    ErrorCode.BROKER_NOT_AVAILABLE: ("BrokerNotAvailableException",
                                     "The broker is not available."),
    ErrorCode.MESSAGE_TOO_LARGE: (
        "RecordTooLargeException",
        ("The request included a message larger than the max message size the server will "
         "accept.")),
    ErrorCode.INVALID_TOPIC_EXCEPTION: (
        "InvalidTopicException",
        "The request attempted to perform an operation on an invalid topic."),
    ErrorCode.RECORD_LIST_TOO_LARGE: (
        "RecordBatchTooLargeException",
        ("The request included message batch larger than the configured segment size on the "
         "server.")),
    ErrorCode.NOT_ENOUGH_REPLICAS: (
        "NotEnoughReplicasException",
        "Messages are rejected since there are fewer in-sync replicas than required."),
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: (
        "NotEnoughReplicasAfterAppendException",
        "Messages are written to the log, but to fewer in-sync replicas than required."),
    ErrorCode.KAFKA_STORAGE_ERROR: (
        "KafkaStorageException", "Disk error when trying to access log file on the disk."),
    ErrorCode.INVALID_RECORD: (
        "InvalidRecordException",
        "This record has failed the validation on broker and hence will be rejected."),
    # DeleteRecords' (replog delete-records)
    ErrorCode.OFFSET_OUT_OF_RANGE: (
        "OffsetOutOfRangeException",
        "The requested offset is not within the range of offsets maintained by the server."),
    ErrorCode.POLICY_VIOLATION: (
        "PolicyViolationException", "Request parameters do not satisfy the configured policy."),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: (
        "TopicAuthorizationException", "Topic authorization failed."),
}


def java_exception(err: BaseException) -> str:
    """``err`` as the Java producer's exception prints (``class: message``): what Kafka's
    tools show for a failed send. replog's own message is kept where there is one."""
    if not isinstance(err, KafkaError):
        return f"org.apache.kafka.common.KafkaException: {err}"
    if isinstance(err, (KafkaTimeoutError, UnknownTopicError)):
        # The producer's TimeoutException: delivery.timeout.ms or max.block.ms ran out.
        return f"org.apache.kafka.common.errors.TimeoutException: {err.message}"
    name, default = _JAVA_EXCEPTIONS.get(err.error_code, (None, None))
    if name is None:
        name = err.name.title().replace("_", "") + "Exception"
    return f"org.apache.kafka.common.errors.{name}: {err.message or default or err.name}"


def log_send_error(topic: str, key: bytes | None, value: bytes | None,
                   err: BaseException) -> None:
    """ErrorLoggingCallback with logAsString=false, as ConsoleProducer creates it, through the
    tools' log4j layout ``[%d] %p %m (%c)%n``: key and value are logged by their size."""
    k = "null" if key is None else f"{len(key)} bytes"
    v = "null" if value is None else f"{len(value)} bytes"
    now = datetime.now().isoformat(sep=" ", timespec="milliseconds").replace(".", ",")
    print(f"[{now}] ERROR Error when sending message to topic {topic} with key: {k}, value: {v} "
          f"with error: (org.apache.kafka.clients.producer.internals.ErrorLoggingCallback)\n"
          f"{java_exception(err)}", file=sys.stderr, flush=True)


def _reader_properties(args) -> dict[str, str]:
    """``--reader-config``'s file, then ``--property`` over it (ConsoleProducer.readerProps)."""
    props = _read_properties(args.reader_config) if args.reader_config else {}
    props.update(parse_kv(args.property, "--property"))
    return props


async def console_produce(args) -> int:
    parser = LineParser(_reader_properties(args))
    producer = make_producer(args, perf=False)
    topic = args.topic

    def on_done(fut: asyncio.Future, key: bytes | None, value: bytes | None) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            log_send_error(topic, key, value, fut.exception())

    async with producer:
        await producer.partitions_for(topic)  # an unknown topic fails before any input
        lineno = 0
        async for line in _read_lines(sys.stdin.fileno()):
            lineno += 1
            key, value = parser.parse(line, lineno)
            if args.sync:
                # ConsoleProducer: producer.send(record).get(); its failure ends the tool.
                try:
                    fut = await producer.send(topic, value, key)
                    await producer.flush()
                    await fut
                except KafkaError as e:
                    raise ReplogError(java_exception(e)) from None
                continue
            try:
                fut = await producer.send(topic, value, key)
            except (RecordTooLargeError, KafkaTimeoutError, UnknownTopicError) as e:
                # KafkaProducer.doSend hands an ApiException raised in send() (a record too
                # large, max.block.ms ran out) to the callback; the tool goes on.
                log_send_error(topic, key, value, e)
                continue
            fut.add_done_callback(lambda f, k=key, v=value: on_done(f, k, v))
        await producer.flush()
    return 0


class PerfStats:
    """Kafka ProducerPerformance.Stats: window lines every 5 s and the final summary."""

    def __init__(self, num_records: int, reporting_interval_s: float = 5.0, out=sys.stdout):
        self.start = time.monotonic()
        self.window_start = self.start
        self.latencies = array("i")
        self.count = 0
        self.bytes = 0
        self.max_latency = 0
        self.total_latency = 0
        self.window_count = 0
        self.window_max = 0
        self.window_total = 0
        self.window_bytes = 0
        self.interval = reporting_interval_s
        self.out = out
        self.sampling = max(1, num_records // min(max(num_records, 1), 500000))
        self.iteration = 0

    def record(self, latency_ms: int, size: int, now: float) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total += latency_ms
        self.window_max = max(self.window_max, latency_ms)
        if self.iteration % self.sampling == 0:
            self.latencies.append(latency_ms)
        self.iteration += 1
        if now - self.window_start >= self.interval:
            self.print_window(now)

    def print_window(self, now: float) -> None:
        elapsed = max(now - self.window_start, 1e-9)
        n = max(self.window_count, 1)
        print("%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, "
              "%.1f ms max latency." % (self.window_count, self.window_count / elapsed,
                                        self.window_bytes / elapsed / (1024 * 1024),
                                        self.window_total / n, float(self.window_max)),
              file=self.out, flush=True)
        self.window_start = now
        self.window_count = self.window_bytes = self.window_total = self.window_max = 0

    def percentiles(self, *ps: float) -> list[int]:
        values = sorted(self.latencies)
        if not values:
            return [0 for _ in ps]
        return [values[min(int(p * len(values)), len(values) - 1)] for p in ps]

    def total_line(self, now: float | None = None) -> str:
        elapsed = max((now or time.monotonic()) - self.start, 1e-9)
        p50, p95, p99, p999 = self.percentiles(0.5, 0.95, 0.99, 0.999)
        avg = self.total_latency / self.count if self.count else 0.0
        return ("%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, "
                "%.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th."
                % (self.count, self.count / elapsed, self.bytes / elapsed / (1024 * 1024), avg,
                   float(self.max_latency), p50, p95, p99, p999))


async def perf_produce(args) -> int:
    if args.num_records is None or args.record_size is None:
        raise ReplogError("perf mode needs both --num-records and --record-size")
    if args.num_records < 0 or args.record_size < 0:
        raise ReplogError("--num-records and --record-size must not be negative")
    producer = make_producer(args, perf=True)
    rng = random.Random(args.seed)
    # Kafka's perf test: one random payload of uppercase letters, sent N times.
    payload = bytes(rng.randrange(65, 91) for _ in range(args.record_size))
    stats = PerfStats(args.num_records)
    failures = 0
    first_error: BaseException | None = None
    size = len(payload)

    def on_done(err: BaseException | None, started: float) -> None:
        nonlocal failures, first_error
        now = time.monotonic()
        if err is None:
            stats.record(int((now - started) * 1000), size, now)
        else:
            failures += 1
            if first_error is None:
                first_error = err
                print(f"Error: {err}", file=sys.stderr)

    async with producer:
        await producer.partitions_for(args.topic)
        start = time.monotonic()
        for i in range(args.num_records):
            if args.throughput > 0:
                ahead = i / args.throughput - (time.monotonic() - start)
                if ahead > 0:
                    await asyncio.sleep(ahead)
            t0 = time.monotonic()
            # Kafka's perf test uses send(record, callback) too: no future per record.
            await producer.send(args.topic, payload,
                                callback=lambda _md, err, t=t0: on_done(err, t))
        await producer.flush()
    print(stats.total_line(), flush=True)
    if failures:
        raise ReplogError(f"{failures} of {args.num_records} records failed "
                          f"(first error: {first_error})")
    return 0


def _run(args) -> int:
    perf = args.num_records is not None or args.record_size is not None
    try:
        return event_loop.run(perf_produce(args) if perf else console_produce(args))
    except KafkaError as e:
        raise ReplogError(str(e)) from None


def add_parsers(sub) -> None:
    p = sub.add_parser("produce", parents=[options.client()],
                       help="send lines from stdin (kafka-console-producer), or a "
                            "load test with --num-records (kafka-producer-perf-test)")
    p.add_argument("--topic", required=True)
    # Defaults are None: an option given replaces the setting, one not given supplies
    # kafka-console-producer's default only where no property set it (producer_settings).
    p.add_argument("--sync", action="store_true",
                   help="send one record at a time, waiting for each; the first failure ends "
                        "the command with exit status 1")
    for opt in _CONSOLE_OPTIONS:
        optional = {"nargs": "?", "const": "gzip"} if opt.dest == "compression_codec" else {}
        p.add_argument(*opt.flags, dest=opt.dest, type=opt.type,
                       help=f"{opt.help} (default {opt.default})", **optional)
    p.add_argument("--producer-property", action="append", metavar="KEY=VALUE",
                   help="producer setting by Kafka name, e.g. linger.ms=5 (repeatable); an "
                        "option given on the command line takes precedence")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                   help="producer settings from a properties file; --producer-property takes "
                        "precedence")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="line reader setting: parse.key, key.separator, ignore.error, "
                        "null.marker (repeatable)")
    p.add_argument("--reader-config", metavar="FILE",
                   help="line reader settings from a properties file; --property takes "
                        "precedence")
    perf = p.add_argument_group(
        "perf mode (kafka-producer-perf-test)",
        "The defaults above are kafka-console-producer's; perf mode keeps the producer's own "
        "(acks all, retries until delivery.timeout.ms, request.timeout.ms 30000, linger.ms 5, "
        "max.block.ms 60000).")
    perf.add_argument("--num-records", type=int, help="records to send")
    perf.add_argument("--record-size", type=int, help="bytes per record")
    perf.add_argument("--throughput", type=float, default=-1,
                      help="records/s limit, -1 for none (default -1)")
    perf.add_argument("--producer-props", nargs="+", metavar="KEY=VALUE",
                      help="producer settings, e.g. acks=all batch.size=65536 linger.ms=5")
    perf.add_argument("--seed", type=int, default=None, help="payload generator seed")
    p.set_defaults(func=_run)

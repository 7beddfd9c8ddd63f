"""``replog produce`` — kafka-console-producer, and kafka-producer-perf-test in perf mode.

Console mode reads lines from stdin and sends each as one record (``--property parse.key=true
--property key.separator=:`` splits a key off each line). Sends are asynchronous and batched;
records keep their input order (one batch in flight per partition). A record that cannot be
delivered is reported on stderr as Kafka's ErrorLoggingCallback does, and the command exits 1
at the end; a topic that does not exist fails at once with one line.

Perf mode (``--num-records N --record-size S``) sends N records of S bytes as fast as allowed by
``--throughput`` (records/s, -1 = unthrottled), printing a window line every 5 s and Kafka's
final line::

    N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency,
    p50 ms 50th, p95 ms 95th, p99 ms 99th, p999 ms 99.9th.

Latency is from send() to acknowledgement, as in Kafka's ProducerPerformance; only acknowledged
records are counted.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from array import array

from admin.client import KafkaError, Producer
from common import event_loop
from common.errors import ReplogError

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
    # Accepted and ignored: replog has neither compression nor an idempotent producer.
    "bootstrap.servers": (None, str),
    "compression.type": (None, str),
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


def _make_producer(args, extra: dict[str, str]) -> Producer:
    props = parse_kv(args.producer_property, "--producer-property")
    props.update(extra)
    kw = {"acks": args.acks, "max_block_ms": args.max_block_ms,
          "request_timeout_ms": args.request_timeout_ms}
    if args.batch_size is not None:
        kw["batch_size"] = args.batch_size
    kw.update(producer_kwargs(props))
    return Producer(args.bootstrap_server, **kw)


async def console_produce(args) -> int:
    parser = LineParser(parse_kv(args.property, "--property"))
    extra = {}
    if args.linger_ms is not None:
        extra["linger.ms"] = str(args.linger_ms)
    # Input order is record order: one batch in flight per partition.
    extra.setdefault("max.in.flight.requests.per.connection", "1")
    producer = _make_producer(args, extra)
    failures = 0
    sent = 0
    first_error: BaseException | None = None

    def on_done(fut: asyncio.Future, key: bytes | None, size: int) -> None:
        nonlocal failures, first_error
        if fut.cancelled():
            return
        err = fut.exception()
        if err is not None:
            failures += 1
            if first_error is None:
                first_error = err
            k = key.decode("utf-8", "replace") if key is not None else "null"
            print(f"Error when sending message to topic {args.topic} with key: {k}, value: "
                  f"{size} bytes with error: {err}", file=sys.stderr)

    async with producer:
        await producer.partitions_for(args.topic)  # an unknown topic fails before any input
        lineno = 0
        async for line in _read_lines(sys.stdin.fileno()):
            lineno += 1
            key, value = parser.parse(line, lineno)
            fut = await producer.send(args.topic, value, key)
            size = len(value) if value is not None else -1
            fut.add_done_callback(lambda f, k=key, s=size: on_done(f, k, s))
            sent += 1
        await producer.flush()
    if failures:
        raise ReplogError(f"{failures} of {sent} records were not acknowledged "
                          f"(first error: {first_error})")
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
    extra = parse_kv(args.producer_props, "--producer-props")
    producer = _make_producer(args, extra)
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
    p = sub.add_parser("produce", help="send lines from stdin (kafka-console-producer), or a "
                                       "load test with --num-records (kafka-producer-perf-test)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                   help="any broker of the cluster (host:port[,host:port...])")
    p.add_argument("--topic", required=True)
    p.add_argument("--acks", "--request-required-acks", default="all",
                   help="all (-1), 1 or 0 (default all)")
    p.add_argument("--batch-size", type=int, help="batch.size in bytes (default 16384)")
    p.add_argument("--timeout", dest="linger_ms", type=float,
                   help="linger.ms: how long a batch waits for more records")
    p.add_argument("--max-block-ms", type=int, default=5000,
                   help="how long to wait for the topic's metadata / buffer space "
                        "(default 5000)")
    p.add_argument("--request-timeout-ms", type=int, default=30000)
    p.add_argument("--producer-property", action="append", metavar="KEY=VALUE",
                   help="producer setting by Kafka name, e.g. linger.ms=5 (repeatable)")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="line reader setting: parse.key, key.separator, ignore.error, "
                        "null.marker (repeatable)")
    perf = p.add_argument_group("perf mode (kafka-producer-perf-test)")
    perf.add_argument("--num-records", type=int, help="records to send")
    perf.add_argument("--record-size", type=int, help="bytes per record")
    perf.add_argument("--throughput", type=float, default=-1,
                      help="records/s limit, -1 for none (default -1)")
    perf.add_argument("--producer-props", nargs="+", metavar="KEY=VALUE",
                      help="producer settings, e.g. acks=all batch.size=65536 linger.ms=5")
    perf.add_argument("--seed", type=int, default=None, help="payload generator seed")
    p.set_defaults(func=_run)

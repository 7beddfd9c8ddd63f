"""``replog consume`` — kafka-console-consumer.

Prints each record's value (and with ``--property print.key=true`` etc. the other fields, laid
out by Kafka's DefaultMessageFormatter) to stdout, and "Processed a total of N messages" to
stderr when it stops: after ``--max-messages``, after ``--timeout-ms`` without a record, or on
Ctrl-C. Without ``--partition`` it reads every partition of the topic. It starts at the end of
each partition unless ``--from-beginning`` or ``--offset`` says otherwise (``--offset`` takes a
number, ``earliest`` or ``latest``, and needs ``--partition``, as in Kafka).

Perf mode (``--messages N``) is kafka-consumer-perf-test: it reads N records of every partition
of the topic from the beginning (``--from-latest``: from the end) without printing them, then
prints Kafka's ConsumerPerformance header and line::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

MB is 1024*1024 bytes of keys and values, as in Kafka. replog has no consumer groups, so
rebalance.time.ms is the time to assign the partitions and find their start offsets (metadata
and ListOffsets), the part of start-up Kafka's group join stands for; fetch.* figures exclude it.
It stops early when no record arrives for ``--timeout`` ms (Kafka's warning on stderr).
``--show-detailed-stats`` adds a line every ``--reporting-interval`` ms.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from datetime import datetime

from admin import options
from admin.produce_cmd import _unescape, client_kwargs, parse_kv
from client import Consumer, ConsumerRecord, KafkaError, TopicPartition
from common import event_loop
from common.errors import ReplogError

_FORMATTER_KEYS = {"print.timestamp", "print.key", "print.offset", "print.partition",
                   "print.headers", "print.value", "key.separator", "line.separator",
                   "headers.separator", "null.literal"}


class MessageFormatter:
    """Kafka's DefaultMessageFormatter (kafka.tools.DefaultMessageFormatter)."""

    def __init__(self, props: dict[str, str]):
        unknown = set(props) - _FORMATTER_KEYS
        if unknown:
            raise ReplogError(f"Unknown --property {', '.join(sorted(unknown))} (supported: "
                              f"{', '.join(sorted(_FORMATTER_KEYS))})")

        def flag(name: str, default: bool = False) -> bool:
            return props.get(name, str(default)).strip().lower() == "true"

        self.print_timestamp = flag("print.timestamp")
        self.print_key = flag("print.key")
        self.print_offset = flag("print.offset")
        self.print_partition = flag("print.partition")
        self.print_headers = flag("print.headers")
        self.print_value = flag("print.value", True)
        self.key_separator = _unescape(props.get("key.separator", "\t")).encode()
        self.line_separator = _unescape(props.get("line.separator", "\n")).encode()
        self.headers_separator = _unescape(props.get("headers.separator", ",")).encode()
        self.null_literal = props.get("null.literal", "null").encode()

    def format(self, r: ConsumerRecord) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            fields.append(f"{r.timestamp_type}:{r.timestamp}".encode())
        if self.print_partition:
            fields.append(f"Partition:{r.partition}".encode())
        if self.print_offset:
            fields.append(f"Offset:{r.offset}".encode())
        if self.print_headers:
            if r.headers:
                fields.append(self.headers_separator.join(
                    k.encode() + b":" + (v if v is not None else self.null_literal)
                    for k, v in r.headers))
            else:
                fields.append(b"NO_HEADERS")
        if self.print_key:
            fields.append(r.key if r.key is not None else self.null_literal)
        if self.print_value:
            fields.append(r.value if r.value is not None else self.null_literal)
        return self.key_separator.join(fields) + self.line_separator


async def console_consume(args, out=None) -> int:
    out = out or sys.stdout.buffer
    formatter = MessageFormatter(parse_kv(args.property, "--property"))
    if args.offset is not None and args.partition is None:
        raise ReplogError("The partition is required when offset is specified.")
    if args.offset is not None and args.from_beginning:
        raise ReplogError("Options from-beginning and offset cannot be specified together.")
    offset: int | str | None = None
    if args.offset is not None:
        o = args.offset.strip().lower()
        if o in ("earliest", "latest"):
            offset = o
        else:
            try:
                offset = int(o)
            except ValueError:
                offset = -1
            if offset < 0:
                raise ReplogError(f"The provided offset value '{args.offset}' is incorrect. "
                                  f"Valid values are 'earliest', 'latest', or a non-negative "
                                  f"long.")
    reset = "earliest" if args.from_beginning or offset == "earliest" else "latest"
    kw = consumer_kwargs(parse_kv(args.consumer_property, "--consumer-property"))
    consumer = Consumer(args.bootstrap_server, auto_offset_reset=reset,
                        max_block_ms=args.max_block_ms, **kw)
    count = 0
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    try:
        async with consumer:
            if args.partition is not None:
                tps = [TopicPartition(args.topic, args.partition)]
                await consumer.assign(tps)
            else:
                tps = await consumer.assign_topic(args.topic)
            if isinstance(offset, int):
                consumer.seek(tps[0], offset)
            elif reset == "earliest":
                consumer.seek_to_beginning()
            else:
                consumer.seek_to_end()
            last_record = time.monotonic()
            while not stop.is_set():
                if args.max_messages is not None and count >= args.max_messages:
                    break
                wait_ms = 1000
                if args.timeout_ms is not None:
                    left = args.timeout_ms / 1000 - (time.monotonic() - last_record)
                    if left <= 0:
                        break
                    wait_ms = max(1, int(min(left, 1.0) * 1000))
                poll = asyncio.ensure_future(consumer.poll(wait_ms))
                stopper = asyncio.ensure_future(stop.wait())
                await asyncio.wait({poll, stopper}, return_when=asyncio.FIRST_COMPLETED)
                stopper.cancel()
                if not poll.done():
                    poll.cancel()
                    break
                records = poll.result()
                if records:
                    last_record = time.monotonic()
                for r in records:
                    if args.max_messages is not None and count >= args.max_messages:
                        break
                    out.write(formatter.format(r))
                    count += 1
                out.flush()
    finally:
        print(f"Processed a total of {count} messages", file=sys.stderr, flush=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
    return 0


# Consumer settings accepted by --consumer-property (Kafka's names).
_CONSUMER_KEYS = {
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
}


def consumer_kwargs(props: dict[str, str]) -> dict:
    return client_kwargs(props, _CONSUMER_KEYS, "consumer")


def _java_date(fmt: str, t: float) -> str:
    """Kafka's default --date-format ``yyyy-MM-dd HH:mm:ss:SSS`` (the only Java pattern
    letters replog translates: y M d H m s S)."""
    d = datetime.fromtimestamp(t)
    out = fmt.replace("yyyy", f"{d.year:04d}").replace("MM", f"{d.month:02d}")
    out = out.replace("dd", f"{d.day:02d}").replace("HH", f"{d.hour:02d}")
    out = out.replace("mm", f"{d.minute:02d}").replace("ss", f"{d.second:02d}")
    return out.replace("SSS", f"{d.microsecond // 1000:03d}")


class ConsumerPerfStats:
    """Kafka ConsumerPerformance's counters and its output lines."""

    HEADER_FIELDS = ("data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                     "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")

    def __init__(self, date_format: str):
        self.date_format = date_format
        self.start = time.time()
        self.rebalance_ms = 0
        self.bytes = 0
        self.messages = 0
        self.last_report = self.start
        self.last_bytes = 0
        self.last_messages = 0

    def header(self, detailed: bool) -> str:
        lead = "time, threadId, " if detailed else "start.time, end.time, "
        return lead + self.HEADER_FIELDS

    def _line(self, t0: float, t1: float, nbytes: int, nmsg: int, rebalance_ms: int) -> str:
        elapsed_s = max(t1 - t0, 1e-9)
        fetch_ms = max(int((t1 - t0) * 1000) - rebalance_ms, 0)
        mb = nbytes / (1024 * 1024)
        fetch_s = max(fetch_ms / 1000, 1e-9)
        return (f"{mb:.4f}, {mb / elapsed_s:.4f}, {nmsg}, {nmsg / elapsed_s:.4f}, "
                f"{rebalance_ms}, {fetch_ms}, {mb / fetch_s:.4f}, {nmsg / fetch_s:.4f}")

    def total_line(self, end: float) -> str:
        return (f"{_java_date(self.date_format, self.start)}, "
                f"{_java_date(self.date_format, end)}, "
                + self._line(self.start, end, self.bytes, self.messages, self.rebalance_ms))

    def progress_line(self, now: float) -> str:
        # Kafka's detailed lines cover the interval since the previous one; the rebalance
        # time counts in the interval it happened in (the first).
        rebalance = self.rebalance_ms if self.last_report == self.start else 0
        line = (f"{_java_date(self.date_format, now)}, 0, "
                + self._line(self.last_report, now, self.bytes - self.last_bytes,
                             self.messages - self.last_messages, rebalance))
        self.last_report, self.last_bytes, self.last_messages = now, self.bytes, self.messages
        return line


async def perf_consume(args, out=None) -> ConsumerPerfStats:
    out = out or sys.stdout
    if args.messages <= 0:
        raise ReplogError("--messages must be a positive number")
    if args.max_messages is not None or args.partition is not None or args.offset is not None:
        raise ReplogError("--messages (perf mode) reads every partition and cannot be used "
                          "with --max-messages, --partition or --offset")
    kw = consumer_kwargs(parse_kv(args.consumer_property, "--consumer-property"))
    if args.fetch_size is not None:
        kw["max_partition_fetch_bytes"] = args.fetch_size
    consumer = Consumer(args.bootstrap_server, max_block_ms=args.max_block_ms, **kw)
    stats = ConsumerPerfStats(args.date_format)
    if not args.hide_header:
        print(stats.header(args.show_detailed_stats), file=out, flush=True)
    timeout_s = args.timeout / 1000
    interval_s = args.reporting_interval / 1000
    clock = time.time
    async with consumer:
        await consumer.assign_topic(args.topic)
        if args.from_latest:
            consumer.seek_to_end()
        else:
            consumer.seek_to_beginning()
        for tp in consumer.assignment():
            await consumer.position(tp)
        stats.rebalance_ms = int((clock() - stats.start) * 1000)
        last_consumed = clock()
        while stats.messages < args.messages:
            records = await consumer.poll(100, max_records=args.messages - stats.messages)
            now = clock()
            if records:
                last_consumed = now
                n = 0
                for r in records:
                    n += (len(r.value) if r.value is not None else 0) + \
                        (len(r.key) if r.key is not None else 0)
                stats.bytes += n
                stats.messages += len(records)
                if args.show_detailed_stats and now - stats.last_report >= interval_s:
                    print(stats.progress_line(now), file=out, flush=True)
            elif now - last_consumed > timeout_s:
                print(f"WARNING: Exiting before consuming the expected number of messages: "
                      f"timeout ({args.timeout} ms) exceeded. You can use the --timeout option "
                      f"to increase the timeout.", file=sys.stderr, flush=True)
                break
    end = clock()
    if args.show_detailed_stats:
        if stats.messages > stats.last_messages:
            print(stats.progress_line(end), file=out, flush=True)
    else:
        print(stats.total_line(end), file=out, flush=True)
    return stats


def _run(args) -> int:
    try:
        if args.messages is not None:
            event_loop.run(perf_consume(args))
            return 0
        return event_loop.run(console_consume(args))
    except KafkaError as e:
        raise ReplogError(str(e)) from None


def add_parsers(sub) -> None:
    p = sub.add_parser("consume", parents=[options.client()],
                       help="print records to stdout (kafka-console-consumer), or "
                            "a load test with --messages (kafka-consumer-perf-test)")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="consume only this partition")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset instead of the end")
    p.add_argument("--offset", help="start offset: a number, earliest or latest "
                                    "(needs --partition)")
    p.add_argument("--max-messages", type=int, help="exit after this many records")
    p.add_argument("--timeout-ms", type=int,
                   help="exit if no record arrives for this long")
    p.add_argument("--max-block-ms", type=int, default=5000,
                   help="how long to wait for the topic's metadata (default 5000)")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="formatter setting: print.key, print.offset, print.partition, "
                        "print.timestamp, print.headers, print.value, key.separator, "
                        "line.separator (repeatable)")
    p.add_argument("--consumer-property", action="append", metavar="KEY=VALUE",
                   help="consumer setting by Kafka name: fetch.max.wait.ms, fetch.min.bytes, "
                        "fetch.max.bytes, max.partition.fetch.bytes (repeatable)")
    perf = p.add_argument_group("perf mode (kafka-consumer-perf-test)")
    perf.add_argument("--messages", type=int, help="records to consume (turns perf mode on)")
    perf.add_argument("--timeout", type=int, default=10000,
                      help="stop when no record arrives for this many ms (default 10000)")
    perf.add_argument("--from-latest", action="store_true",
                      help="start at the end of each partition, not the beginning")
    perf.add_argument("--fetch-size", type=int,
                      help="max.partition.fetch.bytes (default 1048576)")
    perf.add_argument("--reporting-interval", type=int, default=5000,
                      help="ms between --show-detailed-stats lines (default 5000)")
    perf.add_argument("--show-detailed-stats", action="store_true",
                      help="print a line every --reporting-interval")
    perf.add_argument("--hide-header", action="store_true", help="do not print the header")
    perf.add_argument("--date-format", default="yyyy-MM-dd HH:mm:ss:SSS",
                      help="Java date pattern for the time columns")
    p.set_defaults(func=_run)

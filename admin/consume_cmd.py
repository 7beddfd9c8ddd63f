"""``replog consume`` — kafka-console-consumer.

Prints each record's value (and with ``--property print.key=true`` etc. the other fields, laid
out by Kafka's DefaultMessageFormatter) to stdout, and "Processed a total of N messages" to
stderr when it stops: after ``--max-messages``, after ``--timeout-ms`` without a record, or on
Ctrl-C. Without ``--partition`` it reads every partition of the topic. It starts at the end of
each partition unless ``--from-beginning`` or ``--offset`` says otherwise (``--offset`` takes a
number, ``earliest`` or ``latest``, and needs ``--partition``, as in Kafka).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time

from admin.client import Consumer, ConsumerRecord, KafkaError, TopicPartition
from admin.produce_cmd import _unescape, parse_kv
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
    props = parse_kv(args.consumer_property, "--consumer-property")
    consumer = Consumer(args.bootstrap_server, auto_offset_reset=reset,
                        max_block_ms=args.max_block_ms,
                        fetch_max_wait_ms=int(props.get("fetch.max.wait.ms", 500)))
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


def _run(args) -> int:
    try:
        return asyncio.run(console_consume(args))
    except KafkaError as e:
        raise ReplogError(str(e)) from None


def add_parsers(sub) -> None:
    p = sub.add_parser("consume", help="print records to stdout (kafka-console-consumer)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                   help="any broker of the cluster (host:port[,host:port...])")
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
                   help="consumer setting (fetch.max.wait.ms)")
    p.set_defaults(func=_run)

"""``replog e2e-latency`` — Kafka's kafka-e2e-latency (kafka.tools.EndToEndLatency).

Each record is sent with the client library's Producer and read back with its Consumer, which
is assigned every partition of the topic (positioned at the end first); the latency of a record
is from just before ``send()`` to the moment ``poll()`` hands it over, so it covers the acks wait
(with acks=all: follower replication and the high watermark) and the consumer's long-poll
wake-up. Output is Kafka's: every 1000th record ``i<TAB>latency``, then ``Avg latency`` and the
``Percentiles`` line, plus max. Kafka prints whole milliseconds; replog prints them to the
hundredth, since the interesting latencies are a few milliseconds.

Two schedules:

- default (``--throughput -1``), as Kafka's tool: one record in flight; send, wait for the
  acknowledgement, poll until the record arrives, then the next.
- ``--throughput R`` (records/s): record i is sent at start + i/R whether or not earlier ones
  have arrived (an open loop, so a slow record does not postpone the ones after it and latency
  under load is not hidden), still one record per ``send()``; each value carries its sequence
  number so the consumer side can match it. With a rate low enough that each record arrives
  before the next is due (the 20 rec/s figure of the benchmarks), both schedules are the same.

As in Kafka's tool the producer has linger.ms=0 (no batching delay) and acks=0 is refused
("Latency testing requires synchronous acknowledgement"); unlike Kafka's tool the consumer keeps
its default fetch.max.wait.ms (500): a consumer that busy-polls with 0 would hide how the broker
wakes a parked Fetch, which is what real consumers wait on. ``--consumer-property`` changes it.
"""

from __future__ import annotations

import asyncio
import struct
import sys
import time

from admin import options
from admin.consume_cmd import consumer_kwargs
from admin.produce_cmd import parse_kv, producer_kwargs
from client import Consumer, KafkaError, Producer, parse_acks
from common import event_loop
from common.errors import ReplogError

_SEQ = struct.Struct(">Q")
POLL_TIMEOUT_MS = 10_000  # Kafka's EndToEndLatency timeout for one record to come back


class LatencyStats:
    """Latencies (seconds) of the records read back, and Kafka's summary lines."""

    def __init__(self) -> None:
        self.latencies: list[float] = []

    def add(self, seconds: float) -> None:
        self.latencies.append(seconds)

    def percentiles(self, *ps: float) -> list[float]:
        """Kafka's rule: the element at index int(n * p) of the sorted latencies, in ms."""
        values = sorted(self.latencies)
        n = len(values)
        return [values[min(int(n * p), n - 1)] * 1000 if n else 0.0 for p in ps]

    def summary(self) -> dict:
        n = len(self.latencies)
        p50, p99, p999 = self.percentiles(0.5, 0.99, 0.999)
        return {"records": n, "avg_ms": sum(self.latencies) / n * 1000 if n else 0.0,
                "p50_ms": p50, "p99_ms": p99, "p999_ms": p999,
                "max_ms": max(self.latencies) * 1000 if n else 0.0}

    def lines(self) -> list[str]:
        s = self.summary()
        return [f"Avg latency: {s['avg_ms']:.4f} ms", "",
                (f"Percentiles: 50th = {s['p50_ms']:.2f}, 99th = {s['p99_ms']:.2f}, "
                 f"99.9th = {s['p999_ms']:.2f}"),
                f"Max latency: {s['max_ms']:.2f} ms"]


def _check_args(args) -> int:
    if args.num_records <= 0:
        raise ReplogError("--num-records must be a positive number")
    if args.record_size < _SEQ.size:
        raise ReplogError(f"--record-size must be at least {_SEQ.size} (each record carries "
                          f"its 8-byte sequence number)")
    if args.throughput == 0 or (args.throughput < 0 and args.throughput != -1):
        raise ReplogError("--throughput must be a positive number of records/s, or -1")
    try:
        acks = parse_acks(args.acks)
    except ValueError as e:
        raise ReplogError(str(e)) from None
    if acks == 0:
        raise ReplogError("Latency testing requires synchronous acknowledgement. Please use "
                          "1 or all")
    return acks


async def end_to_end_latency(args, out=None) -> LatencyStats:
    """Run the test; returns the stats (the CLI prints them, the benchmark reads them)."""
    out = out or sys.stdout
    acks = _check_args(args)
    pkw = {"linger_ms": 0, "max_block_ms": args.max_block_ms}
    pkw.update(producer_kwargs(parse_kv(args.producer_property, "--producer-property")))
    pkw["acks"] = acks
    ckw = consumer_kwargs(parse_kv(args.consumer_property, "--consumer-property"))
    consumer = Consumer(args.bootstrap_server, auto_offset_reset="latest",
                        max_block_ms=args.max_block_ms, **ckw)
    producer = Producer(args.bootstrap_server, **pkw)
    stats = LatencyStats()
    # Kafka's tool sends random bytes; the first 8 carry the sequence number here.
    filler = bytes(65 + i % 26 for i in range(args.record_size - _SEQ.size))
    async with consumer, producer:
        await consumer.assign_topic(args.topic)
        await producer.partitions_for(args.topic)
        consumer.seek_to_end()
        for tp in consumer.assignment():  # positions fixed before the first send
            await consumer.position(tp)
        if args.throughput > 0:
            await _open_loop(args, producer, consumer, stats, filler, out)
        else:
            await _one_at_a_time(args, producer, consumer, stats, filler, out)
    return stats


async def _one_at_a_time(args, producer: Producer, consumer: Consumer, stats: LatencyStats,
                         filler: bytes, out) -> None:
    clock = time.perf_counter
    for i in range(args.num_records):
        value = _SEQ.pack(i) + filler
        t0 = clock()
        await (await producer.send(args.topic, value))
        deadline = t0 + POLL_TIMEOUT_MS / 1000
        records = []
        while not records:
            left = deadline - clock()
            if left <= 0:
                raise ReplogError(f"poll() timed out before finding a result (timeout:"
                                  f"{POLL_TIMEOUT_MS}ms)")
            records = await consumer.poll(max(1, int(left * 1000)))
        elapsed = clock() - t0
        if len(records) != 1:
            raise ReplogError("Only one result was expected during this iteration.")
        if records[0].value != value:
            raise ReplogError(f"The message read [record {_seq(records[0].value)}] did not "
                              f"match the message sent [record {i}]")
        stats.add(elapsed)
        if i % 1000 == 0:
            print(f"{i}\t{elapsed * 1000:.2f}", file=out, flush=True)


async def _open_loop(args, producer: Producer, consumer: Consumer, stats: LatencyStats,
                     filler: bytes, out) -> None:
    clock = time.perf_counter
    n = args.num_records
    sent_at: list[float | None] = [None] * n
    acked: list[asyncio.Future] = []
    received = 0
    failure: list[BaseException] = []

    async def produce() -> None:
        start = clock()
        for i in range(n):
            ahead = start + i / args.throughput - clock()
            if ahead > 0:
                await asyncio.sleep(ahead)
            sent_at[i] = clock()
            fut = await producer.send(args.topic, _SEQ.pack(i) + filler)
            fut.add_done_callback(lambda f: failure.append(f.exception())
                                  if not f.cancelled() and f.exception() else None)
            acked.append(fut)

    sender = asyncio.create_task(produce())
    try:
        last_progress = clock()
        while received < n:
            if failure:
                raise failure[0]
            if sender.done() and sender.exception() is not None:
                raise sender.exception()
            records = await consumer.poll(100)
            now = clock()
            if not records:
                if now - last_progress > POLL_TIMEOUT_MS / 1000:
                    raise ReplogError(f"poll() timed out before finding a result (timeout:"
                                      f"{POLL_TIMEOUT_MS}ms)")
                continue
            last_progress = now
            for r in records:
                i = _seq(r.value)
                if i is None or i >= n or sent_at[i] is None:
                    raise ReplogError(f"The message read [{len(r.value or b'')} bytes at "
                                      f"{r.topic}-{r.partition}@{r.offset}] was not sent by "
                                      f"this run")
                elapsed = now - sent_at[i]
                stats.add(elapsed)
                if received % 1000 == 0:
                    print(f"{received}\t{elapsed * 1000:.2f}", file=out, flush=True)
                received += 1
        await sender
        await asyncio.gather(*acked)
    finally:
        if not sender.done():
            sender.cancel()


def _seq(value: bytes | None) -> int | None:
    return _SEQ.unpack_from(value)[0] if value is not None and len(value) >= _SEQ.size else None


def _run(args) -> int:
    try:
        stats = event_loop.run(end_to_end_latency(args))
    except KafkaError as e:
        raise ReplogError(str(e)) from None
    for line in stats.lines():
        print(line)
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("e2e-latency", parents=[options.client()],
                       help="produce one record at a time and consume it back "
                            "(kafka-e2e-latency)")
    p.add_argument("--topic", required=True, help="an existing topic; every partition is read")
    p.add_argument("--num-records", type=int, required=True, help="records to send")
    p.add_argument("--producer-acks", "--acks", dest="acks", default="all",
                   help="all (-1) or 1 (default all)")
    p.add_argument("--record-size", type=int, required=True, help="bytes per record value")
    p.add_argument("--throughput", type=float, default=-1,
                   help="records/s on a fixed schedule, not waiting for earlier records; "
                        "-1 (default): one record at a time, as Kafka's tool")
    p.add_argument("--max-block-ms", type=int, default=5000,
                   help="how long to wait for the topic's metadata (default 5000)")
    p.add_argument("--producer-property", action="append", metavar="KEY=VALUE",
                   help="producer setting by Kafka name, e.g. batch.size=65536 (repeatable)")
    p.add_argument("--consumer-property", action="append", metavar="KEY=VALUE",
                   help="consumer setting by Kafka name, e.g. fetch.max.wait.ms=500 "
                        "(repeatable)")
    p.set_defaults(func=_run)

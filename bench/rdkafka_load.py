"""librdkafka (confluent-kafka) load generator for ``bench kafka_clients``, run as a child
process so that its CPU is its own: ``python -m bench.rdkafka_load produce|consume ...``.

It prints one JSON line: records, bytes (of record values and keys), seconds and, for produce,
failed. The timed span mirrors what replog's perf tools time, so the two compare:

- produce: from creating the Producer to ``flush()`` returning (``replog produce`` times from
  its PerfStats, made just before its Producer starts, to its final flush); every record is
  acknowledged or counted as failed;
- consume: from ``assign()`` to the N-th record (``replog consume --messages`` excludes its
  assign and ListOffsets, the ``rebalance.time.ms``, from ``fetch.time.ms``; here the
  OFFSET_BEGINNING lookup librdkafka makes after assign() is inside the span, against it).

Delivery reports are asked for errors only (``delivery.report.only.error``): a user who only
needs to know about failures pays no Python callback per record; ``flush()`` still waits until
every record was acknowledged or failed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import confluent_kafka

POLL_EVERY = 1000  # produce() calls between poll(0)s, which serve the error reports


def produce(a: argparse.Namespace) -> dict:
    failed = 0
    first_error: str | None = None

    def on_delivery(err, _msg) -> None:
        nonlocal failed, first_error
        if err is not None:
            failed += 1
            first_error = first_error or str(err)

    rng = random.Random(a.seed)
    # Kafka's perf test: one random payload of uppercase letters, sent N times.
    payload = bytes(rng.randrange(65, 91) for _ in range(a.record_size))
    t0 = time.monotonic()
    p = confluent_kafka.Producer({
        "bootstrap.servers": a.bootstrap_server, "acks": a.acks,
        # InitProducerId is not served by replog's Kafka listener (docs/kafka-protocol.md).
        "enable.idempotence": False, "compression.type": "none", "linger.ms": a.linger_ms,
        "delivery.report.only.error": True, "on_delivery": on_delivery,
        "message.timeout.ms": 120_000})
    produce_ = p.produce
    for i in range(a.num_records):
        while True:
            try:
                produce_(a.topic, payload)
                break
            except BufferError:  # queue.buffering.max.messages reached: let deliveries drain
                p.poll(0.01)
        if i % POLL_EVERY == 0:
            p.poll(0)
    left = p.flush(a.timeout_ms / 1000)
    seconds = time.monotonic() - t0
    if left:
        raise SystemExit(f"{left} records still unacknowledged after {a.timeout_ms} ms")
    return {"records": a.num_records - failed, "failed": failed, "first_error": first_error,
            "bytes": (a.num_records - failed) * len(payload), "seconds": seconds}


def consume(a: argparse.Namespace) -> dict:
    conf = {"bootstrap.servers": a.bootstrap_server,
            # assign() only: replog serves no group coordinator; group.id is still required.
            "group.id": "bench-assign-only", "enable.auto.commit": False,
            "enable.partition.eof": False}
    for kv in a.consumer_property:
        k, sep, v = kv.partition("=")
        if not sep:
            raise SystemExit(f"--consumer-property {kv!r}: expected KEY=VALUE")
        conf[k] = v
    c = confluent_kafka.Consumer(conf)
    try:
        md = c.list_topics(a.topic, timeout=30)
        t = md.topics[a.topic]
        if t.error is not None:
            raise SystemExit(f"topic {a.topic}: {t.error}")
        parts = sorted(t.partitions)
        records = nbytes = 0
        t0 = time.monotonic()
        c.assign([confluent_kafka.TopicPartition(a.topic, p, confluent_kafka.OFFSET_BEGINNING)
                  for p in parts])
        last = t0
        while records < a.messages:
            msgs = c.consume(min(a.batch, a.messages - records), 0.5)
            now = time.monotonic()
            if not msgs:
                if now - last > a.timeout_ms / 1000:
                    print(f"WARNING: stopped at {records} of {a.messages} records: no record "
                          f"for {a.timeout_ms} ms", file=sys.stderr)
                    break
                continue
            last = now
            for m in msgs:
                if m.error() is not None:
                    raise SystemExit(f"consumer error: {m.error()}")
                v, k = m.value(), m.key()
                nbytes += (len(v) if v is not None else 0) + (len(k) if k is not None else 0)
            records += len(msgs)
        seconds = time.monotonic() - t0
    finally:
        c.close()
    return {"records": records, "bytes": nbytes, "seconds": seconds, "partitions": len(parts)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.rdkafka_load", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    pp = sub.add_parser("produce")
    pp.add_argument("--num-records", type=int, required=True)
    pp.add_argument("--record-size", type=int, default=1024)
    pp.add_argument("--acks", default="all")
    pp.add_argument("--linger-ms", type=float, default=5)
    pp.add_argument("--seed", type=int, default=0)
    pc = sub.add_parser("consume")
    pc.add_argument("--messages", type=int, required=True)
    pc.add_argument("--batch", type=int, default=10000, help="records per consume() call")
    pc.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                    help="a librdkafka consumer setting over the defaults (repeatable)")
    for s in (pp, pc):
        s.add_argument("--bootstrap-server", required=True)
        s.add_argument("--topic", required=True)
        s.add_argument("--timeout-ms", type=int, default=60000)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    out = produce(a) if a.mode == "produce" else consume(a)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

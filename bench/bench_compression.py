"""The leader's cost of compressed produce (issue 41 item 7): ``Log.append_as_leader`` of one
v2 batch of 64 records of 1 KiB (JSON with a random token: they compress to about a third) per codec,
as the producer sent it (compression.type=producer: decompress to validate, store as sent)
and, for an uncompressed batch, recompressed to a topic codec (compression.type=zstd/lz4).

Figures per case, medians of the runs: MB/s of record bytes before compression, CPU s/GB of
those bytes, and the stored batch's size against the uncompressed one. No fsync; the batch is
built once before timing (producer encoding is not measured).

Run: ``python -m bench compression [--quick] [--runs N] [--data-dir DIR]``.
"""  # noqa: E501

from __future__ import annotations

import json
import random
import shutil
import tempfile

from bench import Timer, json_line, log, median, summarize
from broker.storage.log import Log, LogConfig
from client.recordbatch import build_producer_batch
from common import compression
from common.names import TopicPartition
from common.records import ProducerRecord, parse_header

TP = TopicPartition("bench", 0)
RECORDS = 64


def _payload(i: int) -> bytes:
    """1 KiB of JSON: repeated field names and values around a random hex token (seeded), so
    it compresses to about a third, not to nothing."""
    body = {"id": i, "user": f"user-{i % 97}", "event": "page_view", "path": f"/items/{i % 13}",
            "session": random.Random(i).randbytes(160).hex(), "tags": ["a", "b", "c"]}
    out = json.dumps(body).encode()
    return (out * (1024 // len(out) + 1))[:1024]


def _case(tmp: str, name: str, batch: bytes, topic_codec: str, appends: int) -> dict:
    log_ = Log.open(f"{tmp}/{name}", TP, LogConfig(compression_type=topic_codec,
                                                   segment_bytes=1 << 30),
                    needs_recovery=False)
    try:
        raw = RECORDS * 1024
        with Timer() as t:
            for _ in range(appends):
                log_.append_as_leader(batch, leader_epoch=0)
        stored = parse_header(log_.read(0, 1 << 20)).size
        return {"sample": t.sample(raw * appends, RECORDS * appends), "stored_bytes": stored}
    finally:
        log_.close()


def main(opts) -> None:
    runs = opts.runs or (1 if opts.quick else 5)
    appends = 50 if opts.quick else 400
    records = [ProducerRecord(f"k{i}".encode(), _payload(i)) for i in range(RECORDS)]
    plain = build_producer_batch(records, now_ms=1_000)
    cases = [(f"{c}-as-sent", build_producer_batch(records, now_ms=1_000,
                                                   compression=compression.CODECS[c]), "producer")
             for c in ("none", "gzip", "snappy", "lz4", "zstd")]
    cases += [("none-to-lz4", plain, "lz4"), ("none-to-zstd", plain, "zstd")]
    for name, batch, topic_codec in cases:
        samples, stored = [], 0
        for r in range(runs):
            tmp = tempfile.mkdtemp(prefix="replog-bench-compression-",
                                   dir=getattr(opts, "data_dir", None))
            try:
                got = _case(tmp, f"{name}-{r}", batch, topic_codec, appends)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            samples.append(got["sample"])
            stored = got["stored_bytes"]
        s = summarize(samples)
        print(json_line("compression", name, {
            "mb_s": s["mb_s"], "cpu_s_per_gb": s["cpu_s_per_gb"], "runs": runs,
            "stored_vs_uncompressed": round(stored / len(plain), 3)}), flush=True)
        log(f"{name:>14}: {median(x.mb_s for x in samples):8.1f} MB/s of records, "
            f"{s['cpu_s_per_gb']:.2f} CPU s/GB, stored {stored / len(plain):.0%} of "
            f"uncompressed")

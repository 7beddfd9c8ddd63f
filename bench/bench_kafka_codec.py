"""The Kafka codec's cost on Produce and Fetch (issue 41 item 1): the generated codec
(common/kafka_protocol/generated/) against the hand-transcribed one it replaced, frozen in
bench/kafka_codec_baseline/, in the same process, interleaved run by run.

Messages, as a busy client and broker exchange them:
- a Produce request of 4 topics x 25 partitions, each a 16 KiB batch (about 1.6 MB): the
  broker decodes it (v9, flexible, and v8), the producer encodes it; its answer (100
  partitions) the broker encodes;
- a Fetch request of 10 topics x 50 partitions the broker decodes (v12 and v11); its answer,
  500 partitions, the broker encodes around the records, which stay file regions for sendfile
  (``encode_chunks``; a region stands in for broker/storage/file_region.py), and a consumer
  decodes (records as bytes, 1 KiB each).

The values to encode are built once, before timing (dicts for the old codec, the generated
classes for the new). Figures: per operation, the median over the runs of microseconds per
message, old and new, and old/new (above 1: the new codec is faster).

Run: ``python -m bench kafka_codec [--quick] [--runs N]``.
"""

from __future__ import annotations

import os
import time

import bench.kafka_codec_baseline as old
from bench import json_line, log, median, save_results
from common.kafka_protocol.generated import CODECS

TOPICS_PRODUCE, PARTITIONS_PRODUCE, BATCH = 4, 25, 16 * 1024
TOPICS_FETCH, PARTITIONS_FETCH, FETCHED = 10, 50, 1024


class _Region:
    """A file region as the Fetch path holds it: a length, no bytes."""
    __slots__ = ("length",)

    def __init__(self, length: int):
        self.length = length

    def __len__(self) -> int:
        return self.length


def produce_request() -> dict:
    batch = os.urandom(BATCH)
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30_000, "topic_data": [
        {"name": f"orders-{t}", "partition_data": [{"index": p, "records": batch}
                                                   for p in range(PARTITIONS_PRODUCE)]}
        for t in range(TOPICS_PRODUCE)]}


def produce_response() -> dict:
    return {"throttle_time_ms": 0, "responses": [
        {"name": f"orders-{t}", "partition_responses": [
            {"index": p, "error_code": 0, "base_offset": 1_000_000 + p,
             "log_append_time_ms": -1, "log_start_offset": 0, "record_errors": [],
             "error_message": None} for p in range(PARTITIONS_PRODUCE)]}
        for t in range(TOPICS_PRODUCE)]}


def fetch_request() -> dict:
    return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 50 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                {"topic": f"events-{t}", "partitions": [
                    {"partition": p, "current_leader_epoch": 3, "fetch_offset": 10_000 + p,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20} for p in range(PARTITIONS_FETCH)]}
                for t in range(TOPICS_FETCH)],
            "forgotten_topics_data": [], "rack_id": ""}


def fetch_response(records) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": f"events-{t}", "partitions": [
            {"partition_index": p, "error_code": 0, "high_watermark": 20_000 + p,
             "last_stable_offset": 20_000 + p, "log_start_offset": 0,
             "aborted_transactions": None, "preferred_read_replica": -1,
             "records": records()} for p in range(PARTITIONS_FETCH)]}
            for t in range(TOPICS_FETCH)]}


def _cases():
    """(name, old operation, new operation) for each figure; each a no-argument callable."""
    produce, fetch = CODECS[(0, "request")], CODECS[(1, "request")]
    produce_r, fetch_r = CODECS[(0, "response")], CODECS[(1, "response")]
    out = []
    pr = produce_request()
    pr_new = produce.cls.from_dict(pr)
    for v in (9, 8):
        data = old.PRODUCE_REQUEST_MESSAGE.encode(pr, v)
        assert produce.encode(pr_new, v) == data
        out.append((f"produce_request_decode_v{v}",
                    lambda d=data, v=v: old.PRODUCE_REQUEST_MESSAGE.decode(d, v),
                    lambda d=data, v=v: produce.decode(d, v)))
    out.append(("produce_request_encode_v9",
                lambda: old.PRODUCE_REQUEST_MESSAGE.encode(pr, 9),
                lambda: produce.encode(pr_new, 9)))
    presp = produce_response()
    presp_new = produce_r.cls.from_dict(presp)
    out.append(("produce_response_encode_v9",
                lambda: old.PRODUCE_RESPONSE_MESSAGE.encode(presp, 9),
                lambda: produce_r.encode(presp_new, 9)))
    fr = fetch_request()
    fr_new = fetch.cls.from_dict(fr)
    for v in (12, 11):
        data = old.FETCH_REQUEST_MESSAGE.encode(fr, v)
        assert fetch.encode(fr_new, v) == data
        out.append((f"fetch_request_decode_v{v}",
                    lambda d=data, v=v: old.FETCH_REQUEST_MESSAGE.decode(d, v),
                    lambda d=data, v=v: fetch.decode(d, v)))
    region = _Region(FETCHED)
    fresp = fetch_response(lambda: region)
    fresp_new = fetch_r.cls.from_dict(fresp)
    for v in (12, 11):
        out.append((f"fetch_response_encode_chunks_v{v}",
                    lambda v=v: old.FETCH_RESPONSE_MESSAGE.encode_chunks(fresp, v),
                    lambda v=v: fetch_r.encode_chunks(fresp_new, v)))
    records = os.urandom(FETCHED)
    fbytes = fetch_response(lambda: records)
    data = old.FETCH_RESPONSE_MESSAGE.encode(fbytes, 12)
    assert fetch_r.encode(fetch_r.cls.from_dict(fbytes), 12) == data
    out.append(("fetch_response_decode_v12",
                lambda: old.FETCH_RESPONSE_MESSAGE.decode(data, 12),
                lambda: fetch_r.decode(data, 12)))
    return out


def _time(op, n: int) -> float:
    """Microseconds per call over ``n`` calls."""
    t = time.perf_counter()
    for _ in range(n):
        op()
    return (time.perf_counter() - t) / n * 1e6


def main(opts) -> None:
    runs = opts.runs or (1 if opts.quick else 7)
    n = 5 if opts.quick else 40
    results: dict = {"runs": runs, "calls_per_run": n, "figures": {}}
    print(f"{'operation':<34} {'old us':>10} {'new us':>10} {'old/new':>8}")
    for name, op_old, op_new in _cases():
        op_old(), op_new()  # warm
        olds, news = [], []
        for _ in range(runs):  # interleaved: machine noise hits both
            olds.append(_time(op_old, n))
            news.append(_time(op_new, n))
        fig = {"old_us": round(median(olds), 1), "new_us": round(median(news), 1),
               "old_over_new": round(median(o / w for o, w in zip(olds, news)), 2)}
        results["figures"][name] = fig
        print(f"{name:<34} {fig['old_us']:>10} {fig['new_us']:>10} {fig['old_over_new']:>8}")
        print(json_line("kafka_codec", name, fig))
    path = save_results("kafka_codec", results)
    log(f"results in {path}")

"""Storage engine throughput against a plain-Python file I/O baseline (SPEC "Performance").

Workload: 1 KiB records, 64 records per batch (one v2 batch of ~64 KiB per append, as a
producer sends it), the batch built once with ``build_batch`` before timing, so producer
encoding is not measured; every append re-stamps its offset and leader epoch, so the log is
valid. Figures, each the median of several runs, replog and baseline interleaved per run:

1. ``Log.append_as_leader`` called directly (synchronously), without fsync (default config)
   and with one fsync per batch (``flush_interval_messages=64``: the interval counts records,
   so 64 records per batch means a flush after every append; checked by counting fsyncs);
2. the same through ``LogManager.append_as_leader`` (asyncio -> the log dir's single-thread
   executor), awaited one after another: the cost of the executor hop;
3. the baseline: a Python loop of ``os.write`` of the same bytes (+ ``os.fsync`` per batch);
   ratio replog / plain, target >= 0.8;
4. reads: ``Log.read(offset, 1 MiB, max_offset=HW)`` from the start of the log to its end, the
   next offset taken after the last whole batch returned (a consumer's fetch loop), against a
   loop of ``os.pread`` of 1 MiB chunks over the same segment file. The file was just written
   and is read once untimed before the runs, so the page cache is warm for both (checked with
   mincore(2) where available).

Run: ``python -m bench storage [--quick] [--runs N] [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time

from crc32c import crc32c

from bench import (
    Sample,
    Timer,
    json_line,
    log,
    machine_info,
    median,
    paired_ratio,
    save_results,
    summarize,
)
from broker.storage.fileops import FileOps
from broker.storage.log import Log, LogConfig
from broker.storage.log_manager import LogManager
from common import records as rec
from common.names import TopicPartition

NAME = "storage"
RECORD_BYTES = 1024
RECORDS_PER_BATCH = 64
FETCH_BYTES = 1 << 20
TARGET_RATIO = 0.8
LEADER_EPOCH = 0
TP = TopicPartition("bench", 0)

# (no-fsync MiB, fsync MiB, default runs)
FULL = (256, 64, 7)
QUICK = (32, 8, 1)

NOFSYNC = LogConfig()
FSYNC_PER_BATCH = LogConfig(flush_interval_messages=RECORDS_PER_BATCH)


def make_batch() -> bytes:
    records = [rec.ProducerRecord(key=None, value=os.urandom(RECORD_BYTES))
               for _ in range(RECORDS_PER_BATCH)]
    return rec.build_batch(records)


# ---------------------------------------------------------------------------- appends

def _warm_append(log: Log, batch: bytes) -> None:
    """One untimed append: the first one writes the leader-epoch checkpoint (with fsyncs)."""
    log.append_as_leader(batch, LEADER_EPOCH)


def replog_append_sync(root: str, batch: bytes, n: int, config: LogConfig) -> Sample:
    d = tempfile.mkdtemp(prefix="log-sync-", dir=root)
    log = Log.open(d, TP, config, needs_recovery=False)
    try:
        _warm_append(log, batch)
        append = log.append_as_leader
        with Timer() as t:
            for _ in range(n):
                append(batch, LEADER_EPOCH)
        return t.sample(n * len(batch), n * RECORDS_PER_BATCH)
    finally:
        log.delete()  # closes without the final flush; the data is thrown away
        shutil.rmtree(d, ignore_errors=True)


def replog_append_async(root: str, batch: bytes, n: int, config: LogConfig) -> Sample:
    d = tempfile.mkdtemp(prefix="log-async-", dir=root)
    lm = LogManager([d], broker_id=1, config=config)
    try:
        lm.startup()
        log = lm.get_or_create_log(TP)

        async def run() -> Sample:
            append = lm.append_as_leader
            await append(TP, batch, LEADER_EPOCH)  # warm: epoch checkpoint, executor thread
            with Timer() as t:
                for _ in range(n):
                    await append(TP, batch, LEADER_EPOCH)
            return t.sample(n * len(batch), n * RECORDS_PER_BATCH)

        sample = asyncio.run(run())
        log.delete()
        return sample
    finally:
        for ld in lm.dirs:
            ld.executor.shutdown(wait=True)
        shutil.rmtree(d, ignore_errors=True)


def plain_append(root: str, batch: bytes, n: int, fsync: bool, crc: bool = False) -> Sample:
    """The baseline; with ``crc`` it also checksums each batch as replog's validation must
    (CRC-32C over attributes..end): the floor for any appender that validates."""
    path = os.path.join(root, "plain.log")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        write, sync = os.write, os.fsync
        write(fd, batch)  # warm, like the replog variants
        if fsync:
            sync(fd)
        view, expected = memoryview(batch)[rec.ATTRIBUTES_OFFSET:], rec.parse_header(batch).crc
        with Timer() as t:
            if crc:
                for _ in range(n):
                    if crc32c(view) != expected:
                        raise RuntimeError("crc mismatch")
                    write(fd, batch)
            elif fsync:
                for _ in range(n):
                    write(fd, batch)
                    sync(fd)
            else:
                for _ in range(n):
                    write(fd, batch)
        return t.sample(n * len(batch), n * RECORDS_PER_BATCH)
    finally:
        os.close(fd)
        os.unlink(path)


class _CountingFileOps(FileOps):
    def __init__(self) -> None:
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        super().fsync(fd)


def count_fsyncs(root: str, batch: bytes, config: LogConfig, n: int = 8) -> int:
    """fsyncs made by ``n`` appends after the first (untimed, like the timed loops)."""
    d = tempfile.mkdtemp(prefix="log-count-", dir=root)
    fo = _CountingFileOps()
    log = Log.open(d, TP, config, fileops=fo, needs_recovery=False)
    try:
        _warm_append(log, batch)
        fo.fsyncs = 0
        for _ in range(n):
            log.append_as_leader(batch, LEADER_EPOCH)
        return fo.fsyncs
    finally:
        log.delete()
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------- reads

def replog_read(log: Log, batch_size: int) -> Sample:
    """A consumer's fetch loop over the whole log: read 1 MiB up to the HW, continue after the
    last whole batch returned (every batch holds RECORDS_PER_BATCH records of batch_size
    bytes, so the next offset is computed instead of parsed)."""
    read = log.read
    offset, hw = log.log_start_offset, log.log_end_offset
    total = 0
    with Timer() as t:
        while offset < hw:
            data = read(offset, FETCH_BYTES, hw)
            n = len(data)
            total += n
            offset += n // batch_size * RECORDS_PER_BATCH
    return t.sample(total, total // batch_size * RECORDS_PER_BATCH)


def plain_read(path: str, batch_size: int) -> Sample:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pread = os.pread
        pos = 0
        with Timer() as t:
            while pos < size:
                pos += len(pread(fd, FETCH_BYTES, pos))
        return t.sample(pos, pos // batch_size * RECORDS_PER_BATCH)
    finally:
        os.close(fd)


def page_cache_resident(path: str) -> float | None:
    """Fraction of ``path``'s pages in the page cache (mincore(2)), or None if unknown."""
    try:
        import ctypes
        import mmap
        size = os.path.getsize(path)
        if size == 0:
            return 1.0
        libc = ctypes.CDLL(None, use_errno=True)
        page = mmap.PAGESIZE
        pages = (size + page - 1) // page
        vec = (ctypes.c_ubyte * pages)()
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
            try:
                buf = (ctypes.c_char * size).from_buffer(mm)
                try:
                    rc = libc.mincore(ctypes.c_void_p(ctypes.addressof(buf)),
                                      ctypes.c_size_t(size), vec)
                finally:
                    del buf
            finally:
                mm.close()
        if rc != 0:
            return None
        return sum(1 for v in bytes(vec) if v & 1) / pages
    except Exception:
        return None


# ---------------------------------------------------------------------------- driver

def _rotate(items: list, r: int) -> list:
    k = r % len(items)
    return items[k:] + items[:k]


def _fmt_mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.0f} MiB"


def main(opts: argparse.Namespace | None = None) -> dict:
    opts = opts or argparse.Namespace(quick=False, runs=None, data_dir=None)
    nofsync_mib, fsync_mib, default_runs = QUICK if opts.quick else FULL
    runs = opts.runs or default_runs
    batch = make_batch()
    bsize = len(batch)
    n_nofsync = (nofsync_mib << 20) // bsize
    n_fsync = (fsync_mib << 20) // bsize
    parent = opts.data_dir or "/tmp"
    os.makedirs(parent, exist_ok=True)
    root = tempfile.mkdtemp(prefix="replog-bench-storage-", dir=parent)
    started = time.time()
    try:
        fsyncs_default = count_fsyncs(root, batch, NOFSYNC)
        fsyncs_flush64 = count_fsyncs(root, batch, FSYNC_PER_BATCH)

        # samples per variant; each round runs every writer of a group, in a rotating order
        s: dict[str, list[Sample]] = {k: [] for k in (
            "sync_nofsync", "async_nofsync", "plain_nofsync", "plain_crc_nofsync",
            "sync_fsync", "async_fsync", "plain_fsync", "read", "plain_read")}
        for r in range(runs):
            log(f"[storage] run {r + 1}/{runs}: appends")
            for fsync, n, cfg in ((False, n_nofsync, NOFSYNC), (True, n_fsync, FSYNC_PER_BATCH)):
                sfx = "fsync" if fsync else "nofsync"
                steps = [
                    ("sync_" + sfx, lambda: replog_append_sync(root, batch, n, cfg)),  # noqa: B023
                    ("async_" + sfx, lambda: replog_append_async(root, batch, n, cfg)),  # noqa: B023
                    ("plain_" + sfx, lambda: plain_append(root, batch, n, fsync)),  # noqa: B023
                ]
                if not fsync:
                    steps.append(("plain_crc_nofsync",
                                  lambda: plain_append(root, batch, n, False, crc=True)))  # noqa: B023
                for key, fn in _rotate(steps, r):
                    s[key].append(fn())

        # Reads: one log written through replog (untimed), then read by both, interleaved.
        log("[storage] reads")
        rdir = tempfile.mkdtemp(prefix="log-read-", dir=root)
        rlog = Log.open(rdir, TP, NOFSYNC, needs_recovery=False)
        try:
            for _ in range(n_nofsync):
                rlog.append_as_leader(batch, LEADER_EPOCH)
            rlog.high_watermark = rlog.log_end_offset
            if len(rlog.segments) != 1:  # the plain loop must read the same (single) file
                raise RuntimeError(f"expected one segment, the log has {len(rlog.segments)}")
            seg_path = rlog.active_segment.log_path
            # untimed warm pass of each, then check the page cache holds the file
            warm_replog = replog_read(rlog, bsize)
            warm_plain = plain_read(seg_path, bsize)
            if warm_replog.nbytes != warm_plain.nbytes:
                raise RuntimeError(f"replog read {warm_replog.nbytes} bytes, the file has "
                                   f"{warm_plain.nbytes}")
            resident = page_cache_resident(seg_path)
            steps = [("read", lambda: replog_read(rlog, bsize)),
                     ("plain_read", lambda: plain_read(seg_path, bsize))]
            for r in range(runs):
                for key, fn in _rotate(steps, r):
                    s[key].append(fn())
            resident_after = page_cache_resident(seg_path)
            read_bytes = warm_plain.nbytes
        finally:
            rlog.delete()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    figures = [
        ("append_sync_nofsync", "append, direct, no fsync", "sync_nofsync", "plain_nofsync"),
        ("append_async_nofsync", "append, LogManager async, no fsync", "async_nofsync",
         "plain_nofsync"),
        ("append_sync_fsync", "append, direct, fsync/batch", "sync_fsync", "plain_fsync"),
        ("append_async_fsync", "append, LogManager async, fsync/batch", "async_fsync",
         "plain_fsync"),
        ("read_fetch_1mib", "read, 1 MiB fetches, warm cache", "read", "plain_read"),
    ]
    results = {
        "bench": NAME,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "quick": bool(opts.quick),
        "machine": machine_info(parent),
        "workload": {
            "record_bytes": RECORD_BYTES, "records_per_batch": RECORDS_PER_BATCH,
            "batch_bytes": bsize, "append_bytes_nofsync": n_nofsync * bsize,
            "append_bytes_fsync": n_fsync * bsize, "read_bytes": read_bytes,
            "fetch_max_bytes": FETCH_BYTES, "runs": runs,
            "fsyncs_per_8_appends_default_config": fsyncs_default,
            "fsyncs_per_8_appends_flush_interval_64": fsyncs_flush64,
            "page_cache_resident_before_reads": resident,
            "page_cache_resident_after_reads": resident_after,
        },
        "target_ratio": TARGET_RATIO,
        "figures": {},
    }
    for fig, _label, a, b in figures:
        results["figures"][fig] = {
            "replog": summarize(s[a]),
            "plain": summarize(s[b]),
            "ratio": round(paired_ratio(s[a], s[b]), 3),
            "ratio_of_medians": round(summarize(s[a])["mb_s"] / summarize(s[b])["mb_s"], 3),
        }
    # Informative: the same figure against a baseline that also checks each batch's CRC.
    f = results["figures"]["append_sync_nofsync"]
    f["plain_with_crc"] = summarize(s["plain_crc_nofsync"])
    f["ratio_vs_plain_with_crc"] = round(paired_ratio(s["sync_nofsync"],
                                                      s["plain_crc_nofsync"]), 3)
    # The executor hop: async vs direct, same rounds.
    for sfx in ("nofsync", "fsync"):
        a, d = s["async_" + sfx], s["sync_" + sfx]
        hop_us = [(x.wall - y.wall) / (x.nrecords / RECORDS_PER_BATCH) * 1e6
                  for x, y in zip(a, d)]
        results["figures"][f"append_async_{sfx}"]["executor_hop_us_per_append"] = round(
            median(hop_us), 1)

    _print(results, figures, runs, parent)
    path = save_results(NAME, results)
    print(f"# saved {path}")
    return results


def _print(results: dict, figures, runs: int, parent: str) -> None:
    w = results["workload"]
    m = results["machine"]
    res = w["page_cache_resident_before_reads"]
    res_txt = "unknown" if res is None else f"{res * 100:.1f}%"
    print(f"== storage: {RECORD_BYTES} B records, {RECORDS_PER_BATCH}/batch = "
          f"{w['batch_bytes']} B batches, pre-built; median of {runs} interleaved run(s)"
          f"{' (QUICK)' if results['quick'] else ''}")
    print(f"   {m.get('cpus')} CPUs ({m.get('cpu_model', '?')}), Python {m['python']}, "
          f"data under {parent}: {m.get('data_dir_fs', '?')}")
    print(f"   appends: {_fmt_mib(w['append_bytes_nofsync'])} without fsync, "
          f"{_fmt_mib(w['append_bytes_fsync'])} with fsync per batch "
          f"(fsyncs per 8 appends: default config {w['fsyncs_per_8_appends_default_config']}, "
          f"flush_interval_messages=64 -> {w['fsyncs_per_8_appends_flush_interval_64']})")
    print(f"   reads: {_fmt_mib(w['read_bytes'])} just written + one untimed pass each: page "
          f"cache warm for both (mincore: {res_txt} resident)")
    print(f"   MB = 10^6 B; CPU = user+sys of the process (all threads); ratio = median of "
          f"per-run replog/plain; target ratio >= {TARGET_RATIO}")
    hdr = (f"{'figure':<40}{'MB/s':>8}{'rec/s':>10}{'CPU s/GB':>10}"
           f"{'plain MB/s':>12}{'plain CPU':>10}{'ratio':>7}  target")
    print(hdr)
    print("-" * len(hdr))
    for fig, label, _a, _b in figures:
        f = results["figures"][fig]
        r, p = f["replog"], f["plain"]
        ok = "ok" if f["ratio"] >= TARGET_RATIO else "BELOW"
        print(f"{label:<40}{r['mb_s']:>8.0f}{r['records_s']:>10.0f}{r['cpu_s_per_gb']:>10.2f}"
              f"{p['mb_s']:>12.0f}{p['cpu_s_per_gb']:>10.2f}{f['ratio']:>7.2f}  {ok}")
    f = results["figures"]["append_sync_nofsync"]
    print(f"   info: plain os.write + crc32c check per batch (validation floor): "
          f"{f['plain_with_crc']['mb_s']:.0f} MB/s, CPU {f['plain_with_crc']['cpu_s_per_gb']:.2f} "
          f"s/GB; direct append / that = {f['ratio_vs_plain_with_crc']:.2f}")
    for sfx in ("nofsync", "fsync"):
        hop = results["figures"][f"append_async_{sfx}"]["executor_hop_us_per_append"]
        print(f"   executor hop ({sfx}): {hop:+.1f} us per append (async - direct, median)")
    for fig, _label, _a, _b in figures:
        print(json_line(NAME, fig, results["figures"][fig]))


if __name__ == "__main__":
    from bench.__main__ import parse_args
    main(parse_args())

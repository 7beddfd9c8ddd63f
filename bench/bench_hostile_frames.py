"""Issue 42, defect 2: the worst event-loop stall a hostile Kafka request causes, for every
served API, at sizes up to ``socket.request.max.bytes`` (100 MiB).

Each API's hostile frame is valid but enormous (harness/hostile_frames.py): at the version
whose request array has the smallest elements, that array is filled with minimal elements (a
Metadata v9 of N empty topic names, 2 bytes each). The frame goes over a real socket from a
thread to a KafkaListener on this process's loop (uvloop, as the broker's), while a probe
(bench/harness/loop_stall.py) measures the longest the loop went without running; the figure
per API and size is the worst over the runs.

After the fix the frame is refused at its array's length (the element budget,
common/kafka_protocol/limits.py), decoded off the loop; what remains is receiving it.
``--before`` (or REPLOG_BENCH_HOSTILE_BEFORE=1) measures the codec as it was (no budget, decoded
on the loop), up to 2 MiB: beyond that one frame holds the loop for many seconds.

Run: ``python -m bench hostile_frames [--quick] [--runs N]`` or
``python -m bench.bench_hostile_frames --before``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading

from bench import json_line, log, save_results
from bench.harness.loop_stall import LoopStallProbe
from broker.kafka_listener import DEFAULT_MAX_REQUEST_BYTES, KafkaListener
from common.event_loop import loop_factory
from common.kafka_protocol.api import APIS
from common.kafka_protocol.schema import min_size
from harness.hostile_frames import enormous_body, request_frame, served_versions, widest_array

KIB, MIB = 1024, 1024 * 1024
SIZES = [256 * KIB, 2 * MIB, 16 * MIB, DEFAULT_MAX_REQUEST_BYTES - 64]
QUICK_SIZES = [256 * KIB, 2 * MIB]
BEFORE_MAX = 2 * MIB


class _Events:
    def warning(self, *_a, **_k):
        pass

    error = info = warning


def hostile_versions() -> list[tuple[int, int]]:
    """Per API with an array, the version whose widest array has the smallest elements (the
    most elements per byte), the highest among equals."""
    best: dict[int, tuple[int, int]] = {}
    for k, v in served_versions():
        fd = widest_array(k, v)
        if fd is None:
            continue
        m = APIS[k].request
        size = min_size(fd.type.element, v, v in m.flexible)
        if k not in best or size <= best[k][0]:
            best[k] = (size, v)
    return [(k, v) for k, (_s, v) in sorted(best.items())]


def _send(port: int, frame: bytes) -> None:
    """Send the frame, then read until the listener answers or closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=600) as s:
        try:
            s.sendall(frame)
            s.recv(4)
        except OSError:
            pass


async def _measure(listener: KafkaListener, port: int, frame: bytes) -> float:
    probe = LoopStallProbe()
    probe.start()
    done = threading.Event()

    def send():
        try:
            _send(port, frame)
        finally:
            done.set()
    t = threading.Thread(target=send, daemon=True)
    t.start()
    while not done.is_set():
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # let the listener finish with the connection
    return await probe.stop()


async def _run(sizes: list[int], runs: int, before: bool) -> dict:
    listener = KafkaListener(None, 1, "KAFKA", "127.0.0.1", 0, _Events())
    if before:
        listener.element_budget = lambda _key: None
        listener.decode_off_loop_bytes = float("inf")
    port = await listener.start()
    results: dict = {}
    try:
        for size in sizes:
            for k, v in hostile_versions():
                name = f"{APIS[k].name} v{v}"
                frame = request_frame(k, v, enormous_body(k, v, size))
                worst = max([await _measure(listener, port, frame) for _ in range(runs)])
                results.setdefault(size, {})[name] = worst
                log(f"{'before' if before else 'after'} {size / MIB:7.2f} MiB {name:>32}: "
                    f"worst loop stall {worst * 1000:8.1f} ms")
    finally:
        await listener.stop()
    return results


def main(opts, before: bool | None = None) -> None:
    if before is None:
        before = os.environ.get("REPLOG_BENCH_HOSTILE_BEFORE") == "1"
    runs = opts.runs or (1 if opts.quick else 3)
    sizes = QUICK_SIZES if opts.quick else SIZES
    if before:
        sizes = [s for s in sizes if s <= BEFORE_MAX]
    factory = loop_factory()
    loop = factory() if factory else asyncio.new_event_loop()
    try:
        results = loop.run_until_complete(_run(sizes, runs, before))
    finally:
        loop.close()
    mode = "before" if before else "after"
    summary = {}
    for size, per_api in results.items():
        api, worst = max(per_api.items(), key=lambda x: x[1])
        summary[size] = {"worst_ms": round(worst * 1000, 1), "api": api}
        print(json_line("hostile_frames", f"{mode}-{size}", {
            "worst_loop_stall_ms": round(worst * 1000, 1), "api": api, "runs": runs,
            "per_api_ms": {a: round(s * 1000, 1) for a, s in per_api.items()}}), flush=True)
    overall = max(((s, d) for s, d in summary.items()), key=lambda x: x[1]["worst_ms"])
    log(f"{mode}: worst loop stall {overall[1]['worst_ms']} ms at {overall[0] / MIB:.2f} MiB "
        f"({overall[1]['api']})")
    save_results(f"hostile_frames-{mode}", {str(k): v for k, v in results.items()})


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    a = ap.parse_args()
    main(a, before=a.before)
    sys.exit(0)

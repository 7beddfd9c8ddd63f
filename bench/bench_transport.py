"""gRPC's own cost on this machine, with no replog code at all: the floor under the figures of
``bench client`` and ``bench cluster`` (docs/profiles/README.md).

A bare grpc.aio server (one child process: generic unary handler, raw ``bytes`` both ways, no
protobuf) and a bare grpc.aio client (this process), both on the event loop and allocator that
replog's processes use (``common.event_loop``), exchange messages of the sizes replog's
workloads send:

- ``call``: 100 B each way, 4 calls in flight: the fixed cost of one RPC;
- ``produce 64 KiB``: one 64 KiB batch answered with 100 B, 5 in flight (the Producer's
  default max.in.flight.requests.per.connection at batch.size 65536);
- ``produce 128 KiB``: the lean generator's Produce (2 batches of 64 KiB), 4 in flight;
- ``produce 1 MiB``: the Producer's largest request (max.request.size), 5 in flight;
- ``fetch 1 MiB``: a small request answered with 1 MiB, 1 in flight (a replica fetcher has one
  Fetch in flight per leader).

Each shape is measured twice in every run, back to back: as unary calls, and as request/answer
message pairs on one open bidirectional stream (the server answers a stream's requests in
order; the client keeps the shape's number of requests written ahead of their answers, as
Kafka's NetworkClient pipelines requests on one connection). For each: calls/s, and CPU per
call and per GB moved, split into server and client (user + sys; the server's from its own
CPU times, the client's from this process's). Figures are the median of ``--runs`` runs (3 by
default); the stream/unary ratio of CPU per call (both ends) is taken per run, then the median.

Then the floor: for each workload of ``bench cluster`` (a) whose run recorded its requests per
GB (``bench/results/cluster.json``, from the brokers' kafka_network_requestmetrics_requests_total),
the CPU that gRPC alone takes per GB acknowledged, both ends of every Produce and follower
Fetch counted (the load generator's end included: it shares the 2 CPUs), and the throughput
that floor allows on this machine's CPUs if replog's own code, the storage and the kernel's file
I/O cost nothing. A call of B bytes is costed as the ``call`` shape's per-call CPU plus B times
the per-byte CPU of the matching 1 MiB shape.

Run: ``python -m bench transport [--runs N] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import grpc
import psutil

from bench import GB, RESULTS_DIR, json_line, log, machine_info, median, save_results
from common import event_loop
from harness.polling import wait_until

NAME = "transport"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVICE, METHOD, STREAM = "bench.Transport", "Call", "Stream"
MODES = ("unary", "stream")
OPTIONS = [("grpc.max_send_message_length", 64 << 20),
           ("grpc.max_receive_message_length", 64 << 20)]
_HEAD = struct.Struct("!I")  # the request's first 4 bytes: how many bytes to answer


@dataclass(frozen=True)
class Shape:
    name: str
    request_bytes: int
    response_bytes: int
    in_flight: int
    calls: int
    quick_calls: int


SHAPES = (
    Shape("call", 100, 100, 4, 6000, 1500),
    Shape("produce 64 KiB", 64 << 10, 100, 5, 3000, 800),
    Shape("produce 128 KiB", 128 << 10, 100, 4, 3000, 800),
    Shape("produce 1 MiB", 1 << 20, 100, 5, 800, 200),
    Shape("fetch 1 MiB", 100, 1 << 20, 1, 800, 200),
)


# ============================================================================ server (child)

async def _serve(port_file: str) -> None:
    answers: dict[int, bytes] = {}

    async def handle(request: bytes, context) -> bytes:
        n = _HEAD.unpack_from(request)[0]
        a = answers.get(n)
        if a is None:
            a = answers[n] = os.urandom(n)
        return a

    async def handle_stream(requests, context):
        async for request in requests:
            yield await handle(request, context)

    server = grpc.aio.server(options=OPTIONS)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
        METHOD: grpc.unary_unary_rpc_method_handler(handle),
        STREAM: grpc.stream_stream_rpc_method_handler(handle_stream)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    _write_port(port_file, port)
    await server.wait_for_termination()


def _write_port(port_file: str, port: int) -> None:
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.replace(port_file + ".tmp", port_file)


def serve(port_file: str) -> None:
    event_loop.run(_serve(port_file))


# ============================================================================ client

async def _drive(port: int, shape: Shape, calls: int) -> tuple[float, float]:
    """(wall s, client CPU s) for ``calls`` unary calls of ``shape`` after a warm-up."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=OPTIONS) as ch:
        call = ch.unary_unary(f"/{SERVICE}/{METHOD}")
        payload = _payload(shape)

        async def worker(n: int) -> None:
            for _ in range(n):
                await call(payload, timeout=60)

        await asyncio.gather(*(worker(20) for _ in range(shape.in_flight)))
        per = calls // shape.in_flight
        c0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker(per) for _ in range(shape.in_flight)))
        return time.perf_counter() - t0, time.process_time() - c0


async def _drive_stream(port: int, shape: Shape, calls: int) -> tuple[float, float]:
    """(wall s, client CPU s) for ``calls`` request/answer pairs of ``shape`` on one open
    stream after a warm-up: one task writes, keeping at most ``in_flight`` requests ahead of
    their answers, another reads (Kafka's NetworkClient: requests pipelined on one
    connection, max.in.flight.requests.per.connection of them unanswered)."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=OPTIONS) as ch:
        stream = ch.stream_stream(f"/{SERVICE}/{STREAM}")()
        payload = _payload(shape)
        window = asyncio.Semaphore(shape.in_flight)

        async def write(n: int) -> None:
            for _ in range(n):
                await window.acquire()
                await stream.write(payload)

        async def read(n: int) -> None:
            for _ in range(n):
                answer = await stream.read()
                if answer is grpc.aio.EOF:
                    raise RuntimeError("the bare server ended the stream")
                window.release()

        await asyncio.gather(write(20 * shape.in_flight), read(20 * shape.in_flight))
        n = calls // shape.in_flight * shape.in_flight
        c0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(write(n), read(n))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        await stream.done_writing()
        return wall, cpu


def _payload(shape: Shape) -> bytes:
    return _HEAD.pack(shape.response_bytes) + os.urandom(max(0, shape.request_bytes
                                                             - _HEAD.size))


def _measure(shape: Shape, calls: int, port: int, server: psutil.Process,
             mode: str = "unary") -> dict:
    s0 = sum(server.cpu_times()[:2])
    drive = _drive_stream if mode == "stream" else _drive
    wall, client_cpu = event_loop.run(drive(port, shape, calls))
    server_cpu = sum(server.cpu_times()[:2]) - s0
    n = calls // shape.in_flight * shape.in_flight
    moved = n * (shape.request_bytes + shape.response_bytes) / GB
    return {"calls_s": n / wall, "mb_s": moved * 1000 / wall,
            "server_us_per_call": server_cpu / n * 1e6, "client_us_per_call": client_cpu / n * 1e6,
            "server_s_per_gb": server_cpu / moved, "client_s_per_gb": client_cpu / moved}


def _start_server(tmp: str) -> tuple[subprocess.Popen, int]:
    """The bare server in a child process, and the port it bound (it writes it to a file)."""
    port_file = os.path.join(tmp, "transport.port")
    proc = subprocess.Popen([sys.executable, "-c",
                             f"from bench.bench_transport import serve; serve({port_file!r})"],
                            cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
    def started() -> bool:
        if os.path.exists(port_file):
            return True
        if proc.poll() is not None:
            raise RuntimeError("the bare gRPC server exited while starting")
        return False

    def timed_out(_last) -> RuntimeError:
        proc.kill()
        return RuntimeError("the bare gRPC server did not start")

    wait_until(started, 30, interval=0.05, timed_out=timed_out)
    with open(port_file) as f:
        return proc, int(f.read())


# ============================================================================ the floor

def per_call_cost(shapes: dict[str, dict], direction: str, nbytes: float) -> float:
    """gRPC CPU s (both ends) for one call carrying ``nbytes`` in ``direction`` ("produce":
    the request is large, "fetch": the response is): the fixed cost of a small call plus the
    per-byte cost of the matching 1 MiB shape beyond its own fixed part."""
    small = shapes["call"]
    fixed = (small["server_us_per_call"] + small["client_us_per_call"]) / 1e6
    big = shapes[f"{direction} 1 MiB"]
    big_call = (big["server_us_per_call"] + big["client_us_per_call"]) / 1e6
    per_byte = max(0.0, big_call - fixed) / (1 << 20)
    return fixed + per_byte * nbytes


def floor(shapes: dict[str, dict], workload: dict, cpus: int) -> dict | None:
    """The gRPC-only CPU per GB acknowledged of one recorded workload, and the MB/s it caps."""
    reqs = workload.get("requests_per_gb")
    if not reqs:
        return None
    produce = reqs["produce"] * per_call_cost(shapes, "produce", reqs["produce_bytes"])
    fetch = reqs["fetch_follower"] * per_call_cost(shapes, "fetch", reqs["fetch_follower_bytes"])
    s_per_gb = produce + fetch
    return {"grpc_s_per_gb": round(s_per_gb, 2), "produce_s_per_gb": round(produce, 2),
            "fetch_s_per_gb": round(fetch, 2),
            "max_mb_s": round(cpus / s_per_gb * 1000, 1) if s_per_gb > 0 else None,
            "measured_mb_s": workload.get("mb_s"),
            "measured_s_per_gb": round((workload.get("cluster_cpu_s_per_gb") or 0)
                                       + (workload.get("loadgen_cpu_s_per_gb") or 0), 2)}


# ============================================================================ main

def main(opts: argparse.Namespace | None = None) -> dict:
    quick = bool(getattr(opts, "quick", False))
    runs = getattr(opts, "runs", None) or (1 if quick else 3)
    parent = getattr(opts, "data_dir", None) or "/tmp"
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="replog-bench-transport-", dir=parent) as tmp:
        proc, port = _start_server(tmp)
        try:
            server = psutil.Process(proc.pid)
            raw: dict[str, dict[str, list[dict]]] = {
                mode: {s.name: [] for s in SHAPES} for mode in MODES}
            for r in range(runs):
                for s in SHAPES:
                    # Alternate which transport goes first, so a drift in the machine's load
                    # does not always favour the same one.
                    for mode in (MODES if r % 2 == 0 else MODES[::-1]):
                        m = _measure(s, s.quick_calls if quick else s.calls, port, server,
                                     mode)
                        raw[mode][s.name].append(m)
                        log(f"[transport] run {r + 1}/{runs} {s.name} {mode}: "
                            f"{m['calls_s']:.0f} calls/s, server "
                            f"{m['server_us_per_call']:.0f} us/call, client "
                            f"{m['client_us_per_call']:.0f} us/call")
        finally:
            proc.kill()
            proc.wait()
    by_mode = {mode: {name: {k: round(median(m[k] for m in ms), 3) for k in ms[0]}
                      for name, ms in raw[mode].items()} for mode in MODES}
    shapes = by_mode["unary"]
    ratios = {name: round(median(_both_ends(st) / _both_ends(un) for st, un in
                                 zip(raw["stream"][name], raw["unary"][name])), 3)
              for name in shapes}
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    floors = {}
    cluster_json = RESULTS_DIR / "cluster.json"
    if cluster_json.exists():
        try:
            variants = json.loads(cluster_json.read_text())["figures"]["throughput"]["variants"]
        except (KeyError, ValueError):
            variants = {}
        for name in ("lean_rf3", "lean_rf1"):
            f = floor(shapes, variants.get(name, {}), cpus)
            if f is not None:
                floors[name] = f
    results = {"bench": NAME, "machine": machine_info(), "quick": quick, "runs": runs,
               "figures": {"shapes": shapes, "streams": by_mode["stream"],
                           "stream_over_unary_cpu_per_call": ratios, "floors": floors},
               "raw": raw}
    _print(results, cpus)
    save_results(NAME, results)
    return results


def _both_ends(m: dict) -> float:
    return m["server_us_per_call"] + m["client_us_per_call"]


def _print(results: dict, cpus: int) -> None:
    figs = results["figures"]
    print(f"\ngRPC alone (grpc.aio, raw bytes, {event_loop.loop_factory() and 'uvloop' or 'asyncio'}"  # noqa: E501
          f"), server in a child process, median of {results['runs']} run(s); unary calls, "
          f"then message pairs on one open stream")
    print(f"    {'shape':<18}{'mode':<8}{'calls/s':>9}{'MB/s':>8}{'server us':>11}"
          f"{'client us':>11}{'both us':>9}{'server s/GB':>13}{'client s/GB':>13}")
    for name in figs["shapes"]:
        for mode, table in (("unary", figs["shapes"]), ("stream", figs["streams"])):
            m = table[name]
            # Per GB says nothing for a 100-byte call: its cost is the call itself.
            per_gb = (f"{m['server_s_per_gb']:>13.2f}{m['client_s_per_gb']:>13.2f}"
                      if m["mb_s"] >= 1 else f"{'-':>13}{'-':>13}")
            print(f"    {name:<18}{mode:<8}{m['calls_s']:>9.0f}{m['mb_s']:>8.1f}"
                  f"{m['server_us_per_call']:>11.0f}{m['client_us_per_call']:>11.0f}"
                  f"{_both_ends(m):>9.0f}{per_gb}")
            print(json_line(NAME, f"shape {name}" + (" stream" if mode == "stream" else ""), m))
        ratio = figs["stream_over_unary_cpu_per_call"][name]
        print(f"    {'':<18}stream/unary CPU per call (both ends), median of per-run ratios: "
              f"{ratio:.2f}")
        print(json_line(NAME, f"stream/unary {name}", {"cpu_per_call_ratio": ratio}))
    floors = results["figures"]["floors"]
    if not floors:
        print("    floor: run `python -m bench cluster` first (it records requests per GB)")
        return
    print(f"\nThe floor gRPC sets under bench cluster (a) ({cpus} CPUs; requests per GB as "
          f"recorded there; both ends of every call counted)")
    for name, f in floors.items():
        print(f"    {name}: gRPC alone {f['grpc_s_per_gb']} CPU s/GB (Produce "
              f"{f['produce_s_per_gb']}, follower Fetch {f['fetch_s_per_gb']}) -> at most "
              f"{f['max_mb_s']} MB/s with every other cost at zero; measured {f['measured_mb_s']}"
              f" MB/s at {f['measured_s_per_gb']} s/GB (cluster + load generator)")
        print(json_line(NAME, f"floor {name}", f))

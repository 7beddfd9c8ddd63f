"""``replog metrics export``: sample every process of a cluster to files ``replog analyze`` reads.

Every ``interval`` it re-reads ``DATA_DIR/cluster.json`` (processes come and go; a restart
rewrites it), scrapes each process's ``/metrics`` concurrently, and appends

- one line per sample to ``samples/samples-<start>.jsonl`` and one line per scrape attempt to
  ``scrapes/scrapes-<start>.jsonl`` — a refused or timed-out scrape is a record with ``ok``
  false, which is how a SIGKILL or a SIGSTOP shows up in the data;
- the new complete lines of every ``DATA_DIR/logs/*.events.jsonl`` to
  ``events/<process>.events.jsonl``, each stamped with the cluster id (from a broker log dir's
  ``meta.properties``), so that events of another cluster can be told apart later.

Layout and record shapes: ``analytics.schema``. JSON Lines rather than Parquet: a few hundred
small records a second are cheapest appended as text (no pyarrow, no row groups held in
memory), and Spark reads them natively with an explicit schema.

The HTTP client is a few lines on asyncio streams rather than urllib in threads: a SIGSTOPped
process accepts the connection (the kernel does) and never answers, so every scrape needs a
deadline, and a cancelled coroutine frees its socket where a blocked thread would not. Writes go
through aiofiles (the design card's library for cold paths), so a slow disk delays the files,
not the next scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import aiofiles
from prometheus_client.parser import text_string_to_metric_families

from analytics.schema import (
    EVENTS_DIR,
    EXPORT_FORMAT,
    EXPORT_VERSION,
    MANIFEST,
    SAMPLES_DIR,
    SCRAPES_DIR,
)
from common.errors import ReplogError

CLUSTER_JSON = "cluster.json"


class ExportError(ReplogError):
    """The export cannot start or go on (no cluster, out dir of another cluster)."""


@dataclass(frozen=True)
class Target:
    process: str       # "broker-1"
    role: str
    node_id: int
    url: str
    pid: int | None


def read_targets(cluster_dir: Path) -> tuple[list[Target], list[str]]:
    """The processes listed in ``cluster.json`` and the broker log dirs."""
    info = json.loads((cluster_dir / CLUSTER_JSON).read_text(encoding="utf-8"))
    targets, log_dirs = [], []
    for role in ("controller", "broker"):
        for p in info.get(f"{role}s", []):
            if p.get("metrics_url"):
                targets.append(Target(f"{role}-{p['id']}", role, int(p["id"]), p["metrics_url"],
                                      p.get("pid")))
            log_dirs += p.get("log_dirs", [])
    return targets, log_dirs


def cluster_id_of(log_dirs: list[str]) -> str | None:
    for d in log_dirs:
        try:
            text = (Path(d) / "meta.properties").read_text(encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
    return None


async def http_get(url: str, timeout: float) -> str:
    """GET ``url`` (HTTP/1.0, so the server closes when done); the body, or an OSError /
    TimeoutError naming what failed."""
    u = urlsplit(url)
    async def get() -> bytes:
        reader, writer = await asyncio.open_connection(u.hostname, u.port or 80)
        try:
            writer.write(f"GET {u.path or '/'} HTTP/1.0\r\nHost: {u.netloc}\r\n\r\n".encode())
            await writer.drain()
            return await reader.read()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    data = await asyncio.wait_for(get(), timeout)
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    if len(status) < 2 or status[1] != b"200":
        raise OSError(f"HTTP {status[1].decode() if len(status) > 1 else '?'} from {url}")
    return body.decode("utf-8", "replace")


def parse_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, dict(s.labels), float(s.value))
            for fam in text_string_to_metric_families(text) for s in fam.samples]


class Exporter:
    def __init__(self, cluster_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                 interval_ms: int = 1000, clock=time.time):
        if interval_ms < 10:
            raise ExportError("--interval-ms must be at least 10")
        self.cluster_dir = Path(cluster_dir).resolve()
        self.out = Path(out_dir).resolve()
        self.interval = interval_ms / 1000.0
        # A scrape must end before the next round starts, or a paused process piles them up.
        self.timeout = max(0.05, min(2.0, 0.8 * self.interval))
        self.clock = clock
        self.cluster_id: str | None = None
        self.started = clock()
        self.rounds = 0
        self._offsets: dict[Path, int] = {}   # events file -> bytes already copied
        self._partial: dict[Path, bytes] = {}
        self._files: dict[str, object] = {}

    # ------------------------------------------------------------------ set-up

    def check(self) -> None:
        if not (self.cluster_dir / CLUSTER_JSON).is_file():
            raise ExportError(f"no {CLUSTER_JSON} in {self.cluster_dir} (is it the data dir of "
                              f"a cluster started with 'replog cluster up'?)")
        try:
            read_targets(self.cluster_dir)
        except (ValueError, KeyError, TypeError) as e:
            raise ExportError(f"{self.cluster_dir / CLUSTER_JSON} is not a cluster "
                              f"description: {e}") from None
        old = self._read_manifest()
        if old is not None and old.get("format") != EXPORT_FORMAT:
            raise ExportError(f"{self.out} holds something other than a replog export")

    def _read_manifest(self) -> dict | None:
        try:
            return json.loads((self.out / MANIFEST).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except ValueError:
            raise ExportError(f"{self.out / MANIFEST} is not JSON") from None

    async def _write_manifest(self, **extra) -> None:
        old = self._read_manifest() or {}
        if old.get("cluster_id") and self.cluster_id and old["cluster_id"] != self.cluster_id:
            raise ExportError(f"{self.out} holds an export of cluster {old['cluster_id']}; this "
                              f"cluster is {self.cluster_id}: use another --out")
        m = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "cluster_id": self.cluster_id,
             "data_dir": str(self.cluster_dir), "interval_ms": round(self.interval * 1000),
             "started": old.get("started", self.started), **extra}
        tmp = self.out / (MANIFEST + ".tmp")
        async with aiofiles.open(tmp, "w", encoding="utf-8") as f:
            await f.write(json.dumps(m, indent=2) + "\n")
        os.replace(tmp, self.out / MANIFEST)

    async def _open(self) -> None:
        stamp = f"{self.started:.3f}".replace(".", "")
        for sub in (SAMPLES_DIR, SCRAPES_DIR, EVENTS_DIR):
            (self.out / sub).mkdir(parents=True, exist_ok=True)
        self._files["samples"] = await aiofiles.open(
            self.out / SAMPLES_DIR / f"samples-{stamp}.jsonl", "a", encoding="utf-8")
        self._files["scrapes"] = await aiofiles.open(
            self.out / SCRAPES_DIR / f"scrapes-{stamp}.jsonl", "a", encoding="utf-8")

    async def close(self) -> None:
        for f in self._files.values():
            await f.close()
        self._files.clear()

    # ------------------------------------------------------------------ one round

    async def _scrape(self, t: Target) -> tuple[list[str], str]:
        ts = self.clock()
        t0 = time.perf_counter()
        base = {"process": t.process, "role": t.role, "node_id": t.node_id}
        try:
            samples = parse_samples(await http_get(t.url, self.timeout))
            ok, error = True, None
        except (TimeoutError, OSError, ValueError) as e:
            samples, ok = [], False
            error = f"{type(e).__name__}: {e}"[:200] if str(e) else type(e).__name__
        duration_ms = round((time.perf_counter() - t0) * 1000, 3)
        lines = [json.dumps({"ts": ts, **base, "metric": n, "labels": lab, "value": v},
                            separators=(",", ":")) for n, lab, v in samples]
        scrape = json.dumps({"ts": ts, **base, "pid": t.pid, "ok": ok, "error": error,
                             "duration_ms": duration_ms}, separators=(",", ":"))
        return lines, scrape

    async def _copy_events(self) -> int:
        """Append the new complete lines of every process's event log; returns lines copied."""
        copied = 0
        for src in sorted((self.cluster_dir / "logs").glob("*.events.jsonl")):
            try:
                size = src.stat().st_size
            except OSError:
                continue
            offset = self._offsets.get(src, 0)
            if size < offset:  # the file was replaced: start over
                offset, self._partial[src] = 0, b""
            if size == offset:
                continue
            async with aiofiles.open(src, "rb") as f:
                await f.seek(offset)
                data = await f.read(size - offset)
            self._offsets[src] = offset + len(data)
            data = self._partial.pop(src, b"") + data
            complete, _, rest = data.rpartition(b"\n")
            # A line being written (or torn by a SIGKILL) waits for its newline.
            self._partial[src] = rest
            if not complete:
                continue
            out = []
            for raw in complete.split(b"\n"):
                try:
                    rec = json.loads(raw)
                    rec["cluster_id"] = self.cluster_id
                    out.append(json.dumps(rec, separators=(",", ":")))
                except ValueError:
                    out.append(raw.decode("utf-8", "replace"))  # kept: the reader counts it
            async with aiofiles.open(self.out / EVENTS_DIR / src.name, "a",
                                     encoding="utf-8") as f:
                await f.write("\n".join(out) + "\n")
            copied += len(out)
        return copied

    async def round(self) -> None:
        try:
            targets, log_dirs = read_targets(self.cluster_dir)
        except (OSError, ValueError, KeyError, TypeError):
            targets, log_dirs = [], []  # being rewritten or gone: the next round reads it
        if self.cluster_id is None:
            self.cluster_id = cluster_id_of(log_dirs)
            if self.cluster_id is not None:
                await self._write_manifest()
        results = await asyncio.gather(*(self._scrape(t) for t in targets))
        samples = [line for lines, _ in results for line in lines]
        scrapes = [s for _, s in results]
        if samples:
            await self._files["samples"].write("\n".join(samples) + "\n")
            await self._files["samples"].flush()
        if scrapes:
            await self._files["scrapes"].write("\n".join(scrapes) + "\n")
            await self._files["scrapes"].flush()
        if self.cluster_id is not None:  # events are stamped with it, so they wait for it
            await self._copy_events()
        self.rounds += 1

    # ------------------------------------------------------------------ loop

    async def run(self, stop: asyncio.Event, duration_s: float | None = None) -> None:
        self.check()
        self.out.mkdir(parents=True, exist_ok=True)
        await self._open()
        await self._write_manifest()
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        end = None if duration_s is None else next_at + duration_s
        try:
            while not stop.is_set() and (end is None or loop.time() < end):
                await self.round()
                # Fixed-rate schedule: a slow round does not shift the sampling grid.
                next_at += self.interval
                delay = next_at - loop.time()
                if delay < 0:
                    next_at = loop.time()
                    continue
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
            await self.round()  # the last lines of processes that just stopped
            await self._write_manifest(stopped=self.clock(), rounds=self.rounds)
        finally:
            await self.close()


def run(cluster_dir: str, out_dir: str, interval_ms: int = 1000,
        duration_s: float | None = None) -> int:
    """The CLI's entry: export until SIGINT/SIGTERM (or ``duration_s``)."""
    exporter = Exporter(cluster_dir, out_dir, interval_ms)
    exporter.check()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for s in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(s, stop.set)
        await exporter.run(stop, duration_s)

    print(f"Exporting {exporter.cluster_dir} every {interval_ms} ms to {exporter.out}",
          flush=True)
    asyncio.run(main())
    print(f"Export stopped after {exporter.rounds} rounds: {exporter.out}", flush=True)
    return 0

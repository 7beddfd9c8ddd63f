"""``replog analyze --input DIR --output DIR [--master URL]``: the thin main around the transforms.

1. Check the input before any JVM starts, so that bad input costs one line and no Spark
   start-up: a ``manifest.json`` of a replog export, some data, Parquet files that are Parquet
   (magic bytes at both ends), and event lines of this export's cluster only.
2. Read it into DataFrames (JSON Lines with explicit schemas; Parquet where present).
3. ``compute``: every table of the report, from ``analytics.transforms`` (pure).
4. Write each table as ``OUTPUT/tables/<name>.parquet`` (Spark) and ``<name>.csv`` (one file,
   from the driver: the tables are small and a single file is what people open), then
   ``OUTPUT/summary.json`` and ``OUTPUT/report.html`` (``analytics.report``).

Runs on ``local[*]`` unless ``--master`` names a cluster (``spark://host:port``); on a cluster the
executors read the input and write the Parquet tables by path, so both must be on storage they
share with the driver (the same host, for a local standalone cluster).
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException

from analytics import transforms
from analytics.schema import (
    EVENT_SCHEMA,
    EVENTS_DIR,
    EXPORT_FORMAT,
    MANIFEST,
    SAMPLE_SCHEMA,
    SAMPLES_DIR,
    SCRAPE_SCHEMA,
    SCRAPES_DIR,
    AnalyzeError,
)

# The tables, in report order; each is written as CSV and Parquet.
TABLES = ("failover_summary", "failovers", "availability", "recoveries", "isr_changes",
          "isr_churn_by_partition", "isr_churn_by_broker", "flapping_partitions",
          "unclean_elections", "log_dir_failures", "reassignments", "throughput_by_broker",
          "throughput", "follower_lag", "under_replicated", "offline_partitions",
          "process_transitions", "scrape_health")


# ---------------------------------------------------------------------------- input checks

def _data_files(d: Path) -> tuple[list[Path], list[Path]]:
    if not d.is_dir():
        return [], []
    files = sorted(p for p in d.iterdir() if p.is_file() and p.stat().st_size > 0)
    return ([p for p in files if p.suffix == ".jsonl"], [p for p in files if p.suffix == ".parquet"])  # noqa: E501


def _check_parquet(p: Path, root: Path) -> None:
    # A Parquet file starts and ends with "PAR1"; Spark's own error for a bad one is a page of
    # Java stack. Checked here, before any JVM starts.
    size = p.stat().st_size
    with p.open("rb") as f:
        head = f.read(4)
        f.seek(max(0, size - 4))
        tail = f.read(4)
    if size < 12 or head != b"PAR1" or tail != b"PAR1":
        raise AnalyzeError(f"{p.relative_to(root)} is not a Parquet file (corrupt or truncated)")


def check_input(input_dir: str | os.PathLike[str]) -> dict:
    """Validate an export dir; returns its manifest plus the data files found.

    Raises AnalyzeError naming the first problem."""
    root = Path(input_dir)
    if not root.is_dir():
        raise AnalyzeError(f"{root}: no such directory")
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AnalyzeError(f"{root} is not a replog export: no {MANIFEST} (write one with "
                           f"'replog metrics export --cluster DATA_DIR --out {root}')") from None
    except (ValueError, UnicodeDecodeError):
        raise AnalyzeError(f"{root / MANIFEST} is not JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != EXPORT_FORMAT:
        raise AnalyzeError(f"{root / MANIFEST} is not the manifest of a replog export")
    files = {}
    for sub in (SAMPLES_DIR, SCRAPES_DIR, EVENTS_DIR):
        jsonl, parquet = _data_files(root / sub)
        for p in parquet:
            _check_parquet(p, root)
        files[sub] = (jsonl, parquet)
    if not any(j or p for j, p in files.values()):
        raise AnalyzeError(f"{root} holds no samples, scrapes or events (was the exporter "
                           f"stopped before its first round?)")
    cluster = manifest.get("cluster_id")
    seen: dict[str, Path] = {}
    for p in files[EVENTS_DIR][0]:
        with p.open("rb") as f:
            for raw in f:
                # The stamp is near the end of a line; a cheap find avoids parsing every line.
                i = raw.rfind(b'"cluster_id":')
                if i < 0:
                    continue
                try:
                    cid = json.loads(raw).get("cluster_id")
                except ValueError:
                    continue  # a torn line: dropped (and counted) by the reader
                if cid and cid not in seen:
                    seen[cid] = p
    others = {c: p for c, p in seen.items() if c != cluster} if cluster else \
        dict(list(seen.items())[1:])
    if others:
        c, p = next(iter(others.items()))
        raise AnalyzeError(f"{p.relative_to(root)} holds events of cluster {c}, but this export "
                           f"is of cluster {cluster or next(iter(seen))}: events from another "
                           f"cluster cannot be analysed together")
    return {"manifest": manifest, "files": files}


# ---------------------------------------------------------------------------- read

def _read(spark, schema, files: tuple[list[Path], list[Path]], corrupt_column: bool = False):
    jsonl, parquet = files
    frames = []
    if jsonl:
        r = spark.read.schema(schema).option("mode", "PERMISSIVE")
        if corrupt_column:
            r = r.option("columnNameOfCorruptRecord", "_corrupt_record")
        frames.append(r.json([str(p) for p in jsonl]))
    if parquet:
        cols = [f.name for f in schema.fields if f.name != "_corrupt_record"]
        df = spark.read.parquet(*[str(p) for p in parquet])
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise AnalyzeError(f"{parquet[0].parent.name}/*.parquet lacks column(s) "
                               f"{', '.join(missing)}")
        from pyspark.sql import functions as F
        df = df.select(*[F.col(f.name).cast(f.dataType) if f.name in df.columns
                         else F.lit(None).cast(f.dataType).alias(f.name)
                         for f in schema.fields])
        frames.append(df)
    if not frames:
        return spark.createDataFrame([], schema)
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def read_export(spark, checked: dict) -> dict:
    files = checked["files"]
    raw_events = _read(spark, EVENT_SCHEMA, files[EVENTS_DIR], corrupt_column=True).cache()
    malformed = raw_events.where("_corrupt_record IS NOT NULL").count()
    events = transforms.normalize_events(raw_events).cache()
    samples = _read(spark, SAMPLE_SCHEMA, files[SAMPLES_DIR]).where("ts IS NOT NULL").cache()
    scrapes = _read(spark, SCRAPE_SCHEMA, files[SCRAPES_DIR]).where("ts IS NOT NULL").cache()
    return {"events": events, "samples": samples, "scrapes": scrapes,
            "malformed_event_lines": malformed}


# ---------------------------------------------------------------------------- compute

def compute(events, samples, scrapes, span: tuple[float, float]) -> dict:
    """Every table of the report (lazy DataFrames) from the three inputs: pure."""
    transitions = transforms.process_transitions(scrapes).cache()
    losses = transforms.leader_losses(events, transitions, scrapes)
    failover = transforms.failovers(losses, events).cache()
    changes = transforms.isr_changes(events).cache()
    replica_changes = transforms.isr_replica_changes(changes).cache()
    rates = transforms.counter_rates(samples).cache()
    return {
        "failover_summary": transforms.failover_summary(failover),
        "failovers": failover,
        "availability": transforms.availability(failover, transforms.partitions(events), *span),
        "recoveries": transforms.replica_recoveries(replica_changes, events, transitions),
        "isr_changes": changes.orderBy("ts", "partition"),
        "isr_churn_by_partition": transforms.isr_churn_by_partition(changes),
        "isr_churn_by_broker": transforms.isr_churn_by_broker(replica_changes),
        "flapping_partitions": transforms.flapping_partitions(changes),
        "unclean_elections": transforms.unclean_elections(events),
        "log_dir_failures": transforms.log_dir_failures(events, replica_changes),
        "reassignments": transforms.reassignments(events, samples),
        "throughput_by_broker": transforms.throughput_by_broker(rates),
        "throughput": rates,
        "follower_lag": transforms.follower_lag(samples),
        "under_replicated": transforms.gauge_series(
            samples, "kafka_server_replicamanager_underreplicatedpartitions"),
        "offline_partitions": transforms.gauge_series(
            samples, "kafka_controller_kafkacontroller_offlinepartitionscount"),
        "process_transitions": transitions.orderBy("ts", "process"),
        "scrape_health": transforms.scrape_health(scrapes),
        "_skew": transforms.skew_bound(events),
    }


def _plain(v):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, list):
        return " ".join(str(x) for x in v)
    return v


def write_csv(path: Path, columns: list[str], rows: list) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if _plain(v) is None else _plain(v) for v in r])


def summarize(manifest: dict, span, counts: dict, data: dict, skew: dict) -> list[tuple]:
    """The report's summary table: (figure, value) rows, computed from collected tables."""
    def col(name, c):
        return [r[c] for r in data[name]["rows"]]
    fo = [r for r in data["failovers"]["rows"]]
    served = [r["failover_s"] for r in fo if r["failover_s"] is not None]
    avail = col("availability", "availability_pct")
    rec = [x for x in col("recoveries", "recovery_s") if x is not None]
    ch = data["isr_changes"]["rows"]
    trans = data["process_transitions"]["rows"]
    unclean = data["unclean_elections"]["rows"]
    moves = data["reassignments"]["rows"]
    out = [
        ("cluster id", manifest.get("cluster_id") or "unknown"),
        ("observed", f"{span[1] - span[0]:.1f} s" if span[0] is not None else "nothing"),
        ("sampling interval", f"{manifest.get('interval_ms', '?')} ms"),
        ("processes sampled", len(data["scrape_health"]["rows"])),
        ("events / samples / scrapes",
         f"{counts['events']} / {counts['samples']} / {counts['scrapes']}"),
        ("malformed event lines (dropped)", counts["malformed_event_lines"]),
        ("process outages seen by the exporter (kill, pause)",
         sum(1 for r in trans if r["kind"] == "down")),
        ("partitions", len(avail)),
        ("leader losses (failovers)", len(fo)),
        ("failover p50 / max", f"{_pct(served, 0.5):.3f} s / {max(served):.3f} s"
         if served else "-"),
        ("never served again", sum(1 for r in fo if r["failover_s"] is None)),
        ("lowest partition availability", f"{min(avail):.3f} %" if avail else "-"),
        ("replica recoveries (rejoined ISR)", len(rec)),
        ("recovery p50 / max", f"{_pct(rec, 0.5):.3f} s / {max(rec):.3f} s" if rec else "-"),
        ("ISR shrinks / expands",
         f"{sum(r['kind'] == 'shrink' for r in ch)} / {sum(r['kind'] == 'expand' for r in ch)}"),
        ("flapping partitions", len(data["flapping_partitions"]["rows"])),
        ("unclean elections / recoveries",
         f"{sum(r['kind'] == 'election' for r in unclean)} / "
         + f"{sum(r['kind'] == 'recovery' for r in unclean)}"),
        ("log-dir failures (partitions)", len(data["log_dir_failures"]["rows"])),
        ("reassignments (bytes moved)",
         f"{len(moves)} ({sum(r['bytes_moved'] or 0 for r in moves)} B)" if moves else "0"),
        ("clock skew bound (causality)",
         f"{skew['skew_bound_s']:.3f} s over {skew['pairs']} elections"),
    ]
    return out


def write_tables(tables: dict, names, tables_dir: Path) -> dict:
    """Write each named table as Parquet and CSV; returns {name: {"columns", "rows"}}."""
    data = {}
    for name in names:
        t1 = time.perf_counter()
        # Cached: the Parquet write and the collect share one computation.
        df = tables[name].cache()
        df.write.mode("overwrite").parquet(str(tables_dir / f"{name}.parquet"))
        rows = df.collect()
        df.unpersist()
        if os.environ.get("REPLOG_ANALYZE_TIMING"):
            print(f"{name}: {time.perf_counter() - t1:.2f} s", file=sys.stderr)
        write_csv(tables_dir / f"{name}.csv", df.columns, rows)
        data[name] = {"columns": df.columns, "rows": [r.asDict() for r in rows]}
    return data


def _pct(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (Spark's ``percentile``)."""
    v = sorted(values)
    k = (len(v) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def _check_all(input_dir: str | None, chaos_runs) -> tuple[dict | None, list | None]:
    """The export's and the chaos runs' checks, before any JVM starts."""
    from analytics import chaos_history
    if input_dir is None and not chaos_runs:
        raise AnalyzeError("nothing to analyse: give --input DIR (an export), "
                           "--chaos-history RUN_DIR (a 'replog chaos' run), or both")
    checked = check_input(input_dir) if input_dir is not None else None
    runs = chaos_history.check_runs(list(chaos_runs)) if chaos_runs else None
    return checked, runs


def _analyze_chaos(spark, runs: list, tables_dir: Path) -> tuple[dict, int]:
    from analytics import chaos_history
    history, malformed = chaos_history.read_histories(spark, runs)
    tables = chaos_history.compute(history, chaos_history.bounds_frame(spark, runs))
    return write_tables(tables, chaos_history.TABLES, tables_dir), malformed


def analyze(spark, input_dir: str | None, output_dir: str, render: bool = True,
            chaos_runs=None) -> dict:
    """Check, read, compute, write; returns {"summary": [...], "report": path, ...}, and
    {"chaos": tables} when chaos run dirs are given (alone, or beside the export)."""
    t0 = time.perf_counter()
    checked, runs = _check_all(input_dir, chaos_runs)
    out = Path(output_dir)
    tables_dir = out / "tables"
    if tables_dir.exists():
        shutil.rmtree(tables_dir)
    tables_dir.mkdir(parents=True)
    summary, span, data, chaos, malformed_history = [], (None, None), {}, None, 0
    try:
        if checked is not None:
            frames = read_export(spark, checked)
            span = transforms.observed_span(frames["events"], frames["scrapes"])
            if span[0] is None:
                raise AnalyzeError(f"{input_dir} holds no event or scrape with a time")
            tables = compute(frames["events"], frames["samples"], frames["scrapes"], span)
            data = write_tables(tables, TABLES, tables_dir)
            skew = tables["_skew"].collect()[0].asDict()
            counts = {"events": frames["events"].count(),
                      "samples": frames["samples"].count(),
                      "scrapes": frames["scrapes"].count(),
                      "malformed_event_lines": frames["malformed_event_lines"]}
            summary = summarize(checked["manifest"], span, counts, data, skew)
        if runs is not None:
            chaos, malformed_history = _analyze_chaos(spark, runs, tables_dir)
    except (PySparkException, Py4JError) as e:  # pages of JVM stack: keep the first line
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        what = input_dir if input_dir is not None else ", ".join(map(str, chaos_runs))
        raise AnalyzeError(f"Spark could not analyse {what}: {first[:300]}") from None
    result = {"summary": summary, "span": span, "seconds": time.perf_counter() - t0,
              "tables": {n: len(d["rows"]) for n, d in {**data, **(chaos or {})}.items()}}
    record = {"summary": dict(summary), "tables": result["tables"], "span": span}
    if chaos is not None:
        result["chaos"] = chaos
        result["malformed_history_lines"] = record["malformed_history_lines"] = \
            malformed_history
    (out / "summary.json").write_text(json.dumps(record, indent=2) + "\n")
    if render:
        from analytics.report import render_chaos_report, render_report
        result["report"] = (render_report(out, checked["manifest"], summary, data, span, chaos)
                            if checked is not None else render_chaos_report(out, chaos))
    return result


def main(input_dir: str | None, output_dir: str, master: str | None = None,
         chaos_runs=None) -> int:
    _check_all(input_dir, chaos_runs)  # bad input: one line, no JVM
    from analytics.spark import session
    try:
        spark = session(master or "local[*]")
    except (PySparkException, Py4JError, OSError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise AnalyzeError(f"cannot start Spark{' on ' + master if master else ''}: "
                           f"{first[:300]}") from None
    try:
        result = analyze(spark, input_dir, output_dir, chaos_runs=chaos_runs)
    finally:
        spark.stop()
    for k, v in result["summary"]:
        print(f"{k + ':':<52} {v}")
    if "chaos" in result:
        from analytics.chaos_history import format_tables
        if result["summary"]:
            print()
        print("\n".join(format_tables(result["chaos"])))
        if result["malformed_history_lines"]:
            print(f"(malformed history lines dropped: {result['malformed_history_lines']})")
    print(f"Tables: {Path(output_dir) / 'tables'}")
    print(f"Report: {result['report']}")
    return 0

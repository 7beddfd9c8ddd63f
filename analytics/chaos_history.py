"""Chaos histories in the PySpark analysis: ``replog analyze --chaos-history RUN_DIR``.

A ``replog chaos`` run dir holds ``history.jsonl`` (chaos/history.py), read here with
``HISTORY_SCHEMA`` (no inference: a history whose first lines lack a field, e.g. a run that
died before its first fault, still reads with every column). Several run dirs read into one
frame with a ``run`` column (the dir's name), so a sweep's runs compare in one table.

The tables, all from DataFrame operations on the history (pure functions below):

- ``chaos_partitions``: per run and partition, write outcomes by acks (ok, fail, unknown: an
  ``info`` completion or none at all) and the longest gap between two acknowledged acks=all
  writes, with where it lies: the figure chaos.checker reports as
  ``unavailable_s_per_partition``;
- ``chaos_fault_partitions``: the same per fault window and partition: the writes in flight
  during the window, the longest acks=all gap overlapping it;
- ``chaos_faults``: per fault window, those summed over partitions, the longest gap and its
  partition, against the detection bound from the run's ``verdict.json``: chaos.checker's
  ``availability``.

The definitions are chaos.checker's (``writes``, ``fault_windows``, ``fault_availability``,
``unavailability``), so that the two can be cross-checked on the same history: the tests
assert they agree. Gaps stay unrounded here (the checker rounds to the millisecond).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from analytics.schema import (
    CHAOS_TABLES,
    HISTORY_FILE,
    HISTORY_SCHEMA,
    VERDICT_FILE,
    AnalyzeError,
)

TABLES = CHAOS_TABLES  # name -> what it holds, in report order (defined in analytics.schema)
ACKS = ("all", "1")
OUTCOMES = ("ok", "fail", "unknown")
COUNT_COLUMNS = [f"acks_{a}_{o}" for a in ACKS for o in OUTCOMES]


def _error(message: str) -> Exception:
    return AnalyzeError(message)


# ---------------------------------------------------------------------------- input checks

def check_runs(run_dirs: list[str | os.PathLike[str]]) -> list[tuple[str, Path, float | None]]:
    """(run name, history path, detection bound or None) per run dir; raises AnalyzeError
    naming the first problem, before any JVM starts."""
    out: list[tuple[str, Path, float | None]] = []
    seen: dict[str, Path] = {}
    for d in map(Path, run_dirs):
        if not d.is_dir():
            raise _error(f"{d}: no such directory")
        path = d / HISTORY_FILE
        if not path.is_file():
            raise _error(f"{d} is not a chaos run dir: no {HISTORY_FILE} (write one with "
                         f"'replog chaos --seed N')")
        with path.open("rb") as f:
            first = f.readline()
        try:
            op = json.loads(first)
        except ValueError:
            op = None
        if not isinstance(op, dict) or not {"index", "time", "type", "f"} <= op.keys():
            raise _error(f"{path} is not a chaos history (its first line is not an operation)"
                         if first.strip() else f"{path} is empty")
        name = d.resolve().name
        if name in seen:
            raise _error(f"{seen[name]} and {d} are both named {name}: runs are told apart by "
                         f"their dir's name")
        seen[name] = d
        out.append((name, path, _detection_bound(d / VERDICT_FILE)))
    return out


def _detection_bound(path: Path) -> float | None:
    # The bound depends on the run's timeouts, which only the runner knew; its verdict keeps
    # it. A run that died before its verdict has none: exceeds stays null.
    try:
        bound = json.loads(path.read_text(encoding="utf-8"))["stats"]["detection_bound_s"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return float(bound) if isinstance(bound, (int, float)) else None


# ---------------------------------------------------------------------------- read

def read_histories(spark, runs: list[tuple[str, Path, float | None]]) -> tuple[DataFrame, int]:
    """One frame of every run's operations (HISTORY_SCHEMA's columns and ``run``), and the
    number of malformed lines dropped (a run killed mid-write leaves a torn last line)."""
    frames = [spark.read.schema(HISTORY_SCHEMA).option("mode", "PERMISSIVE")
              .option("columnNameOfCorruptRecord", "_corrupt_record").json(str(path))
              .withColumn("run", F.lit(name)) for name, path, _ in runs]
    raw = frames[0]
    for f in frames[1:]:
        raw = raw.unionByName(f)
    # Cached: Spark refuses a query of the corrupt-record column alone on an uncached read.
    raw = raw.cache()
    malformed = raw.where(F.col("_corrupt_record").isNotNull() | F.col("index").isNull()
                          | F.col("time").isNull()).count()
    ops = raw.where(F.col("_corrupt_record").isNull() & F.col("index").isNotNull()
                    & F.col("time").isNotNull()).drop("_corrupt_record")
    return ops, malformed


def bounds_frame(spark, runs: list[tuple[str, Path, float | None]]) -> DataFrame:
    return spark.createDataFrame([(name, bound) for name, _, bound in runs], StructType(
        [StructField("run", StringType()), StructField("bound_s", DoubleType())]))


# ---------------------------------------------------------------------------- transforms

def writes(history: DataFrame) -> DataFrame:
    """One row per send: run, process, partition, acks, value, invoke_s, complete_s, outcome
    (ok | fail | unknown), offset. As chaos.checker.writes pairs them: an invoke with the same
    process's next send operation; an invoke never completed is unknown; an invoke followed by
    another invoke of its process (which the workload never does) is dropped, as the checker
    drops it."""
    w = Window.partitionBy("run", "process").orderBy("index")
    sends = (history.where(F.col("f") == "send")
             .withColumn("next_type", F.lead("type").over(w))
             .withColumn("next_time", F.lead("time").over(w))
             .withColumn("next_offset", F.lead(F.col("value.offset")).over(w)))
    return (sends.where((F.col("type") == "invoke")
                        & (F.col("next_type").isNull() | (F.col("next_type") != "invoke")))
            .select("run", "process", F.col("value.partition").alias("partition"),
                    F.col("value.acks").alias("acks"), F.col("value.value").alias("value"),
                    F.col("time").alias("invoke_s"), F.col("next_time").alias("complete_s"),
                    F.when(F.col("next_type").isin("ok", "fail"), F.col("next_type"))
                    .otherwise(F.lit("unknown")).alias("outcome"),
                    F.when(F.col("next_type") == "ok", F.col("next_offset")).alias("offset")))


def fault_windows(history: DataFrame) -> DataFrame:
    """One row per fault that started: run, fault, nemesis, target, from_s, to_s (as
    chaos.checker.fault_windows: to its stop, else to the last ``healed``, else to the last
    operation of the run; an admin operation, duration 0, is an instant)."""
    nemesis = history.where((F.col("process") == "nemesis") & (F.col("type") == "ok"))
    # The later of several records wins, as in the checker's dict updates.
    last = F.max_by
    end = (history.groupBy("run").agg(last("time", "index").alias("last_s"))
           .join(nemesis.where(F.col("f") == "healed").groupBy("run")
                 .agg(last("time", "index").alias("healed_s")), "run", "left")
           .select("run", F.coalesce("healed_s", "last_s").alias("end_s")))
    faults = nemesis.where(F.col("value.fault").isNotNull())
    starts = (faults.where(F.col("f") == "start")
              .groupBy("run", F.col("value.fault.index").alias("fault"))
              .agg(last(F.struct(F.col("time").alias("from_s"), F.col("value.fault").alias("x")),
                        "index").alias("s"))
              .select("run", "fault", F.col("s.x.nemesis").alias("nemesis"),
                      F.array_join("s.x.target", " <-> ").alias("target"), "s.from_s",
                      F.col("s.x.duration_s").alias("duration_s")))
    stops = (faults.where(F.col("f") == "stop")
             .groupBy("run", F.col("value.fault.index").alias("fault"))
             .agg(last("time", "index").alias("stop_s")))
    instant = F.coalesce(F.col("duration_s"), F.lit(0.0)) == 0
    return (starts.join(stops, ["run", "fault"], "left").join(end, "run", "left")
            .select("run", "fault", "nemesis", "target", "from_s",
                    F.when(instant, F.col("from_s"))
                    .otherwise(F.coalesce("stop_s", "end_s")).alias("to_s")))


def ack_gaps(ws: DataFrame) -> DataFrame:
    """Gaps between consecutive acknowledged acks=all writes of a partition: run, partition,
    gap_from_s, gap_to_s, gap_s (completion times)."""
    w = Window.partitionBy("run", "partition").orderBy("complete_s")
    acked = ws.where((F.col("outcome") == "ok") & (F.col("acks") == "all"))
    return (acked.select("run", "partition", F.lag("complete_s").over(w).alias("gap_from_s"),
                         F.col("complete_s").alias("gap_to_s"))
            .where(F.col("gap_from_s").isNotNull())
            .withColumn("gap_s", F.col("gap_to_s") - F.col("gap_from_s")))


def _counts() -> list[Column]:
    return [F.sum(F.when((F.col("acks") == a) & (F.col("outcome") == o), 1).otherwise(0))
            .cast("long").alias(f"acks_{a}_{o}") for a in ACKS for o in OUTCOMES]


def _longest(df: DataFrame, keys: list[str]) -> DataFrame:
    # The longest gap per key; a tie goes to the higher partition, as the checker's max over
    # (gap, partition) tuples.
    w = Window.partitionBy(*keys).orderBy(F.col("gap_s").desc(), F.col("partition").desc())
    return (df.withColumn("_rank", F.row_number().over(w)).where(F.col("_rank") == 1)
            .drop("_rank"))


def partition_availability(ws: DataFrame, gaps: DataFrame) -> DataFrame:
    """Per run and partition: outcome counts by acks, the longest acks=all gap (0 with a
    single acknowledgement, null with none: chaos.checker leaves such a partition out) and
    where it lies."""
    longest = _longest(gaps, ["run", "partition"]).select(
        "run", "partition", F.col("gap_s").alias("longest_gap_s"), "gap_from_s", "gap_to_s")
    acked_all = (ws.where((F.col("outcome") == "ok") & (F.col("acks") == "all"))
                 .select("run", "partition").distinct().withColumn("_acked", F.lit(True)))
    return (ws.groupBy("run", "partition").agg(*_counts())
            .join(longest, ["run", "partition"], "left")
            .join(acked_all, ["run", "partition"], "left")
            .withColumn("longest_gap_s", F.when(F.col("_acked"), F.coalesce(
                "longest_gap_s", F.lit(0.0))))
            .drop("_acked").orderBy("run", "partition"))


def _in_window(start: Column, end: Column) -> Column:
    # Overlap with [from_s, to_s]: a write invoked before a kill and timing out during it
    # belongs to the kill's window; one never completed is in flight until the end.
    return (start <= F.col("to_s")) & (F.coalesce(end, F.lit(float("inf"))) >= F.col("from_s"))


def fault_partition_availability(ws: DataFrame, gaps: DataFrame,
                                 windows: DataFrame) -> DataFrame:
    """Per run, fault window and partition: the writes in flight during the window, by acks
    and outcome, and the longest acks=all gap overlapping it (null: none overlaps)."""
    win = windows.select("run", "fault", "from_s", "to_s")
    counts = (win.join(ws, "run").where(_in_window(F.col("invoke_s"), F.col("complete_s")))
              .groupBy("run", "fault", "partition").agg(*_counts()))
    over = (win.join(gaps, "run").where(_in_window(F.col("gap_from_s"), F.col("gap_to_s")))
            .groupBy("run", "fault", "partition").agg(F.max("gap_s").alias("longest_gap_s")))
    return (counts.join(over, ["run", "fault", "partition"], "full")
            .na.fill(0, COUNT_COLUMNS).orderBy("run", "fault", "partition"))


def fault_availability(per_partition: DataFrame, windows: DataFrame,
                       bounds: DataFrame) -> DataFrame:
    """Per run and fault window: the counts summed over partitions, the longest overlapping
    acks=all gap of any partition (0 and no partition when none overlaps, as in the checker),
    the run's detection bound and whether the gap exceeds it."""
    longest = _longest(per_partition.where(F.col("longest_gap_s").isNotNull())
                       .withColumnRenamed("longest_gap_s", "gap_s"), ["run", "fault"]).select(
        "run", "fault", F.col("gap_s").alias("longest_gap_s"), F.col("partition").alias(
            "gap_partition"))
    sums = per_partition.groupBy("run", "fault").agg(
        *[F.sum(c).cast("long").alias(c) for c in COUNT_COLUMNS])
    return (windows.join(sums, ["run", "fault"], "left")
            .join(longest, ["run", "fault"], "left").join(bounds, "run", "left")
            .na.fill(0, COUNT_COLUMNS).na.fill(0.0, ["longest_gap_s"])
            .withColumn("exceeds", F.col("longest_gap_s") > F.col("bound_s"))
            .orderBy("run", "fault"))


def compute(history: DataFrame, bounds: DataFrame) -> dict[str, DataFrame]:
    """Every chaos table (lazy) from the operations and the runs' detection bounds: pure."""
    ws = writes(history).cache()
    gaps = ack_gaps(ws).cache()
    windows = fault_windows(history).cache()
    per_fault_partition = fault_partition_availability(ws, gaps, windows).cache()
    return {
        "chaos_faults": fault_availability(per_fault_partition, windows, bounds),
        "chaos_partitions": partition_availability(ws, gaps),
        "chaos_fault_partitions": per_fault_partition,
    }


# ---------------------------------------------------------------------------- output

def _gap(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _outcomes(r: dict, acks: str) -> str:
    return "/".join(str(r[f"acks_{acks}_{o}"]) for o in OUTCOMES)


def format_tables(data: dict) -> list[str]:
    """The lines ``replog analyze`` prints: per run, its fault windows and its partitions."""
    runs = sorted({r["run"] for r in data["chaos_partitions"]["rows"]}
                  | {r["run"] for r in data["chaos_faults"]["rows"]})
    lines = []
    for run in runs:
        lines.append(f"Chaos run {run}: write outcomes ok/fail/unknown, longest acks=all "
                     f"write gap (s)")
        lines.append(f"  {'fault':<6} {'nemesis':<12} {'target':<22} {'from_s':>8} "
                     f"{'to_s':>8} {'acks=all':>14} {'acks=1':>14} {'gap_s':>8} "
                     f"{'part':>4} {'bound_s':>7} exceeds")
        for r in (r for r in data["chaos_faults"]["rows"] if r["run"] == run):
            lines.append(
                f"  {r['fault']:<6} {r['nemesis'] or '?':<12} {(r['target'] or '')[:22]:<22} "
                f"{r['from_s']:>8.2f} {r['to_s']:>8.2f} {_outcomes(r, 'all'):>14} "
                f"{_outcomes(r, '1'):>14} {_gap(r['longest_gap_s']):>8} "
                f"{'-' if r['gap_partition'] is None else r['gap_partition']:>4} "
                f"{_gap(r['bound_s']):>7} "
                f"{'-' if r['exceeds'] is None else ('yes' if r['exceeds'] else 'no')}")
        lines.append(f"  {'partition':<10} {'acks=all':>14} {'acks=1':>14} {'gap_s':>8} "
                     f"{'gap from-to (s)':>17}")
        for r in (r for r in data["chaos_partitions"]["rows"] if r["run"] == run):
            span = ("-" if r["gap_from_s"] is None
                    else f"{r['gap_from_s']:.2f}-{r['gap_to_s']:.2f}")
            lines.append(f"  {r['partition']:<10} {_outcomes(r, 'all'):>14} "
                         f"{_outcomes(r, '1'):>14} {_gap(r['longest_gap_s']):>8} {span:>17}")
    return lines

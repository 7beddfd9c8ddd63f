"""The analysis of ``replog lab``: every run of an experiment read into DataFrames, figures per
run, then per arm the median over seeds and a 95% bootstrap interval.

Inputs, per finished run dir (chaos/lab/): ``result.json`` (the checker's verdict figures and
the event-log counts), ``history.jsonl`` (chaos/history.py, read with HISTORY_SCHEMA) and
``states.jsonl`` (the topic's partition states sampled from ZooKeeper: STATES_SCHEMA).

Figures per run (``run_table``):

- ``acked_lost``: acks=all writes not read back at their acknowledged offset (the checker's
  ``acked-write-lost``); ``clean_lost``: the same, in a run without any unclean election or
  recovery that discarded offsets - a clean election must lose nothing, so any other value
  than 0 is a bug;
- ``longest_unavailable_s``: the longest gap between two acknowledged acks=all writes of one
  partition (chaos.checker's ``max_unavailable_s``); ``unavailable_total_s``: those gaps longer
  than ``GAP_S`` summed over partitions;
- ``p99_send_ms``: acks=all send latency (acknowledged ones), p99, from the first fault's start
  to the last fault's end;
- ``leaderless_s`` / ``urp_s``: partition-seconds without a leader / with an ISR smaller than
  the partition's replication factor (``_rf``: its assigned replicas less those a
  reassignment is adding; the largest ISR of the run where the assignment was not sampled),
  each sampled state holding until the next sample, between the workload's start and the
  heal;
- ``isr_shrinks``: replicas removed from an ISR (one per replica and change) in that span;
- ``time_to_full_s``: from the last fault's end until every partition's ISR is full again;
- ``unclean_elections``, ``offsets_truncated`` (from the event logs);
- in a run with a reassignment (``move_figures``): ``move_s``, ``caught_up_s``,
  ``copy_mb_s``, ``throttle_ratio``, ``p99_move_ms`` and ``p99_before_move_ms``;
- ``wall_s``: the run's wall time, what a full lab costs per arm.

Per arm (``summarize``): runs, sums of the losses, and for each figure in METRICS the median
over runs and, with at least MIN_RUNS_FOR_CI runs, a 95% percentile-bootstrap interval of the
median (BOOTSTRAP_RESAMPLES resamples drawn by a hash of (seed, arm, figure, resample, draw):
the same inputs give the same interval on any machine and any partitioning).

Every function below is a pure transform of DataFrames; ``analyze`` reads and writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from analytics import chaos_history

GAP_S = 1.0
MIN_RUNS_FOR_CI = 5
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 966

STATES_SCHEMA = StructType([
    StructField("run", StringType()),
    StructField("wall", DoubleType()),
    StructField("partition", LongType()),
    StructField("leader", LongType()),
    StructField("isr", ArrayType(LongType())),
    StructField("elr", ArrayType(LongType())),
    # The topic znode's assignment and the replicas a reassignment is adding (runs before
    # these were sampled have neither: the largest ISR of the run stands for the RF then)
    StructField("replicas", ArrayType(LongType())),
    StructField("adding", ArrayType(LongType())),
])
RESULT_SCHEMA = StructType([
    StructField("experiment", StringType()),
    StructField("arm", StringType()),
    StructField("seed", LongType()),
    StructField("run", StringType()),
    StructField("valid", BooleanType()),
    StructField("acked_lost", LongType()),
    StructField("acked_all", LongType()),
    StructField("unclean_elections", LongType()),
    StructField("recovery_offsets_discarded", LongType()),
    StructField("offsets_truncated", LongType()),
    StructField("wall_s", DoubleType()),
])
# Figure -> what it is, in report order: a median (and interval) per arm each.
METRICS = {
    "acked_lost": "acknowledged acks=all records lost",
    "longest_unavailable_s": "longest acks=all write gap of a partition (s)",
    "unavailable_total_s": f"acks=all write gaps longer than {GAP_S:g} s, summed (s)",
    "leaderless_s": "partition-seconds without a leader",
    "urp_s": "under-replicated partition-seconds",
    "isr_shrinks": "replicas removed from an ISR",
    "time_to_full_s": "last fault's end to every ISR full (s)",
    "p99_send_ms": "acks=all send latency p99 during the faults (ms)",
    "offsets_truncated": "offsets truncated by followers",
    "move_s": "reassignment accepted to complete (s)",
    "caught_up_s": "reassignment accepted to every new replica in its ISR (s)",
    "copy_s": "reassignment accepted to 95% of its bytes on the new broker (s)",
    "copy_mb_s": "those bytes over that time: the copy's rate (MB/s)",
    "throttle_ratio": "that rate over the throttle (<= 1: the throttle held)",
    "p99_move_ms": "acks=all send latency p99 during the move (ms)",
    "p99_before_move_ms": "the same before the move, for reference (ms)",
    "wall_s": "the run's wall time, cluster start to stop (s)",
}
SUMMARY_KEYS = ("runs", "acked_lost", "clean_lost", "runs_with_loss", "unclean_elections")


class LabAnalysisError(Exception):
    pass


# ---------------------------------------------------------------------------- transforms

def _span(history: DataFrame) -> DataFrame:
    """Per run: the workload's start and the heal (the last op when it never healed), as Unix
    time and as history time."""
    healed = (F.col("process") == "nemesis") & (F.col("f") == "healed")
    return (history.groupBy("run")
            .agg(F.min_by("wall", "index").alias("from_wall"),
                 F.min_by("time", "index").alias("from_time"),
                 F.max(F.when(healed, F.col("wall"))).alias("healed_wall"),
                 F.max("wall").alias("last_wall"))
            .select("run", "from_wall", "from_time",
                    F.coalesce("healed_wall", "last_wall").alias("to_wall")))


def _rf() -> Column:
    """A partition's replication factor in a sampled state: Kafka's (ReplicaManager's
    under-replicated check) - the assigned replicas less those a reassignment is adding, so a
    partition is not under-replicated merely because a new replica is catching up - and, for
    states sampled without the assignment, the largest ISR of the partition in the run."""
    largest = F.max(F.size("isr")).over(Window.partitionBy("run", "partition"))
    assigned = F.size("replicas") - F.size(F.coalesce("adding", F.array().cast("array<long>")))
    return F.when(F.col("replicas").isNotNull(), assigned).otherwise(largest)


def write_figures(history: DataFrame) -> DataFrame:
    """Per run: longest_unavailable_s, unavailable_total_s, p99_send_ms (chaos_history's
    pairing of sends and its gaps)."""
    ws = chaos_history.writes(history)
    gaps = chaos_history.ack_gaps(ws).groupBy("run").agg(
        F.max("gap_s").alias("longest_unavailable_s"),
        F.sum(F.when(F.col("gap_s") > GAP_S, F.col("gap_s")).otherwise(0.0))
        .alias("unavailable_total_s"))
    faults = chaos_history.fault_windows(history).groupBy("run").agg(
        F.min("from_s").alias("faults_from_s"), F.max("to_s").alias("faults_to_s"))
    latency = (ws.where((F.col("outcome") == "ok") & (F.col("acks") == "all"))
               .join(faults, "run")
               .where((F.col("invoke_s") >= F.col("faults_from_s"))
                      & (F.col("invoke_s") <= F.col("faults_to_s")))
               .groupBy("run")
               .agg(F.percentile((F.col("complete_s") - F.col("invoke_s")) * 1000.0, 0.99)
                    .alias("p99_send_ms")))
    return gaps.join(latency, "run", "left")


def state_figures(states: DataFrame, history: DataFrame) -> DataFrame:
    """Per run: leaderless_s, urp_s, isr_shrinks, time_to_full_s from the sampled states."""
    span = _span(history)
    last_fault = (chaos_history.fault_windows(history).join(span, "run")
                  .groupBy("run").agg(F.max(F.col("to_s") - F.col("from_time") + F.col(
                      "from_wall")).alias("faults_end_wall")))
    w = Window.partitionBy("run", "partition").orderBy("wall")
    s = (states.withColumn("next_wall", F.lead("wall").over(w))
         .withColumn("prev_isr", F.lag("isr").over(w)).withColumn("rf", _rf())
         .join(span, "run"))
    held = F.greatest(F.lit(0.0), F.least("next_wall", "to_wall")
                      - F.greatest("wall", "from_wall"))
    inside = (F.col("wall") >= F.col("from_wall")) & (F.col("wall") <= F.col("to_wall"))
    removed = F.when(F.col("prev_isr").isNotNull() & inside,
                     F.size(F.array_except("prev_isr", "isr"))).otherwise(0)
    figures = s.groupBy("run").agg(
        F.sum(F.when(F.col("leader") < 0, held).otherwise(0.0)).alias("leaderless_s"),
        F.sum(F.when(F.size("isr") < F.col("rf"), held).otherwise(0.0)).alias("urp_s"),
        F.sum(removed).cast("long").alias("isr_shrinks"))
    # One sampling round shares its wall time: a round is full when all its partitions are.
    rounds = (s.groupBy("run", "wall")
              .agg(F.min(F.when(F.size("isr") >= F.col("rf"), 1).otherwise(0)).alias("full")))
    full = (rounds.join(last_fault, "run")
            .where(F.col("wall") >= F.col("faults_end_wall"))
            .withColumn("not_full_after", F.max(F.when(F.col("full") == 0, F.col("wall")))
                        .over(Window.partitionBy("run")))
            .where((F.col("full") == 1) & (F.col("not_full_after").isNull()
                                          | (F.col("wall") > F.col("not_full_after"))))
            .groupBy("run").agg((F.min("wall") - F.first("faults_end_wall"))
                                .alias("time_to_full_s")))
    return figures.join(full, "run", "left")


MOVE_NEMESIS = "lab-reassign"


def move_figures(history: DataFrame) -> DataFrame:
    """Per run with a reassignment (the ``lab-reassign`` nemesis, chaos/lab/nemeses.py): what it
    measured - move_s, caught_up_s, copy_mb_s (95% of the bytes broker 4 received over the
    time they took), that over the arm's throttle as throttle_ratio (null unthrottled) - and
    p99_move_ms, the acks=all send latency p99 of acknowledged sends invoked between the
    request (the nemesis's invoke) and the move's completion (invoke + move_s), beside
    p99_before_move_ms, the same of those invoked before the request."""
    mine = (history.where((F.col("process") == "nemesis") & (F.col("f") == "start")
                          & (F.col("value.fault.nemesis") == MOVE_NEMESIS)))
    res = F.col("value.result")
    done = (mine.where(F.col("type") == "ok").groupBy("run")
            .agg(F.max_by(res, "index").alias("result"))
            .select("run", *[F.get_json_object("result", f"$.{k}").cast("double").alias(k)
                             for k in ("move_s", "caught_up_s", "copy_s", "copy_bytes",
                                       "throttle")]))
    asked = (mine.where(F.col("type") == "invoke").groupBy("run")
             .agg(F.min("time").alias("move_from_s")))
    moves = (done.join(asked, "run", "left")
             .withColumn("copy_mb_s", F.col("copy_bytes") / F.col("copy_s") / 1e6)
             .withColumn("throttle_ratio", F.col("copy_mb_s") * 1e6 / F.col("throttle")))
    acked = (chaos_history.writes(history)
             .where((F.col("outcome") == "ok") & (F.col("acks") == "all"))
             .join(moves.select("run", "move_from_s", "move_s"), "run"))
    during = (F.col("invoke_s") >= F.col("move_from_s")) & \
        (F.col("invoke_s") <= F.col("move_from_s") + F.col("move_s"))
    ms = (F.col("complete_s") - F.col("invoke_s")) * 1000.0
    p99 = acked.groupBy("run").agg(
        F.percentile(F.when(during, ms), 0.99).alias("p99_move_ms"),
        F.percentile(F.when(F.col("invoke_s") < F.col("move_from_s"), ms), 0.99)
        .alias("p99_before_move_ms"))
    return (moves.join(p99, "run", "left")
            .select("run", "move_s", "caught_up_s", "copy_s", "copy_mb_s", "throttle_ratio",
                    "p99_move_ms", "p99_before_move_ms"))


def run_table(results: DataFrame, writes: DataFrame, states: DataFrame,
              moves: DataFrame | None = None) -> DataFrame:
    """One row per run: its result joined with the figures; clean_lost as defined above."""
    clean = (F.col("unclean_elections") == 0) & (F.col("recovery_offsets_discarded") == 0)
    if moves is not None:
        writes = writes.join(moves, "run", "left")
    runs = (results.join(writes, "run", "left").join(states, "run", "left")
            .withColumn("clean_lost", F.when(clean, F.col("acked_lost")).otherwise(F.lit(0))
                        .cast("long")))
    # every figure a column, null where the run has none (no move without ``moves``)
    for m in METRICS:
        if m not in runs.columns:
            runs = runs.withColumn(m, F.lit(None).cast("double"))
    return runs.orderBy("experiment", "arm", "seed")


def median_ci(runs: DataFrame, metrics: list[str], keys: tuple[str, ...] = ("experiment",
                                                                             "arm"),
              resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
              min_runs: int = MIN_RUNS_FOR_CI) -> DataFrame:
    """Long format: keys, metric, n, median, ci_low, ci_high (null below ``min_runs`` runs).

    The bootstrap: ``resamples`` resamples of each group's n values, drawn with replacement
    (draw k of resample b takes value number pmod(xxhash64(seed, keys, metric, b, k), n));
    the interval is the 2.5th and 97.5th percentiles of the resamples' medians."""
    pairs = F.array(*[F.struct(F.lit(m).alias("metric"), F.col(m).cast("double").alias("v"))
                      for m in metrics])
    long = (runs.select(*keys, "seed", F.explode(pairs).alias("x"))
            .select(*keys, "seed", "x.metric", "x.v").where(F.col("v").isNotNull()))
    group = [*keys, "metric"]
    numbered = (long.withColumn("i", F.row_number().over(
        Window.partitionBy(*group).orderBy("seed")) - 1)
        .withColumn("n", F.count("*").over(Window.partitionBy(*group))))
    medians = numbered.groupBy(*group).agg(F.count("*").alias("n"),
                                           F.median("v").alias("median"))
    draws = (numbered.select(*group, "n").distinct().where(F.col("n") >= min_runs)
             .crossJoin(runs.sparkSession.range(resamples).withColumnRenamed("id", "b"))
             .withColumn("k", F.explode(F.sequence(F.lit(0), F.col("n") - 1)))
             .withColumn("i", F.pmod(F.xxhash64(F.lit(seed), *keys, "metric", "b", "k"),
                                     F.col("n")).cast("int")))
    boot = (draws.join(numbered.select(*group, "i", "v"), [*group, "i"])
            .groupBy(*group, "b").agg(F.median("v").alias("m")))
    ci = boot.groupBy(*group).agg(F.percentile("m", 0.025).alias("ci_low"),
                                  F.percentile("m", 0.975).alias("ci_high"))
    return medians.join(ci, group, "left").orderBy(*group)


def summarize(runs: DataFrame, intervals: DataFrame) -> DataFrame:
    """One row per (experiment, arm): SUMMARY_KEYS, then ``<metric>_median``,
    ``<metric>_ci_low`` and ``<metric>_ci_high`` for each metric."""
    counts = runs.groupBy("experiment", "arm").agg(
        F.count("*").alias("runs"), F.sum("acked_lost").cast("long").alias("acked_lost"),
        F.sum("clean_lost").cast("long").alias("clean_lost"),
        F.sum(F.when(F.col("acked_lost") > 0, 1).otherwise(0)).cast("long")
        .alias("runs_with_loss"),
        F.sum("unclean_elections").cast("long").alias("unclean_elections"))
    wide = (intervals.groupBy("experiment", "arm").pivot("metric", list(METRICS))
            .agg(F.first("median").alias("median"), F.first("ci_low").alias("ci_low"),
                 F.first("ci_high").alias("ci_high")))
    return counts.join(wide, ["experiment", "arm"], "left")


def timelines(states: DataFrame, history: DataFrame) -> DataFrame:
    """Per run and sampling round: seconds since the workload's start (history time), the
    number of leaderless and of under-replicated partitions."""
    span = _span(history)
    return (states.withColumn("rf", _rf()).join(span, "run")
            .groupBy("run", "wall", "from_wall", "from_time")
            .agg(F.sum(F.when(F.col("leader") < 0, 1).otherwise(0)).alias("leaderless"),
                 F.sum(F.when(F.size("isr") < F.col("rf"), 1).otherwise(0)).alias("urp"))
            .select("run", (F.col("wall") - F.col("from_wall") + F.col("from_time"))
                    .alias("t_s"), "leaderless", "urp")
            .orderBy("run", "t_s"))


def acked_rate(history: DataFrame) -> DataFrame:
    """Per run and second of history time: acknowledged acks=all writes."""
    ws = chaos_history.writes(history)
    return (ws.where((F.col("outcome") == "ok") & (F.col("acks") == "all"))
            .groupBy("run", F.floor("complete_s").cast("long").alias("second"))
            .agg(F.count("*").alias("acked")).orderBy("run", "second"))


# ---------------------------------------------------------------------------- read / write

def _run_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in (out / "runs").glob("*/seed-*/result.json"))


def read_inputs(spark, out: Path) -> tuple[DataFrame, DataFrame, DataFrame]:
    dirs = _run_dirs(out)
    if not dirs:
        raise LabAnalysisError(f"{out} holds no finished run (runs/<arm>/seed-<n>/result.json)")
    results = [json.loads((d / "result.json").read_text()) for d in dirs]
    names = [f.name for f in RESULT_SCHEMA.fields]
    res = spark.createDataFrame([tuple(r.get(n) for n in names) for r in results],
                                RESULT_SCHEMA)
    history, _malformed = chaos_history.read_histories(
        spark, [(r["run"], d / "history.jsonl", None) for r, d in zip(results, dirs)])
    states = spark.read.schema(STATES_SCHEMA).json([str(d / "states.jsonl") for d in dirs
                                                    if (d / "states.jsonl").is_file()])
    return res, history, states


def compute(results: DataFrame, history: DataFrame, states: DataFrame) -> dict[str, DataFrame]:
    history = history.cache()
    runs = run_table(results, write_figures(history), state_figures(states, history),
                     move_figures(history)).cache()
    intervals = median_ci(runs, list(METRICS)).cache()
    return {"runs": runs, "intervals": intervals, "summary": summarize(runs, intervals),
            "timelines": timelines(states, history), "acked_rate": acked_rate(history),
            "faults": chaos_history.fault_windows(history).orderBy("run", "fault")}


def _plain(v):
    return round(v, 4) if isinstance(v, float) else v


def format_table(summary: list[dict]) -> list[str]:
    cols = [("arm", "arm", 20, None), ("runs", "runs", 4, None),
            ("acked_lost", "acked_lost", 10, None), ("clean_lost", "clean_lost", 10, None),
            ("runs_with_loss", "lossy_runs", 10, None),
            ("longest_unavailable_s_median", "longest_unavail_s", 17, ".1f"),
            ("leaderless_s_median", "leaderless_s", 12, ".1f"),
            ("urp_s_median", "urp_s", 8, ".1f"), ("isr_shrinks_median", "isr_shrinks", 11, ".1f"),
            ("unclean_elections", "unclean_el", 10, None),
            ("move_s_median", "move_s", 7, ".1f"), ("caught_up_s_median", "caught_up_s", 11, ".1f"),
            ("throttle_ratio_median", "vs_throttle", 11, ".2f"),
            ("p99_move_ms_median", "p99_move_ms", 11, ".0f"),
            ("p99_before_move_ms_median", "p99_before", 10, ".0f")]
    # a figure no arm has (the move's, in an experiment without a reassignment) is left out
    cols = [c for c in cols if c[0] in SUMMARY_KEYS or c[0] == "arm"
            or any(r.get(c[0]) is not None for r in summary)]
    # the arm column as wide as the longest arm (throttle-high-failover)
    cols[0] = ("arm", "arm", max([20, *(len(str(r.get("arm"))) for r in summary)]), None)
    head = " ".join(f"{h:>{w}}" if i else f"{h:<{w}}" for i, (_, h, w, _) in enumerate(cols))
    lines = [head]
    for r in summary:
        cells = []
        for i, (k, _, w, fmt) in enumerate(cols):
            v = r.get(k)
            text = "-" if v is None else (format(v, fmt) if fmt else str(v))
            cells.append(f"{text:>{w}}" if i else f"{text:<{w}}")
        lines.append(" ".join(cells))
    return lines


def analyze(out: str | os.PathLike[str], master: str | None = None) -> dict:
    """Reads every finished run of ``out``, writes summary.json, tables/ (CSV and Parquet) and
    report.html; returns the summary."""
    from analytics.job import write_csv
    from analytics.spark import session
    out = Path(out)
    lab = json.loads((out / "lab.json").read_text()) if (out / "lab.json").is_file() else {}
    spark = session(master or "local[*]", app="replog-lab", shuffle_partitions=2)
    res, history, states = read_inputs(spark, out)
    frames = compute(res, history, states)
    tables = out / "tables"
    tables.mkdir(exist_ok=True)
    data: dict[str, list[dict]] = {}
    for name, df in frames.items():
        rows = [{k: _plain(v) for k, v in r.asDict().items()} for r in df.collect()]
        data[name] = rows
        write_csv(tables / f"{name}.csv", df.columns, [[r[c] for c in df.columns] for r in rows])
        df.coalesce(1).write.mode("overwrite").parquet(str(tables / f"{name}.parquet"))
    order = {a: i for i, a in enumerate(lab.get("arms", {}))}
    summary_rows = sorted(data["summary"], key=lambda r: order.get(r["arm"], len(order)))
    summary = {
        "experiment": lab.get("experiment"), "claim": lab.get("claim"),
        "scenario": lab.get("scenario"),
        "arms": {r["arm"]: {**{k: r[k] for k in SUMMARY_KEYS},
                            **{k: v for k, v in r.items()
                               if k not in SUMMARY_KEYS and k not in ("experiment", "arm")}}
                 for r in summary_rows},
        "metrics": METRICS, "min_runs_for_ci": MIN_RUNS_FOR_CI,
        "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
        "table": format_table(summary_rows),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    from analytics.lab_report import render
    render(out / "report.html", lab, summary, data)
    return summary

"""The analysis of ``replog analyze`` as pure functions of DataFrames: no reads, no writes, no
session state. ``analytics.job`` reads an export into the frames below and writes what these
return; the unit tests call them on hand-built frames.

Inputs (shapes in ``analytics.schema``): ``events`` (normalized: ``ts``, ``role``, ``node``,
``source`` + event fields), ``scrapes`` and ``samples`` (exporter records). All times are Unix
seconds in event time: an interval between two processes' records (a broker's death seen by
the exporter, a ``become_leader`` on another broker) is the difference of their clocks, which a
local cluster shares; ``skew_bound`` reports how far causally ordered records contradict that.

Definitions (each function says more):

- a *leader loss* is a ``leader_election`` that replaced a leader (``old_leader`` >= 0) for a
  failure reason; it is *served again* at the first ``become_leader`` of that partition with a
  leader epoch at least the election's; failover = served - lost; the window between is the
  partition's leaderless window (open until the end of the data if never served);
- a *recovery* is a replica rejoining the ISR after it was removed: from when it came back
  (restart, resume after SIGSTOP, re-creation) to its ``isr_expand``;
- ISR changes are deduplicated across the controller's ``isr_change`` and the leader's
  ``isr_shrink``/``isr_expand`` by (partition, partition_epoch): one ZooKeeper write, one change.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

# leader_election reason -> failover cause. Planned moves (preferred, reassigned) and first
# elections (new_partition) are not failures and are left out of failover.
FAILOVER_CAUSES = {
    "offline": "broker_down",
    "restarted": "log_dir_offline",   # RestartedPartitionsLeaderSelector, design.md#jbod
    "relinquished": "relinquished",   # slow leader, design.md#kip-501
    "controlled_shutdown": "controlled_shutdown",
}

# How long before an election a broker's death may be and still be its cause: above any
# zookeeper.session.timeout.ms replog runs with (Kafka's default is 18 s).
MAX_DETECTION_S = 60.0

# Broker byte counters (broker/metrics.py), Kafka's split: bytes_in from producers and bytes_out
# to consumers; replication_* between leaders and followers.
COUNTERS = {
    "bytes_in": "kafka_server_brokertopicmetrics_bytesin_total",
    "bytes_out": "kafka_server_brokertopicmetrics_bytesout_total",
    "replication_bytes_in": "kafka_server_brokertopicmetrics_replicationbytesin_total",
    "replication_bytes_out": "kafka_server_brokertopicmetrics_replicationbytesout_total",
}
MAX_LAG = "kafka_server_replicafetchermanager_maxlag"
REASSIGNMENT_BYTES_IN = "kafka_server_brokertopicmetrics_reassignmentbytesin_total"


def _map_column(mapping: dict[str, str], col: str) -> Column:
    expr = None
    for k, v in mapping.items():
        expr = (F.when(F.col(col) == k, F.lit(v)) if expr is None
                else expr.when(F.col(col) == k, F.lit(v)))
    return expr


def _first_by(df: DataFrame, keys: list[str], order: list[Column]) -> DataFrame:
    """One row per ``keys``: the first in ``order``."""
    w = Window.partitionBy(*keys).orderBy(*order)
    return df.withColumn("_rn", F.row_number().over(w)).where("_rn = 1").drop("_rn")


# ---------------------------------------------------------------------------- inputs

def normalize_events(raw: DataFrame) -> DataFrame:
    """Raw event lines (``schema.EVENT_SCHEMA``) -> ``schema.NORMALIZED_EVENT_SCHEMA``.

    Lines without an event name or a parseable timestamp are dropped (a torn last line of a
    killed process is the usual one)."""
    ts = F.unix_micros(F.to_timestamp("timestamp")) / F.lit(1e6)
    node = F.when(F.col("process") == "broker", F.col("broker")) \
        .otherwise(F.col("controller_id"))
    from analytics.schema import NORMALIZED_EVENT_SCHEMA, PARSED_FIELDS
    rest = [f.name for f in NORMALIZED_EVENT_SCHEMA.fields][4:]
    cols = [F.from_json(c, PARSED_FIELDS[c]).alias(c) if c in PARSED_FIELDS else F.col(c)
            for c in rest]
    out = raw.select(ts.cast("double").alias("ts"), F.col("process").alias("role"),
                     node.cast("long").alias("node"),
                     F.concat_ws("-", F.col("process"), node.cast("string")).alias("source"),
                     *cols)
    return out.where(F.col("event").isNotNull() & F.col("ts").isNotNull())


def process_transitions(scrapes: DataFrame) -> DataFrame:
    """A process going down (an ok scrape then a failed one) or coming back (failed then ok),
    from the exporter's scrapes: [process, role, node_id, kind ('down'|'up'), before_ts,
    after_ts, ts, uncertainty_s]. ``ts`` is the midpoint of the two scrapes, so it is within
    ``uncertainty_s`` (half the sampling interval) of the real moment."""
    w = Window.partitionBy("process").orderBy("ts")
    s = scrapes.select("process", "role", "node_id", "ts", "ok") \
        .withColumn("prev_ok", F.lag("ok").over(w)) \
        .withColumn("prev_ts", F.lag("ts").over(w))
    t = s.where(F.col("prev_ok").isNotNull() & (F.col("ok") != F.col("prev_ok")))
    return t.select(
        "process", "role", "node_id",
        F.when(F.col("ok"), F.lit("up")).otherwise(F.lit("down")).alias("kind"),
        F.col("prev_ts").alias("before_ts"), F.col("ts").alias("after_ts"),
        ((F.col("prev_ts") + F.col("ts")) / 2).alias("ts"),
        ((F.col("ts") - F.col("prev_ts")) / 2).alias("uncertainty_s"))


def partitions(events: DataFrame) -> DataFrame:
    """Every partition the events name: [partition]."""
    return events.where(F.col("partition").isNotNull()).select("partition").distinct()


def observed_span(events: DataFrame, scrapes: DataFrame) -> tuple[float | None, float | None]:
    """(first, last) time seen in the events and scrapes (an action: returns numbers)."""
    rows = events.select("ts").unionByName(scrapes.select("ts")) \
        .agg(F.min("ts").alias("a"), F.max("ts").alias("b")).collect()
    return (rows[0]["a"], rows[0]["b"]) if rows else (None, None)


# ---------------------------------------------------------------------------- leadership

def leader_losses(events: DataFrame, transitions: DataFrame, scrapes: DataFrame) -> DataFrame:
    """One row per leader lost to a failure: [partition, cause, old_leader, election_new_leader,
    leader_epoch, election_ts, loss_ts, loss_source, loss_uncertainty_s].

    When the leader was lost: ``broker_down`` — the old leader's process going down as the
    exporter saw it (``scrape``; the latest within MAX_DETECTION_S before the election), else
    the earlier of two times that the death is no later than: the exporter's first scrape of
    the process, when that one already failed and none answered until the election
    (``first_scrape``: the exporter started, or first listed the process, after it died) and
    the controller's ``broker_failed`` (``detection``: later than the death by up to the
    ZooKeeper session timeout); ``log_dir_offline`` — the old leader's ``log_dir_offline``
    listing the partition; otherwise (relinquish, controlled shutdown: the old leader serves
    until told) the election itself. Only ``scrape`` brackets the death (within
    ``loss_uncertainty_s``); the others are bounds it can be earlier than (uncertainty 0)."""
    el = events.where((F.col("event") == "leader_election") & (F.col("old_leader") >= 0)
                      & F.col("reason").isin(*FAILOVER_CAUSES)) \
        .select("partition", _map_column(FAILOVER_CAUSES, "reason").alias("cause"),
                "old_leader", F.col("new_leader").alias("election_new_leader"),
                "leader_epoch", F.col("ts").alias("election_ts"))
    keys = ["partition", "leader_epoch", "election_ts"]

    down = transitions.where((F.col("kind") == "down") & (F.col("role") == "broker")) \
        .select(F.col("node_id").alias("d_broker"), F.col("ts").alias("d_ts"),
                F.col("before_ts").alias("d_before"), F.col("uncertainty_s").alias("d_unc"))
    j = el.join(down, (F.col("cause") == "broker_down") & (F.col("d_broker") == F.col("old_leader"))
                & (F.col("d_before") <= F.col("election_ts"))
                & (F.col("d_before") >= F.col("election_ts") - MAX_DETECTION_S), "left")
    j = _first_by(j, keys, [F.col("d_ts").desc_nulls_last()]).drop("d_broker", "d_before")

    failed = events.where(F.col("event") == "broker_failed") \
        .select(F.col("broker").alias("f_broker"), F.col("ts").alias("f_ts"))
    j = j.join(failed, (F.col("cause") == "broker_down") & (F.col("f_broker") == F.col("old_leader"))  # noqa: E501
               & (F.col("f_ts") <= F.col("election_ts"))
               & (F.col("f_ts") >= F.col("election_ts") - MAX_DETECTION_S), "left")
    j = _first_by(j, keys, [F.col("f_ts").desc_nulls_last()]).drop("f_broker")

    ldo = events.where((F.col("event") == "log_dir_offline") & (F.col("role") == "broker")) \
        .select(F.col("node").alias("l_broker"), F.col("ts").alias("l_ts"),
                F.explode_outer("partitions").alias("l_partition"))
    j = j.join(ldo, (F.col("cause") == "log_dir_offline") & (F.col("l_broker") == F.col("old_leader"))  # noqa: E501
               & (F.col("l_partition") == F.col("partition"))
               & (F.col("l_ts") <= F.col("election_ts")), "left")
    j = _first_by(j, keys, [F.col("l_ts").desc_nulls_last()]).drop("l_broker", "l_partition")

    # A process the exporter never saw answer: its first scrape failed and no later one
    # answered before the election. Without this, an exporter started after a kill would leave
    # only broker_failed, up to a session timeout after a death the scrapes already showed.
    w = Window.partitionBy("process").orderBy("ts")
    first = scrapes.where(F.col("role") == "broker") \
        .withColumn("_rn", F.row_number().over(w)) \
        .withColumn("x_next_ok", F.min(F.when(F.col("ok"), F.col("ts"))).over(
            w.rowsBetween(Window.currentRow, Window.unboundedFollowing))) \
        .where((F.col("_rn") == 1) & ~F.col("ok")) \
        .select(F.col("node_id").alias("x_broker"), F.col("ts").alias("x_ts"), "x_next_ok")
    j = j.join(first, (F.col("cause") == "broker_down") & (F.col("x_broker") == F.col("old_leader"))
               & (F.col("x_ts") <= F.col("election_ts"))
               & (F.col("x_ts") >= F.col("election_ts") - MAX_DETECTION_S)
               & (F.col("x_next_ok").isNull() | (F.col("x_next_ok") > F.col("election_ts"))),
               "left")
    j = _first_by(j, keys, [F.col("x_ts").asc_nulls_last()]).drop("x_broker", "x_next_ok")
    # Both are times the death is no later than: the earlier is the closer one.
    first_scrape = F.col("x_ts").isNotNull() & (F.col("f_ts").isNull()
                                                | (F.col("x_ts") <= F.col("f_ts")))

    return j.select(
        "partition", "cause", "old_leader", "election_new_leader", "leader_epoch", "election_ts",
        F.coalesce("d_ts", F.when(first_scrape, F.col("x_ts")), "f_ts", "l_ts",
                   "election_ts").alias("loss_ts"),
        F.when(F.col("d_ts").isNotNull(), F.lit("scrape"))
         .when(first_scrape, F.lit("first_scrape"))
         .when(F.col("f_ts").isNotNull(), F.lit("detection"))
         .when(F.col("l_ts").isNotNull(), F.lit("log_dir_offline"))
         .otherwise(F.lit("election")).alias("loss_source"),
        F.coalesce("d_unc", F.lit(0.0)).alias("loss_uncertainty_s"))


def failovers(losses: DataFrame, events: DataFrame) -> DataFrame:
    """Each leader loss with when a new leader served: [partition, cause, old_leader,
    new_leader, leader_epoch, loss_ts, loss_source, loss_uncertainty_s, serving_ts,
    failover_s]. ``serving_ts`` is the first ``become_leader`` of the partition at the
    election's leader epoch or later (null: never served); failover_s is never negative (a
    skewed clock is reported by ``skew_bound``, not folded in here)."""
    bl = events.where(F.col("event") == "become_leader") \
        .select(F.col("partition").alias("b_partition"), F.col("leader_epoch").alias("b_epoch"),
                F.col("ts").alias("serving_ts"), F.col("node").alias("new_leader"))
    j = losses.join(bl, (F.col("b_partition") == F.col("partition"))
                    & (F.col("b_epoch") >= F.col("leader_epoch")), "left")
    j = _first_by(j, ["partition", "leader_epoch", "election_ts"],
                  [F.col("serving_ts").asc_nulls_last()])
    return j.select(
        "partition", "cause", "old_leader",
        F.coalesce("new_leader", "election_new_leader").alias("new_leader"),
        F.coalesce("b_epoch", "leader_epoch").alias("leader_epoch"),
        "loss_ts", "loss_source", "loss_uncertainty_s", "serving_ts",
        # greatest() skips nulls: an unserved loss must stay null, not become 0.
        F.when(F.col("serving_ts").isNotNull(),
               F.round(F.greatest(F.col("serving_ts") - F.col("loss_ts"), F.lit(0.0)), 6))
         .alias("failover_s")).orderBy("loss_ts", "partition")


def failover_summary(failover: DataFrame) -> DataFrame:
    """Failover distribution by cause: [cause, count, unserved, p50_s, p90_s, p99_s, max_s]
    (exact percentiles, linear interpolation; never-served losses counted apart)."""
    served = F.col("failover_s")
    return failover.groupBy("cause").agg(
        F.count(F.lit(1)).alias("count"),
        F.sum(F.when(served.isNull(), 1).otherwise(0)).cast("long").alias("unserved"),
        F.round(F.percentile(served, F.lit(0.5)), 6).alias("p50_s"),
        F.round(F.percentile(served, F.lit(0.9)), 6).alias("p90_s"),
        F.round(F.percentile(served, F.lit(0.99)), 6).alias("p99_s"),
        F.round(F.max(served), 6).alias("max_s")).orderBy("cause")


def availability(failover: DataFrame, all_partitions: DataFrame, span_start: float,
                 span_end: float) -> DataFrame:
    """Leaderless windows per partition: [partition, windows, open_windows,
    total_leaderless_s, longest_leaderless_s, availability_pct]. A window runs from a leader
    loss to its new leader serving, or to ``span_end`` when none ever did. Partitions that
    never lost a leader are listed with zeros."""
    end = F.coalesce(F.col("serving_ts"), F.lit(float(span_end)))
    w = failover.select("partition", (F.greatest(end - F.col("loss_ts"), F.lit(0.0)))
                        .alias("d"), F.col("serving_ts").isNull().alias("open"))
    agg = w.groupBy("partition").agg(
        F.count(F.lit(1)).alias("windows"),
        F.sum(F.col("open").cast("long")).alias("open_windows"),
        F.round(F.sum("d"), 6).alias("total_leaderless_s"),
        F.round(F.max("d"), 6).alias("longest_leaderless_s"))
    span = max(float(span_end) - float(span_start), 1e-9)
    out = all_partitions.unionByName(failover.select("partition")).distinct() \
        .join(agg, "partition", "left") \
        .fillna({"windows": 0, "open_windows": 0, "total_leaderless_s": 0.0,
                 "longest_leaderless_s": 0.0})
    return out.withColumn(
        "availability_pct",
        F.round(F.greatest(F.lit(0.0), 100.0 * (1 - F.col("total_leaderless_s") / F.lit(span))),
                4)).orderBy("partition")


def skew_bound(events: DataFrame) -> DataFrame:
    """How far clocks contradict causality: the largest amount by which a broker's
    ``become_leader`` precedes the controller's ``leader_election`` that made it leader (same
    partition, leader epoch and broker). One row [skew_bound_s, pairs]; 0 when consistent."""
    el = events.where(F.col("event") == "leader_election") \
        .select("partition", "leader_epoch", F.col("new_leader").alias("node"),
                F.col("ts").alias("e_ts"))
    bl = events.where(F.col("event") == "become_leader") \
        .select("partition", "leader_epoch", "node", F.col("ts").alias("b_ts"))
    j = el.join(bl, ["partition", "leader_epoch", "node"])
    return j.agg(F.round(F.coalesce(F.max(F.greatest(F.col("e_ts") - F.col("b_ts"),
                                                     F.lit(0.0))), F.lit(0.0)), 6)
                 .alias("skew_bound_s"), F.count(F.lit(1)).alias("pairs"))


# ---------------------------------------------------------------------------- ISR

def isr_changes(events: DataFrame) -> DataFrame:
    """ISR changes, one per (partition, partition_epoch) at the earliest record of it:
    [partition, ts, partition_epoch, old_isr, new_isr, kind ('shrink'|'expand'|'change')]."""
    ctrl = events.where(F.col("event") == "isr_change") \
        .select("partition", "ts", "partition_epoch", "old_isr", "new_isr")
    brk = events.where(F.col("event").isin("isr_shrink", "isr_expand")) \
        .select("partition", "ts", "partition_epoch", "old_isr", F.col("isr").alias("new_isr"))
    u = _first_by(ctrl.unionByName(brk), ["partition", "partition_epoch"], [F.col("ts")])
    n_old, n_new = F.size("old_isr"), F.size("new_isr")
    return u.withColumn("kind", F.when(n_new < n_old, "shrink").when(n_new > n_old, "expand")
                        .otherwise("change"))


def isr_replica_changes(changes: DataFrame) -> DataFrame:
    """Per replica: [partition, ts, broker, change ('shrink'|'expand'), partition_epoch]."""
    out = changes.select("partition", "ts", "partition_epoch",
                         F.explode(F.array_except("old_isr", "new_isr")).alias("broker"),
                         F.lit("shrink").alias("change"))
    inn = changes.select("partition", "ts", "partition_epoch",
                         F.explode(F.array_except("new_isr", "old_isr")).alias("broker"),
                         F.lit("expand").alias("change"))
    return out.unionByName(inn).select("partition", "ts", "broker", "change", "partition_epoch")


def isr_churn_by_partition(changes: DataFrame) -> DataFrame:
    """[partition, shrinks, expands] from ``isr_changes``."""
    return changes.groupBy("partition").agg(
        F.sum((F.col("kind") == "shrink").cast("long")).alias("shrinks"),
        F.sum((F.col("kind") == "expand").cast("long")).alias("expands")).orderBy("partition")


def isr_churn_by_broker(replica_changes: DataFrame) -> DataFrame:
    """[broker, shrinks, expands]: how often each broker's replicas left and rejoined ISRs."""
    return replica_changes.groupBy("broker").agg(
        F.sum((F.col("change") == "shrink").cast("long")).alias("shrinks"),
        F.sum((F.col("change") == "expand").cast("long")).alias("expands")).orderBy("broker")


def flapping_partitions(changes: DataFrame, window_s: float = 60.0,
                        min_changes: int = 6) -> DataFrame:
    """Partitions whose ISR changed at least ``min_changes`` times within ``window_s`` (three
    shrink/expand cycles a minute by default, what Kafka operators call ISR flapping; two
    could be two unrelated faults):
    [partition, changes, max_changes_in_window, first_flap_ts]."""
    # rangeBetween takes whole numbers: order by milliseconds.
    w = Window.partitionBy("partition").orderBy("ms").rangeBetween(-round(window_s * 1000), 0)
    c = changes.select("partition", "ts", F.round(F.col("ts") * 1000).cast("long").alias("ms")) \
        .withColumn("n", F.count(F.lit(1)).over(w))
    per = c.groupBy("partition").agg(
        F.count(F.lit(1)).alias("changes"), F.max("n").alias("max_changes_in_window"),
        F.min(F.when(F.col("n") >= min_changes, F.col("ts"))).alias("first_flap_ts"))
    return per.where(F.col("max_changes_in_window") >= min_changes).orderBy("partition")


def replica_recoveries(replica_changes: DataFrame, events: DataFrame,
                       transitions: DataFrame) -> DataFrame:
    """A replica rejoining the ISR after it had left it: [partition, broker, cause, out_ts,
    back_ts, rejoin_ts, recovery_s, out_of_isr_s].

    ``back_ts``: the latest moment in [out_ts, rejoin_ts] its replica came back — re-created
    (``replica_recreated``, cause ``recreated``), its broker restarted (``broker_started``,
    ``restart``) or its process answered again after not answering (a SIGSTOP resumed,
    ``resumed``), in that order of precedence. None of these: the replica only lagged
    (``caught_up``), and recovery_s is the time out of the ISR.

    A resume is known only to lie between the last scrape that failed and the first that
    answered; it cannot be after the rejoin it made possible, nor before the shrink. So it is
    taken when that interval meets [out_ts, rejoin_ts], at the midpoint of the overlap: a
    follower that caught up within one sampling interval of its SIGCONT (rejoin before the
    transition's midpoint) still counts as resumed."""
    ex = replica_changes.where(F.col("change") == "expand") \
        .select("partition", "broker", F.col("ts").alias("rejoin_ts"))
    sh = replica_changes.where(F.col("change") == "shrink") \
        .select(F.col("partition").alias("s_partition"), F.col("broker").alias("s_broker"),
                F.col("ts").alias("out_ts"))
    j = ex.join(sh, (F.col("s_partition") == F.col("partition"))
                & (F.col("s_broker") == F.col("broker")) & (F.col("out_ts") < F.col("rejoin_ts")),
                "inner")
    keys = ["partition", "broker", "rejoin_ts"]
    j = _first_by(j, keys, [F.col("out_ts").desc()]).drop("s_partition", "s_broker")

    # When it came back: within [k_lo, k_hi] (one moment for an event).
    no_partition = F.lit(None).cast("string").alias("k_partition")
    back = events.where((F.col("event") == "replica_recreated") & (F.col("role") == "broker")) \
        .select(F.col("node").alias("k_broker"), F.col("partition").alias("k_partition"),
                F.col("ts").alias("k_lo"), F.col("ts").alias("k_hi"),
                F.lit("recreated").alias("cause"), F.lit(3).alias("prio")) \
        .unionByName(events.where(F.col("event") == "broker_started")
                     .select(F.col("node").alias("k_broker"), no_partition,
                             F.col("ts").alias("k_lo"), F.col("ts").alias("k_hi"),
                             F.lit("restart").alias("cause"), F.lit(2).alias("prio"))) \
        .unionByName(transitions.where((F.col("kind") == "up") & (F.col("role") == "broker"))
                     .select(F.col("node_id").alias("k_broker"), no_partition,
                             F.col("before_ts").alias("k_lo"), F.col("after_ts").alias("k_hi"),
                             F.lit("resumed").alias("cause"), F.lit(1).alias("prio")))
    j = j.join(back, (F.col("k_broker") == F.col("broker"))
               & (F.col("k_partition").isNull() | (F.col("k_partition") == F.col("partition")))
               & (F.col("k_hi") >= F.col("out_ts")) & (F.col("k_lo") <= F.col("rejoin_ts")),
               "left") \
        .withColumn("back_ts", F.when(F.col("cause").isNotNull(), (
            F.greatest("k_lo", "out_ts") + F.least("k_hi", "rejoin_ts")) / 2))
    j = _first_by(j, keys, [F.col("prio").desc_nulls_last(), F.col("back_ts").desc_nulls_last()])
    return j.select(
        "partition", "broker", F.coalesce("cause", F.lit("caught_up")).alias("cause"),
        "out_ts", "back_ts", "rejoin_ts",
        F.round(F.col("rejoin_ts") - F.coalesce("back_ts", "out_ts"), 6).alias("recovery_s"),
        F.round(F.col("rejoin_ts") - F.col("out_ts"), 6).alias("out_of_isr_s")) \
        .orderBy("rejoin_ts", "partition", "broker")


# ---------------------------------------- design.md#jbod, design.md#reassignment, design.md#kip-966

def unclean_elections(events: DataFrame) -> DataFrame:
    """Leaders elected outside the ISR: [partition, ts, kind, strategy, outcome, old_leader,
    chosen_replica, leader_epoch, candidates, answered, waited_ms, offsets_discarded].

    - kind ``election``: a blind unclean election (a ``leader_election`` with unclean true and
      any reason but ``unclean_recovery``: unclean.leader.election.enable with ELR off).
      Offsets discarded: the followers' truncations at that leader epoch (``truncated``:
      from_offset - to_offset, summed); strategy, outcome, candidates, answered and waited_ms
      null.
    - kind ``recovery``: a KIP-966 unclean recovery (design.md#kip-966), one row per
      ``unclean_recovery_finished`` at its time: strategy, outcome (elected | dropped |
      failed), the replicas asked (candidates), how many answered GetReplicaLogInfo usably
      (answered: error NONE) and waited_ms since the task started. Elected: chosen_replica
      and leader_epoch from the event, old_leader from its ``leader_election`` (reason
      ``unclean_recovery``), offsets_discarded the controller's figure (the best log end offset
      among the answers minus the chosen replica's), else the followers' truncations. Dropped
      or failed: nothing elected, those columns null. A recovery started
      (``unclean_recovery_started``) and not finished by the end of the data is a row at its
      start with outcome ``running``."""
    el = events.where((F.col("event") == "leader_election") & F.col("unclean")
                      & ~F.coalesce(F.col("reason") == "unclean_recovery", F.lit(False))) \
        .select("partition", "ts", F.lit("election").alias("kind"),
                F.lit(None).cast("string").alias("strategy"),
                F.lit(None).cast("string").alias("outcome"), "old_leader",
                F.col("new_leader").alias("chosen_replica"), "leader_epoch",
                F.lit(None).cast("array<bigint>").alias("candidates"),
                F.lit(None).cast("int").alias("answered"),
                F.lit(None).cast("long").alias("waited_ms"),
                F.lit(None).cast("long").alias("given"))
    fin = events.where(F.col("event") == "unclean_recovery_finished")
    elected = F.col("outcome") == "elected"
    rc = fin.select(
        "partition", "ts", F.lit("recovery").alias("kind"), "strategy", "outcome",
        F.when(elected, F.col("leader")).alias("chosen_replica"),
        F.when(elected, F.col("leader_epoch")).alias("leader_epoch"), "candidates",
        F.size(F.filter(F.map_values("answers"), lambda a: a["error"] == "NONE"))
         .alias("answered"),
        "waited_ms", F.when(elected, F.col("offsets_discarded")).alias("given"))
    rel = events.where((F.col("event") == "leader_election")
                       & (F.col("reason") == "unclean_recovery")) \
        .select(F.col("partition").alias("e_partition"), F.col("leader_epoch").alias("e_epoch"),
                "old_leader")
    rc = rc.join(rel, (F.col("e_partition") == F.col("partition"))
                 & (F.col("e_epoch") == F.col("leader_epoch")), "left") \
        .drop("e_partition", "e_epoch")
    st = events.where(F.col("event") == "unclean_recovery_started")
    ended = fin.select(F.col("partition").alias("f_partition"), F.col("ts").alias("f_ts"))
    running = st.join(ended, (F.col("f_partition") == F.col("partition"))
                      & (F.col("f_ts") >= F.col("ts")), "left_anti") \
        .select("partition", "ts", F.lit("recovery").alias("kind"), "strategy",
                F.lit("running").alias("outcome"), F.lit(None).cast("long").alias("old_leader"),
                F.lit(None).cast("long").alias("chosen_replica"),
                F.lit(None).cast("long").alias("leader_epoch"),
                F.lit(None).cast("array<bigint>").alias("candidates"),
                F.lit(None).cast("int").alias("answered"),
                F.lit(None).cast("long").alias("waited_ms"),
                F.lit(None).cast("long").alias("given"))
    tr = events.where(F.col("event") == "truncated") \
        .groupBy(F.col("partition").alias("t_partition"),
                 F.col("leader_epoch").alias("t_epoch")) \
        .agg(F.sum(F.greatest(F.col("from_offset") - F.col("to_offset"), F.lit(0)))
             .alias("truncated"))
    u = el.unionByName(rc).unionByName(running)
    j = u.join(tr, (F.col("t_partition") == F.col("partition"))
               & (F.col("t_epoch") == F.col("leader_epoch")), "left")
    discarded = F.when(F.col("kind") == "election",
                       F.coalesce("truncated", F.lit(0))) \
        .when(F.col("outcome") == "elected", F.coalesce("given", "truncated", F.lit(0)))
    return j.select("partition", "ts", "kind", "strategy", "outcome", "old_leader",
                    "chosen_replica", "leader_epoch", "candidates", "answered", "waited_ms",
                    discarded.cast("long").alias("offsets_discarded")) \
        .orderBy("ts", "partition")


def log_dir_failures(events: DataFrame, replica_changes: DataFrame) -> DataFrame:
    """Per partition of a failed log dir: [broker, log_dir, ts, partition, rereplicated_ts,
    time_to_rereplicate_s] — until that broker's replica rejoined the partition's ISR
    (design.md#jbod re-creates it in a healthy dir); null while it has not."""
    ldo = events.where((F.col("event") == "log_dir_offline") & (F.col("role") == "broker")) \
        .select(F.col("node").alias("broker"), "log_dir", "ts",
                F.explode_outer("partitions").alias("partition"))
    ex = replica_changes.where(F.col("change") == "expand") \
        .select(F.col("partition").alias("x_partition"), F.col("broker").alias("x_broker"),
                F.col("ts").alias("rereplicated_ts"))
    j = ldo.join(ex, (F.col("x_partition") == F.col("partition"))
                 & (F.col("x_broker") == F.col("broker"))
                 & (F.col("rereplicated_ts") > F.col("ts")), "left")
    j = _first_by(j, ["broker", "log_dir", "ts", "partition"],
                  [F.col("rereplicated_ts").asc_nulls_last()])
    return j.select("broker", "log_dir", "ts", "partition", "rereplicated_ts",
                    F.round(F.col("rereplicated_ts") - F.col("ts"), 6)
                    .alias("time_to_rereplicate_s")).orderBy("ts", "broker", "partition")


def reassignments(events: DataFrame, samples: DataFrame) -> DataFrame:
    """One row per partition reassignment (design.md#reassignment): [partition, started_ts,
    completed_ts, duration_s, outcome, original, target, adding, bytes_moved, bytes_shared_with].

    A reassignment runs from the partition's first ``reassignment_started`` (or
    ``reassignment_cancelled``) to its next ``reassignment_completed``; the start records in
    between (a changed target, a new controller resuming the move after a failover) are the
    same reassignment: ``original`` is the first one's, ``target`` the last one's, ``adding``
    the union of theirs. outcome: ``completed``, ``cancelled`` (the last start record was a
    cancel: back to the original replicas), null while in progress (completed_ts null).

    Bytes moved - per partition, derived from per-broker counters: no event carries them, and
    brokers count reassignment traffic per broker, not per partition
    (``kafka_server_brokertopicmetrics_reassignmentbytesin``, Kafka's
    ReassignmentBytesInPerSec: bytes appended by a replica being added). ``bytes_moved`` is the
    increase of that counter on each adding broker over the sampling intervals that overlap
    the reassignment (from the last sample before it started to the first after it completed,
    or the end of the data), summed over its adding brokers; a counter that went down restarted
    with its broker (the new value is the increase). It is exact when no other reassignment
    added a replica to one of those brokers within those intervals (``bytes_shared_with`` 0);
    otherwise the bytes of the shared intervals count for each of the ``bytes_shared_with``
    other reassignments too, and the figure is an upper bound. 0 when it added no replica (a
    reorder or a shrink); null when no sample of the counter covers it (not exported)."""
    st = events.where(F.col("event").isin("reassignment_started", "reassignment_cancelled")) \
        .select("partition", "ts", "event", "original", "target", "adding")
    done = events.where(F.col("event") == "reassignment_completed") \
        .select(F.col("partition").alias("c_partition"), F.col("ts").alias("completed_ts"))
    j = st.join(done, (F.col("c_partition") == F.col("partition"))
                & (F.col("completed_ts") >= F.col("ts")), "left")
    j = _first_by(j, ["partition", "ts", "event"], [F.col("completed_ts").asc_nulls_last()])
    r = j.groupBy("partition", "completed_ts").agg(
        F.min("ts").alias("started_ts"), F.min_by("original", "ts").alias("original"),
        F.max_by("target", "ts").alias("target"), F.max_by("event", "ts").alias("last"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list(
            F.coalesce("adding", F.array().cast("array<bigint>")))))).alias("adding"))
    keys = ["partition", "started_ts"]

    w = Window.partitionBy("process").orderBy("ts")
    inc = samples.where((F.col("metric") == REASSIGNMENT_BYTES_IN) & (F.col("role") == "broker")) \
        .select("process", "node_id", "ts", "value") \
        .withColumn("prev", F.lag("value").over(w)).withColumn("i_from", F.lag("ts").over(w)) \
        .where(F.col("prev").isNotNull()) \
        .select(F.col("node_id").alias("i_broker"), "i_from", F.col("ts").alias("i_to"),
                F.when(F.col("value") >= F.col("prev"), F.col("value") - F.col("prev"))
                 .otherwise(F.col("value")).alias("i_bytes"))
    per_broker = r.select(*keys, "completed_ts", F.explode("adding").alias("broker"))
    x = per_broker.join(inc, (F.col("i_broker") == F.col("broker"))
                        & (F.col("i_to") > F.col("started_ts"))
                        & (F.col("completed_ts").isNull()
                           | (F.col("i_from") < F.col("completed_ts"))), "inner")
    moved = x.groupBy(*keys).agg(F.sum("i_bytes").alias("bytes"))
    other = x.select(F.col("partition").alias("o_partition"),
                     F.col("started_ts").alias("o_started"), F.col("broker").alias("o_broker"),
                     F.col("i_to").alias("o_to"))
    shared = x.join(other, (F.col("o_broker") == F.col("broker")) & (F.col("o_to") == F.col("i_to"))
                    & ((F.col("o_partition") != F.col("partition"))
                       | (F.col("o_started") != F.col("started_ts")))) \
        .groupBy(*keys).agg(F.countDistinct("o_partition", "o_started").alias("shared"))
    out = r.join(moved, keys, "left").join(shared, keys, "left")
    return out.select(
        "partition", "started_ts", "completed_ts",
        F.round(F.col("completed_ts") - F.col("started_ts"), 6).alias("duration_s"),
        F.when(F.col("completed_ts").isNull(), F.lit(None).cast("string"))
         .when(F.col("last") == "reassignment_cancelled", F.lit("cancelled"))
         .otherwise(F.lit("completed")).alias("outcome"),
        "original", "target", "adding",
        F.when(F.size("adding") == 0, F.lit(0)).otherwise(F.col("bytes")).cast("long")
         .alias("bytes_moved"),
        F.coalesce("shared", F.lit(0)).cast("long").alias("bytes_shared_with")) \
        .orderBy("started_ts", "partition")


# ---------------------------------------------------------------------------- metrics

def counter_rates(samples: DataFrame, counters: dict[str, str] | None = None) -> DataFrame:
    """Per-second rates of counters per process, one per sampling interval ending at ``ts``:
    [ts, process, node_id, series, rate, increase]. A counter that went down restarted with
    its process: the new value is the increase."""
    counters = counters or COUNTERS
    names = {v: k for k, v in counters.items()}
    s = samples.where(F.col("metric").isin(*names)) \
        .select("ts", "process", "node_id", _map_column(names, "metric").alias("series"),
                "value")
    w = Window.partitionBy("process", "series").orderBy("ts")
    s = s.withColumn("prev", F.lag("value").over(w)).withColumn("prev_ts", F.lag("ts").over(w))
    delta = F.when(F.col("value") >= F.col("prev"), F.col("value") - F.col("prev")) \
        .otherwise(F.col("value"))
    return s.where(F.col("prev").isNotNull() & (F.col("ts") > F.col("prev_ts"))) \
        .select("ts", "process", "node_id", "series",
                F.round(delta / (F.col("ts") - F.col("prev_ts")), 6).alias("rate"),
                delta.alias("increase")) \
        .orderBy("ts", "process", "series")


def throughput_by_broker(rates: DataFrame) -> DataFrame:
    """[process, series, mean_rate, max_rate, total] per broker and counter series, from
    ``counter_rates``: ``total`` is the counter's increase over every sampled interval."""
    return rates.groupBy("process", "series").agg(
        F.round(F.avg("rate"), 3).alias("mean_rate"), F.round(F.max("rate"), 3).alias("max_rate"),
        F.round(F.sum("increase"), 0).alias("total")).orderBy("process", "series")


def gauge_series(samples: DataFrame, metric: str, labels: dict[str, str] | None = None
                 ) -> DataFrame:
    """One gauge over time per process: [ts, process, node_id, value]."""
    s = samples.where(F.col("metric") == metric)
    for k, v in (labels or {}).items():
        s = s.where(F.col("labels").getItem(k) == v)
    return s.select("ts", "process", "node_id", "value").orderBy("ts", "process")


def follower_lag(samples: DataFrame) -> DataFrame:
    """Kafka's ReplicaFetcherManager MaxLag{clientId=Replica} per broker over time."""
    return gauge_series(samples, MAX_LAG, {"clientId": "Replica"}) \
        .withColumnRenamed("value", "max_lag")


def scrape_health(scrapes: DataFrame) -> DataFrame:
    """[process, scrapes, failed, first_ts, last_ts] — failures are kills and pauses as much as
    exporter trouble; the transitions say which."""
    return scrapes.groupBy("process").agg(
        F.count(F.lit(1)).alias("scrapes"),
        F.sum((~F.col("ok")).cast("long")).alias("failed"),
        F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts")).orderBy("process")

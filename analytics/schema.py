"""The export layout and the record shapes ``replog analyze`` reads.

An export dir (written by ``replog metrics export``)::

    manifest.json                 {"format": "replog-export", "version": 1, "cluster_id": ...,
                                   "interval_ms": 1000, "data_dir": ..., "started": <unix s>}
    samples/samples-<t>.jsonl     one metric sample per line
    scrapes/scrapes-<t>.jsonl     one scrape attempt per line (failures are data)
    events/<process>.events.jsonl the processes' event logs, each line stamped with cluster_id

``samples/`` and ``scrapes/`` may also hold ``*.parquet`` files with the same columns (the
reader takes both). JSON Lines is what the exporter writes: appending a line per sample with
aiofiles costs a ``json.dumps``, where Parquet would need pyarrow and whole row groups in memory.

Times are Unix seconds (float). Samples and scrapes are stamped with the exporter's clock at the
start of the scrape round; events carry their process's wall clock (ISO 8601, UTC). All
processes of a local cluster share one host clock; across hosts, ``replog analyze`` bounds the
skew by causality (a ``become_leader`` cannot precede the ``leader_election`` that caused it)
and reports that bound.

Events the analysis reads, as broker/ and controller/ emit them (one JSON object per line:
``event``, ``timestamp``, ``process``, then the fields; controller lines carry
``controller_id``, broker lines ``broker``):

- controller (controller/core.py ``_emit``): ``leader_election`` {partition, old_leader,
  new_leader (-1: none eligible), leader_epoch, unclean, reason (offline | controlled_shutdown |
  relinquished | restarted | preferred | reassigned | new_partition | unclean_recovery), isr,
  partition_epoch}; ``isr_change`` {partition, leader, leader_epoch, old_isr, new_isr,
  partition_epoch}; ``broker_failed`` / ``broker_registered`` {broker};
  ``unclean_recovery_started`` {partition, strategy (Proactive | Balanced | Manual), forced,
  replicas, last_known_elr} and ``unclean_recovery_finished`` {partition, strategy, forced,
  outcome (elected | dropped | failed), candidates, answers ({broker: {last_written_leader_epoch,
  log_end_offset, error}}), waited_ms; elected: leader, leader_epoch, offsets_discarded; else
  reason} (design.md#kip-966's Unclean Recovery Manager; its election is a ``leader_election`` with
  reason ``unclean_recovery``); ``reassignment_started`` / ``reassignment_cancelled``
  {partition, source, original, target, adding, removing} (again on a changed target or a
  controller failover) and ``reassignment_completed`` {partition, replicas, added, removed}
  (design.md#reassignment). No event carries the bytes a reassignment moved:
  ``transforms.reassignments`` takes them from the brokers'
  ``kafka_server_brokertopicmetrics_reassignmentbytesin`` counters.
- broker: ``become_leader`` {partition, leader_epoch}; ``isr_shrink`` / ``isr_expand``
  {partition, old_isr, isr, partition_epoch}; ``broker_started``; ``truncated`` {partition,
  leader, leader_epoch, from_offset, to_offset}; ``log_dir_offline`` {log_dir, reason,
  partitions} (design.md#jbod); ``replica_recreated`` {partition, lost_in, log_dir}: a replica lost
  with its log dir created again in a healthy dir (design.md#jbod); recovery then runs until it
  rejoins the ISR.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from common.errors import ReplogError


class AnalyzeError(ReplogError):
    """Input that cannot be analysed, or a Spark failure, said in one line. Here, not in
    analytics.job, so that every analysis module raises it without importing the job."""


# The chaos-history tables (analytics.chaos_history): name -> what it holds, in report order.
# Here rather than in chaos_history so that the report names them without importing Spark code.
CHAOS_TABLES = {
    "chaos_faults": ("Per fault window (from its start to its stop; to the heal for a fault never "
                     "stopped; an instant for an admin operation): the writes in flight during "
                     "it and the longest gap between two acknowledged acks=all writes of one "
                     "partition overlapping it, against the run's detection bound."),
    "chaos_partitions": ("Per partition over the whole run: write outcomes by acks and the "
                         "longest gap between two acknowledged acks=all writes."),
    "chaos_fault_partitions": "Per fault window and partition: the same figures.",
}


EXPORT_FORMAT = "replog-export"
EXPORT_VERSION = 1
MANIFEST = "manifest.json"
SAMPLES_DIR = "samples"
SCRAPES_DIR = "scrapes"
EVENTS_DIR = "events"

SAMPLE_SCHEMA = StructType([
    StructField("ts", DoubleType()),
    StructField("process", StringType()),   # "broker-1", "controller-100"
    StructField("role", StringType()),
    StructField("node_id", LongType()),
    StructField("metric", StringType()),    # as exposed: counters end in _total
    StructField("labels", MapType(StringType(), StringType())),
    StructField("value", DoubleType()),
])

SCRAPE_SCHEMA = StructType([
    StructField("ts", DoubleType()),
    StructField("process", StringType()),
    StructField("role", StringType()),
    StructField("node_id", LongType()),
    StructField("pid", LongType()),
    StructField("ok", BooleanType()),
    StructField("error", StringType()),
    StructField("duration_ms", DoubleType()),
])

_L = LongType()
_S = StringType()

# The union of the event fields the transforms read; any other field is ignored, a field of the
# wrong type reads as null.
EVENT_SCHEMA = StructType([
    StructField("timestamp", _S),
    StructField("event", _S),
    StructField("process", _S),             # "broker" | "controller"
    StructField("broker", _L),              # broker events: this broker; controller: subject
    StructField("controller_id", _L),
    StructField("cluster_id", _S),
    StructField("partition", _S),
    # Read as text: some events use "partitions" for a count (topic_created), others for a
    # list (log_dir_offline); a type clash would drop the whole line. normalize_events parses.
    StructField("partitions", _S),
    StructField("leader_epoch", _L),
    StructField("partition_epoch", _L),
    StructField("old_leader", _L),
    StructField("new_leader", _L),
    StructField("unclean", BooleanType()),
    StructField("reason", _S),
    StructField("isr", ArrayType(_L)),
    StructField("old_isr", ArrayType(_L)),
    StructField("new_isr", ArrayType(_L)),
    StructField("log_dir", _S),
    StructField("from_offset", _L),
    StructField("to_offset", _L),
    StructField("leader", _L),
    StructField("strategy", _S),
    StructField("outcome", _S),
    StructField("candidates", ArrayType(_L)),
    # {broker: {last_written_leader_epoch, log_end_offset, error}}: text, parsed by
    # normalize_events (PARSED_FIELDS).
    StructField("answers", _S),
    StructField("waited_ms", _L),
    StructField("offsets_discarded", _L),
    StructField("original", ArrayType(_L)),
    # Text: invalid_state_transition's "target" is a state name, reassignment_started's a
    # list of brokers; normalize_events parses the list (null for a name).
    StructField("target", _S),
    StructField("adding", ArrayType(_L)),
    StructField("_corrupt_record", _S),
])

# Events after ``transforms.normalize_events``: ``ts`` (Unix s), ``role`` (the emitting
# process's role), ``node`` (its broker or controller id), ``source`` ("broker-1"; the
# exporter's process name), then the event's fields as read.
EVENT_COLUMNS_DROPPED = ("timestamp", "process", "controller_id", "_corrupt_record")
# Fields read as JSON text and parsed by normalize_events into these types.
PARSED_FIELDS = {"partitions": ArrayType(_S), "target": ArrayType(_L),
                 "answers": MapType(_S, StructType([
                     StructField("last_written_leader_epoch", _L),
                     StructField("log_end_offset", _L), StructField("error", _S)]))}
NORMALIZED_EVENT_SCHEMA = StructType(
    [StructField("ts", DoubleType()), StructField("role", _S), StructField("node", _L),
     StructField("source", _S)]
    + [StructField(f.name, PARSED_FIELDS.get(f.name, f.dataType))
       for f in EVENT_SCHEMA.fields if f.name not in EVENT_COLUMNS_DROPPED])

# ---------------------------------------------------------------------------- chaos histories

# A ``replog chaos`` run dir holds the run's history (chaos/history.py: one operation event per
# line), beside schedule.json and verdict.json (whose stats carry the detection bound).
HISTORY_FILE = "history.jsonl"
VERDICT_FILE = "verdict.json"

# The fault a nemesis operation acts on (chaos/schedule.py ``Fault.to_json``).
FAULT_SCHEMA = StructType([
    StructField("index", _L),
    StructField("at_s", DoubleType()),
    StructField("nemesis", _S),
    StructField("target", ArrayType(_S)),   # ["broker-2"], ["leader"], ["broker-1", "zookeeper"]
    StructField("duration_s", DoubleType()),  # 0: an instant (an admin operation)
])

# One history line. ``value`` is the union of the operations' values; a field an operation
# does not carry reads as null. The replica snapshot after the heal (``replicas``'
# ``partitions``: segment hashes) is left out: chaos.checker compares it, no table needs it.
HISTORY_SCHEMA = StructType([
    StructField("index", _L),               # position in the run, 0..n-1
    StructField("time", DoubleType()),      # seconds since the workload started (monotonic)
    StructField("wall", DoubleType()),      # Unix seconds, to join with an export's events
    StructField("process", _S),             # writer-0, reader-1, final-reader, nemesis, checker
    StructField("type", _S),                # invoke | ok | fail | info (unknown)
    StructField("f", _S),                   # send | read | final-read | replicas | start | ...
    StructField("value", StructType([
        # send
        StructField("partition", _L),
        StructField("value", _S),           # w<writer>:<seq>:<acks>
        StructField("acks", _S),            # "all" | "1"
        StructField("offset", _L),          # ok sends: the acknowledged offset
        StructField("error", _S),
        StructField("unexpected", BooleanType()),
        # read / final-read: [partition, offset, value] triples of mixed types, so read as
        # text (Spark renders a JSON number given a string type as its text).
        StructField("records", ArrayType(ArrayType(_S))),
        StructField("end_offsets", MapType(_S, _L)),
        StructField("complete", BooleanType()),
        # nemesis start / stop / heal / healed
        StructField("fault", FAULT_SCHEMA),
        # Text: each nemesis reports its own shape ({"killed": ...}, {"paused": ...}).
        StructField("result", _S),
        StructField("skipped", _S),
        StructField("nemesis", _S),
        StructField("isr_full", BooleanType()),
    ])),
    StructField("_corrupt_record", _S),     # a torn last line of a run that died
])

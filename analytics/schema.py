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

Events replog emits today (broker/, controller/) that the analysis uses:

- controller: ``leader_election`` {partition, old_leader, new_leader (-1: none eligible),
  leader_epoch, unclean, reason (offline | controlled_shutdown | relinquished | restarted |
  preferred | reassigned | new_partition), isr, partition_epoch}; ``isr_change`` {partition,
  old_isr, new_isr, partition_epoch}; ``broker_failed`` / ``broker_registered`` {broker}.
- broker: ``become_leader`` {partition, leader_epoch}; ``isr_shrink`` / ``isr_expand``
  {partition, old_isr, isr, partition_epoch}; ``broker_started``; ``truncated`` {partition,
  leader_epoch, from_offset, to_offset}; ``log_dir_offline`` {log_dir, partitions}.

Events defined here for features that land later (C5-C7); the transforms accept them now:

- broker ``replica_recreated`` {partition, log_dir}: a replica lost with its log dir was created
  again in a healthy dir (C5); recovery then runs until it rejoins the ISR.
- controller ``unclean_recovery`` {partition, strategy (Proactive | Balanced | Manual),
  chosen_replica, leader_epoch, offsets_discarded (optional; else summed from the followers'
  ``truncated`` events at that leader epoch)} (C7).
- controller ``reassignment_started`` {partition, target_replicas, adding, removing} and
  ``reassignment_completed`` {partition, bytes_moved (optional)} (C6).
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
    StructField("strategy", _S),
    StructField("chosen_replica", _L),
    StructField("offsets_discarded", _L),
    StructField("target_replicas", ArrayType(_L)),
    StructField("bytes_moved", _L),
    StructField("_corrupt_record", _S),
])

# Events after ``transforms.normalize_events``: ``ts`` (Unix s), ``role`` (the emitting
# process's role), ``node`` (its broker or controller id), ``source`` ("broker-1"; the
# exporter's process name), then the event's fields as read.
EVENT_COLUMNS_DROPPED = ("timestamp", "process", "controller_id", "_corrupt_record")
NORMALIZED_EVENT_SCHEMA = StructType(
    [StructField("ts", DoubleType()), StructField("role", _S), StructField("node", _L),
     StructField("source", _S)]
    + [StructField(f.name, ArrayType(_S)) if f.name == "partitions" else f
       for f in EVENT_SCHEMA.fields if f.name not in EVENT_COLUMNS_DROPPED])

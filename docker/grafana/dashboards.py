"""replog's Grafana dashboards as code: ``python docker/grafana/dashboards.py`` writes
``docker/grafana/dashboards/*.json``; ``--check`` fails when the committed JSON differs.

Plain Python data rather than a dashboards library: the panels are a title, a unit and PromQL,
and Grafana's JSON model for a timeseries/stat panel is small enough to write out here with no
dependency. Every query uses Kafka's metric names (docker/prometheus/metrics.txt) or the
recording rules of docker/prometheus/rules/, and tests/observability/test_prometheus_live.py runs
each one against a real Prometheus scraping a real cluster. Grafana itself is not installable on
the build machine, so the JSON is provisioned in compose (docker/grafana/provisioning/) and
checked there by query, not rendered.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "replog-prometheus"}
# For series that exist only while (or once) something happens - a replica being added, an
# unclean recovery -: 0 instead of "No data" when nothing did, so the panel query still answers
# (tests/observability/test_prometheus_live.py requires data from every query). `on()` keeps the
# 0 out as soon as a real series is there.
NONE_IS_ZERO = "or on() vector(0)"

# (dashboard uid, title, [(panel title, kind, unit, [(PromQL, legend)])])
DASHBOARDS = [
    ("replog-overview", "replog / Cluster overview", [
        ("Brokers up", "stat", "none", [("replog:brokers_up:sum", "brokers")]),
        ("Active controllers", "stat", "none",
         [("sum(kafka_controller_kafkacontroller_activecontrollercount)", "active")]),
        ("Offline partitions", "stat", "none",
         [("sum(kafka_controller_kafkacontroller_offlinepartitionscount)", "offline")]),
        ("Under-replicated partitions", "stat", "none",
         [("replog:underreplicatedpartitions:sum", "under-replicated")]),
        ("Under min ISR partitions", "stat", "none",
         [("replog:underminisrpartitions:sum", "under min ISR")]),
        ("Partitions and leaders", "timeseries", "none",
         [("kafka_controller_kafkacontroller_globalpartitioncount > 0", "partitions"),
          ("replog:leaders:sum", "leaders")]),
        ("Bytes in per broker", "timeseries", "Bps",
         [("instance:replog_bytesin:rate1m", "{{instance}}")]),
        ("Produce requests per broker", "timeseries", "reqps",
         [("instance:replog_producerequests:rate1m", "{{instance}}")]),
    ]),
    ("replog-replication", "replog / Replication and ISR", [
        ("Under-replicated partitions by leader", "timeseries", "none",
         [("kafka_server_replicamanager_underreplicatedpartitions", "{{instance}}")]),
        ("Under min ISR by leader", "timeseries", "none",
         [("kafka_server_replicamanager_underminisrpartitioncount", "{{instance}}")]),
        ("ISR shrinks / expands", "timeseries", "ops",
         [("rate(kafka_server_replicamanager_isrshrinks_total[1m])", "shrinks {{instance}}"),
          ("rate(kafka_server_replicamanager_isrexpands_total[1m])", "expands {{instance}}")]),
        ("Failed ISR updates (AlterPartition)", "timeseries", "ops",
         [("rate(kafka_server_replicamanager_failedisrupdates_total[1m])", "{{instance}}")]),
        ("Follower max lag (messages)", "timeseries", "none",
         [("kafka_server_replicafetchermanager_maxlag", "{{instance}} {{clientId}}")]),
        ("Fetcher failed partitions (KIP-461)", "timeseries", "none",
         [("kafka_server_replicafetchermanager_failedpartitionscount",
           "{{instance}} {{clientId}}")]),
        ("Replication bytes in", "timeseries", "Bps",
         [("instance:replog_replicationbytesin:rate1m", "{{instance}}")]),
        ("Pending follower fetches (seed 002)", "timeseries", "none",
         [("replog_replicamanager_pendingfollowerfetches", "{{instance}}")]),
        ("Leaderships relinquished (slow leader)", "timeseries", "none",
         [("increase(replog_leadership_relinquished_total[5m])", "{{instance}}")]),
    ]),
    ("replog-groups", "replog / Consumer groups", [
        ("Consumer group lag", "timeseries", "none",
         [("sum by (consumergroup) (kafka_consumergroup_lag)", "{{consumergroup}}")]),
        ("Lag by partition", "timeseries", "none",
         [("kafka_consumergroup_lag", "{{consumergroup}} {{topic}}-{{partition}}")]),
        ("Members", "timeseries", "none",
         [("kafka_consumergroup_members", "{{consumergroup}}")]),
        ("Groups by state", "timeseries", "none",
         [("sum(kafka_coordinator_group_groupmetadatamanager_numgroupsstable)", "Stable"),
          ("sum(kafka_coordinator_group_groupmetadatamanager_numgroupsempty)", "Empty"),
          ("sum(kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance)",
           "PreparingRebalance"),
          ("sum(kafka_coordinator_group_groupmetadatamanager_numgroupscompletingrebalance)",
           "CompletingRebalance")]),
    ]),
    ("replog-logdirs", "replog / Log dirs", [
        ("Offline log dirs", "stat", "none", [("replog:offlinelogdirectories:sum", "offline")]),
        ("Log dir offline (1 = offline)", "timeseries", "none",
         [("kafka_log_logmanager_logdirectoryoffline", "{{instance}} {{logDirectory}}")]),
        ("Offline replicas", "timeseries", "none",
         [("kafka_server_replicamanager_offlinereplicacount", "{{instance}}")]),
        ("Partitions per broker", "timeseries", "none",
         [("kafka_server_replicamanager_partitioncount", "{{instance}}")]),
    ]),
    ("replog-controller", "replog / Controller and elections", [
        ("Active controller", "timeseries", "none",
         [("kafka_controller_kafkacontroller_activecontrollercount", "{{instance}}")]),
        ("Controller epoch", "timeseries", "none",
         [("max(replog_controller_epoch)", "epoch")]),
        ("Leader elections", "timeseries", "ops",
         [("replog:leaderelections:rate5m", "batches/s"),
          ("sum by (reason) (rate(replog_controller_leader_elections_total[5m]))",
           "{{reason}}")]),
        ("Leader election latency p99", "timeseries", "ms",
         [("replog:leaderelectionrateandtimems:p99_5m", "p99")]),
        ("Preferred replica imbalance", "timeseries", "none",
         [("sum(kafka_controller_kafkacontroller_preferredreplicaimbalancecount)", "imbalance")]),
        ("Live brokers (controller's view)", "timeseries", "none",
         [("max(replog_controller_live_brokers)", "live")]),
        ("Controller event queue", "timeseries", "none",
         [("replog_controller_event_queue_size", "{{instance}}")]),
    ]),
    ("replog-reassignment", "replog / Reassignment", [
        ("Reassigning partitions", "stat", "none",
         [("max(replog_controller_reassigning_partitions)", "reassigning")]),
        ("Throttled partitions (KIP-73)", "stat", "none",
         [("sum(replog_replication_throttled_partitions)", "held back")]),
        ("Reassigning partitions by leader", "timeseries", "none",
         [("kafka_server_replicamanager_reassigningpartitions", "{{instance}}"),
          ("max(replog_controller_reassigning_partitions)", "controller")]),
        ("Reassignment bytes in / out per broker", "timeseries", "Bps",
         [("sum by (instance) (rate(kafka_server_brokertopicmetrics_reassignmentbytesin_total[1m]))",  # noqa: E501
           "in {{instance}}"),
          ("sum by (instance) (rate(kafka_server_brokertopicmetrics_reassignmentbytesout_total[1m]))",  # noqa: E501
           "out {{instance}}")]),
        # One series per replica being added, only while it is: 0 when no move is in flight.
        ("Adding-replica lag (messages)", "timeseries", "none",
         [(("max by (topic, partition, replica) (replog_reassignment_replica_lag_messages) "
            + NONE_IS_ZERO), "{{topic}}-{{partition}} replica {{replica}}")]),
        # Totals since the active controller started: increase() would miss the first step of
        # each number (its series appears with the step).
        ("Reassignment steps and completed moves", "timeseries", "none",
         [("sum by (step) (replog_controller_reassignment_steps_total)", "step {{step}}"),
          ("sum(replog_controller_reassignments_completed_total)", "completed")]),
        ("Throttled replication bytes (KIP-73)", "timeseries", "Bps",
         [("sum by (instance, direction) (rate(replog_replication_throttled_bytes_total[1m]))",
           "{{direction}} {{instance}}")]),
        ("Partitions held back by the throttle", "timeseries", "none",
         [("replog_replication_throttled_partitions", "{{direction}} {{instance}}")]),
    ]),
    ("replog-unclean", "replog / Unclean elections and recoveries (KIP-966)", [
        ("Unclean leader elections (10m)", "stat", "none",
         [("sum(increase(kafka_controller_controllerstats_uncleanleaderelections_total[10m]))",
           "unclean")]),
        ("Offsets discarded by recoveries (10m)", "stat", "none",
         [("sum(increase(replog_unclean_recovery_offsets_discarded_total[10m]))",
           "offsets")]),
        ("Partitions with ELR", "stat", "none",
         [("sum(replog_controller_partitions_with_elr)", "with ELR")]),
        # Recoveries that elect are unclean elections too (they count in both).
        ("Unclean leader elections", "timeseries", "none",
         [("sum(kafka_controller_controllerstats_uncleanleaderelections_total)", "total")]),
        # Offline partitions are what an unclean election would end (with data loss).
        ("Offline partitions", "timeseries", "none",
         [("sum(kafka_controller_kafkacontroller_offlinepartitionscount)", "offline")]),
        # Totals since the active controller started, by how each Unclean Recovery Manager task
        # ended (elected, dropped, failed); a series appears with its first recovery.
        ("Unclean recoveries by strategy and outcome", "timeseries", "none",
         [("sum by (strategy, outcome) (replog_unclean_recoveries_total) " + NONE_IS_ZERO,
           "{{strategy}} {{outcome}}")]),
        ("Offsets discarded by unclean recoveries", "timeseries", "none",
         [("sum(replog_unclean_recovery_offsets_discarded_total)", "total")]),
        ("GetReplicaLogInfo requests", "timeseries", "reqps",
         [("sum(rate(replog_controller_getreplicaloginfo_requests_total[5m]))", "requests")]),
        # ELR members exist only for partitions below min ISR.
        ("Partitions with ELR / under min ISR", "timeseries", "none",
         [("sum(replog_controller_partitions_with_elr)", "with ELR"),
          ("replog:underminisrpartitions:sum", "under min ISR")]),
        ("ELR sizes: replicas in ELRs / LastKnownELRs", "timeseries", "none",
         [("sum(replog_controller_eligible_leader_replicas)", "ELR"),
          ("sum(replog_controller_last_known_elr_replicas)", "LastKnownELR")]),
    ]),
]


def panel(pid: int, title: str, kind: str, unit: str, targets: list[tuple[str, str]]) -> dict:
    width = 6 if kind == "stat" else 12
    height = 4 if kind == "stat" else 8
    return {
        "id": pid, "type": kind, "title": title, "datasource": DATASOURCE,
        "gridPos": {"h": height, "w": width, "x": 0, "y": 0},  # x/y laid out below
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr,
                     "legendFormat": legend} for i, (expr, legend) in enumerate(targets)],
    }


def dashboard(uid: str, title: str, panels: list[tuple]) -> dict:
    out, x, y, row_h = [], 0, 0, 0
    for i, spec in enumerate(panels, 1):
        p = panel(i, *spec)
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if x + w > 24:
            x, y, row_h = 0, y + row_h, 0
        p["gridPos"].update(x=x, y=y)
        x, row_h = x + w, max(row_h, h)
        out.append(p)
    return {"uid": uid, "title": title, "tags": ["replog", "kafka"], "timezone": "browser",
            "schemaVersion": 38, "version": 1, "refresh": "10s",
            "time": {"from": "now-30m", "to": "now"}, "panels": out}


def render() -> dict[str, str]:
    return {f"{uid}.json": json.dumps(dashboard(uid, title, panels), indent=2) + "\n"
            for uid, title, panels in DASHBOARDS}


def queries() -> list[tuple[str, str, str]]:
    """(dashboard uid, panel title, PromQL) of every panel target."""
    return [(uid, spec[0], expr) for uid, _title, panels in DASHBOARDS
            for spec in panels for expr, _legend in spec[3]]


def main(argv: list[str]) -> int:
    files = render()
    if "--check" in argv:
        stale = [n for n, text in files.items()
                 if not (OUT / n).exists() or (OUT / n).read_text() != text]
        stale += [p.name for p in OUT.glob("*.json") if p.name not in files]
        if stale:
            print(f"stale dashboards (run python {Path(__file__).name}): {', '.join(stale)}",
                  file=sys.stderr)
            return 1
        return 0
    OUT.mkdir(exist_ok=True)
    for name, text in files.items():
        (OUT / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

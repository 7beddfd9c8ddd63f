"""replog analytics (SPEC C8): export a running cluster's metrics and events, then analyse them
afterwards with PySpark into a self-contained HTML report.

- ``analytics.export`` — ``replog metrics export``: samples every process's ``/metrics`` and
  gathers its ``*.events.jsonl`` into an export dir (layout in ``analytics.schema``).
- ``analytics.transforms`` — the analysis as pure functions of DataFrames (no I/O).
- ``analytics.job`` — ``replog analyze``: reads an export, validates it, runs the transforms,
  writes tables (CSV + Parquet) and ``report.html`` (``analytics.report``).
- ``analytics.demo`` — ``replog demo``: a seeded fault scenario that produces data worth
  analysing.

Status: availability, failover, recovery, ISR churn, unclean elections, throughput and lag are
computed from events and metrics replog emits today. Log-dir failures re-replication
(C5), reassignments (C6) and unclean *recoveries* (C7) are computed from the event shapes
documented in ``analytics.schema``, which the broker and controller do not emit yet; until they
do, those tables are empty.
"""

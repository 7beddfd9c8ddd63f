"""replog analytics (design.md#c8): export a running cluster's metrics and events, then analyse them
afterwards with PySpark into a self-contained HTML report.

- ``analytics.export`` — ``replog metrics export``: samples every process's ``/metrics`` and
  gathers its ``*.events.jsonl`` into an export dir (layout in ``analytics.schema``).
- ``analytics.transforms`` — the analysis as pure functions of DataFrames (no I/O).
- ``analytics.job`` — ``replog analyze``: reads an export, validates it, runs the transforms,
  writes tables (CSV + Parquet) and ``report.html`` (``analytics.report``).
- ``analytics.demo`` — ``replog demo``: a seeded fault scenario that produces data worth
  analysing.

Every table is computed from events and metrics replog emits (the shapes in
``analytics.schema``): availability, failover, recovery, ISR churn, unclean elections and KIP-966
unclean recoveries (design.md#kip-966), log-dir failures and re-replication (design.md#jbod),
reassignments with the bytes they moved (design.md#reassignment; from the brokers' per-broker
reassignment byte counters), throughput and lag. ``tests/analytics/test_event_contract.py`` runs the
real controller core and reads its event log, so a renamed event or field fails a test rather than
leaving a table empty.
"""

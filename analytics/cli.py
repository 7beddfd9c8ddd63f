"""``replog metrics export``, ``replog analyze`` and ``replog demo`` (registered by
admin/commands.py). Heavy imports (pyspark, matplotlib) happen inside the commands, so the rest
of the CLI starts as fast as before."""

from __future__ import annotations


def _export(args) -> int:
    from analytics.export import run
    return run(args.cluster, args.out, args.interval_ms, args.duration)


def _analyze(args) -> int:
    from analytics.job import main
    return main(args.input, args.output, args.master, chaos_runs=args.chaos_history)


def _demo(args) -> int:
    from analytics.demo import run
    return run(args.data_dir, args.output, seed=args.seed, interval_ms=args.interval_ms)


def add_parsers(sub) -> None:
    metrics = sub.add_parser("metrics", help="sample a cluster's metrics and events to files")
    actions = metrics.add_subparsers(dest="metrics_command", metavar="ACTION")
    actions.required = True
    p = actions.add_parser("export", help="scrape every process's /metrics and gather event "
                                          "logs until Ctrl-C (input of 'replog analyze')")
    p.add_argument("--cluster", required=True, metavar="DATA_DIR",
                   help="the cluster's data dir (holding cluster.json)")
    p.add_argument("--out", required=True, metavar="DIR", help="export dir")
    p.add_argument("--interval-ms", type=int, default=1000,
                   help="sampling interval (default 1000)")
    p.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                   help="stop after this long (default: until Ctrl-C or SIGTERM)")
    p.set_defaults(func=_export)

    p = sub.add_parser("analyze", help="PySpark analysis of an export and/or chaos runs' "
                                       "histories: tables and report.html")
    # Not required: a chaos history alone is worth analysing; job.main says when neither is
    # given.
    p.add_argument("--input", default=None, metavar="DIR", help="an export dir")
    p.add_argument("--chaos-history", action="append", default=None, metavar="RUN_DIR",
                   help="a 'replog chaos' run dir (its history.jsonl): write outcomes and "
                        "acks=all availability per partition and fault window; repeatable")
    p.add_argument("--output", required=True, metavar="DIR", help="where the report goes")
    p.add_argument("--master", default=None, metavar="URL",
                   help="Spark master (default local[*]; e.g. spark://127.0.0.1:7077)")
    p.set_defaults(func=_analyze)

    p = sub.add_parser("demo", help="a seeded fault scenario on a local cluster, then its "
                                    "report")
    p.add_argument("--data-dir", default="demo-data", help="cluster data dir (default "
                                                          "./demo-data; emptied first)")
    p.add_argument("--output", default=None, metavar="DIR",
                   help="report dir (default DATA_DIR/report)")
    p.add_argument("--seed", type=int, default=1, help="scenario seed (default 1)")
    p.add_argument("--interval-ms", type=int, default=250,
                   help="exporter sampling interval (default 250)")
    p.set_defaults(func=_demo)

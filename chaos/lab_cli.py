"""``replog lab list`` and ``replog lab run NAME [--seeds N] [--arms a,b] [--out DIR]
[--master spark://...] [--resume]`` (registered by admin/commands.py; chaos/lab/ runs the
experiments, analytics/lab.py analyses them). Heavy imports happen inside the commands."""

from __future__ import annotations

import time
from pathlib import Path


def _list(args) -> int:
    from chaos.lab import EXPERIMENTS
    for e in EXPERIMENTS.values():
        state = "" if e.schedule is not None else f"  [not runnable yet: {e.not_ready}]"
        print(f"{e.name:<13} {e.claim} (arms: {', '.join(a.name for a in e.arms)}){state}")
    return 0


def _run(args) -> int:
    from chaos.lab import main_run
    out = Path(args.out or f"lab-{args.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    return main_run(args.name, args.seeds, args.arms, out, args.master, args.resume)


def _analyze(args) -> int:
    from analytics.lab import analyze
    summary = analyze(Path(args.out), args.master)
    for line in summary["table"]:
        print(line)
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("lab", help="A/B experiments: each design against the behaviour it "
                                   "replaced, over seeds, with a PySpark report")
    actions = p.add_subparsers(dest="lab_command", metavar="ACTION")
    actions.required = True
    a = actions.add_parser("list", help="the experiments, one line each")
    a.set_defaults(func=_list)
    a = actions.add_parser("run", help="run every arm of an experiment on every seed, each on "
                                       "a fresh local cluster, then analyse")
    a.add_argument("name", help="the experiment (replog lab list)")
    a.add_argument("--seeds", type=int, default=3, help="seeds 1..N (default 3)")
    a.add_argument("--arms", default=None, help="comma-separated arms (default: all)")
    a.add_argument("--out", default=None, metavar="DIR",
                   help="where runs, tables, summary.json and report.html go (default "
                        "./lab-NAME-<time>)")
    a.add_argument("--master", default=None, metavar="URL",
                   help="Spark master for the analysis (default local[*])")
    a.add_argument("--resume", action="store_true",
                   help="go on with the runs of an earlier, stopped 'lab run' in --out")
    a.set_defaults(func=_run)
    a = actions.add_parser("analyze", help="the analysis alone, over the finished runs of "
                                           "--out")
    a.add_argument("--out", required=True, metavar="DIR")
    a.add_argument("--master", default=None, metavar="URL")
    a.set_defaults(func=_analyze)

"""``replog chaos --seed N [--duration D] [--nemesis kill,pause,...] [--data-dir DIR]``
``replog chaos --matrix FAILURE:TARGET`` (one cell of the ducktape matrix, e.g.
``hard-kill:controller``; replays a failing ``tests/chaos/test_matrix.py`` case).
``--cluster DATA_DIR`` runs against a running cluster (``replog cluster up``'s, found through
its ``cluster.json``; chaos/attached.py) instead of starting one: on a topic of its own,
``chaos-<seed>-<time>``, with the run's files in ``DATA_DIR/chaos/<seed>-<time>/`` (or
``--data-dir``), the fault durations drawn against that cluster's own timeouts.

Starts its own cluster (ZooKeeper, controllers, brokers) in DIR (a new temporary dir by
default; an existing DIR must be empty, since old logs would mix into the history), runs the
schedule drawn from the seed under an acks=all + acks=1 workload, heals, checks, and prints
the seed, the schedule, the history path and the verdict. Exit 0 when every property holds,
1 otherwise (with the violating operations). The same seed prints the same schedule.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from chaos.schedule import (
    FAILURES,
    HOST_NEMESES,
    MATRIX_TARGETS,
    NEEDS_ROOT,
    NEMESES,
    ZOOKEEPER_NEMESES,
    Timeouts,
    matrix_schedule,
    parse_nemeses,
)
from common.errors import ReplogError


def _duration(text: str) -> float:
    t = text.strip().lower()
    mult = 60.0 if t.endswith("m") else 1.0
    t = t.rstrip("ms")
    value = float(t) * mult
    if value <= 0:
        raise ValueError(f"--duration must be positive, got {text!r}")
    return value


def add_parsers(sub) -> None:
    nemeses_help = "; ".join(f"{n}: {d}" + (" (root)" if n in NEEDS_ROOT else "")
                             for n, d in {**NEMESES, **HOST_NEMESES,
                                          **ZOOKEEPER_NEMESES}.items())
    p = sub.add_parser("chaos", help="seeded fault schedule against a local cluster, "
                                     "then a Jepsen-style check of the history")
    p.add_argument("--seed", type=int, help="the seed the schedule is drawn from (required "
                                            "unless --matrix)")
    p.add_argument("--duration", type=_duration, default=60.0,
                   help="how long faults are injected (e.g. 60, 60s, 2m; default 60 s; a "
                        "--matrix cell has its own)")
    p.add_argument("--nemesis", default="all",
                   help=f"comma-separated nemeses, or all (default; not the host nor the "
                        f"ZooKeeper ensemble ones), or hosts (the host ones, with --hosts), or "
                        f"zookeeper (the ensemble ones, with --zookeeper-nodes). "
                        f"{nemeses_help}".replace("%", "%%"))  # argparse formats help with %
    p.add_argument("--data-dir", help="empty or new dir for the cluster and the history "
                                      "(default: a new temporary dir)")
    p.add_argument("--cluster", metavar="DATA_DIR",
                   help="use the running cluster of DATA_DIR (its cluster.json) instead of "
                        "starting one; nemeses that restart processes are skipped while its "
                        "supervisor (replog cluster up) runs")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--controllers", type=int, default=1)
    p.add_argument("--matrix", metavar="FAILURE:TARGET",
                   help=f"run one cell of the ducktape matrix instead of a seeded schedule: "
                        f"FAILURE one of {', '.join(FAILURES)}; TARGET one of "
                        f"{', '.join(MATRIX_TARGETS)} (acks=all writers, 2 controllers)")
    p.add_argument("--hosts", action="store_true",
                   help="start the run's cluster with every process on a network namespace "
                        "of its own (root; docs/hosts-and-racks.md); the host nemeses "
                        "(--nemesis hosts: " + ", ".join(HOST_NEMESES) + ") need it")
    p.add_argument("--racks", type=int, default=1,
                   help="with --hosts: racks the brokers are spread over (rack-cut needs 2+)")
    p.add_argument("--inter-rack-latency-ms", type=float, default=0.0,
                   help="with --racks: one-way delay between racks")
    p.add_argument("--zookeeper-nodes", type=int, choices=(1, 3, 5), default=1,
                   help="start the run's cluster with a ZooKeeper ensemble of 3 or 5 members "
                        "(docs/zookeeper-ensemble.md; 1, the default, is a standalone "
                        "server); the ensemble nemeses (--nemesis zookeeper: "
                        + ", ".join(ZOOKEEPER_NEMESES) + ") need it")
    p.add_argument("--schedule-only", action="store_true",
                   help="print the schedule and exit (nothing is started)")
    p.set_defaults(func=_chaos)


def _hosts(args):
    """--hosts/--racks/--inter-rack-latency-ms for the run's own cluster, checked before
    anything starts."""
    if not args.hosts:
        if args.racks != 1 or args.inter_rack_latency_ms:
            raise ReplogError("--racks and --inter-rack-latency-ms need --hosts")
        return None
    if args.cluster:
        raise ReplogError("--hosts starts the run's own cluster; a --cluster is on hosts when "
                          "it was started with replog cluster up --hosts")
    from harness import hosts as hostlib
    from harness.cluster_hosts import HostsOptions
    why = hostlib.unavailable()
    if why:
        raise ReplogError(why)
    opts = HostsOptions(args.racks, args.inter_rack_latency_ms)
    opts.check()
    return opts


def _zookeeper_nodes(args, nemeses: tuple[str, ...]) -> int:
    """--zookeeper-nodes for the run's own cluster, checked before anything starts."""
    if args.zookeeper_nodes > 1 and args.cluster:
        raise ReplogError("--zookeeper-nodes starts the run's own ensemble; a --cluster runs "
                          "the ZooKeeper it was started with (replog cluster up "
                          "--zookeeper-nodes N)")
    named = [n for n in nemeses if n in ZOOKEEPER_NEMESES]
    if named and args.zookeeper_nodes == 1 and not args.cluster:
        raise ReplogError(f"{','.join(named)} need a ZooKeeper ensemble: add "
                          f"--zookeeper-nodes 3 (or 5)")
    return args.zookeeper_nodes


def _chaos(args) -> int:
    from chaos.runner import RunConfig
    schedule = None
    if args.matrix:
        failure, _, target = args.matrix.partition(":")
        try:
            schedule = matrix_schedule(failure, target)
        except ValueError as e:
            raise ReplogError(f"--matrix {args.matrix}: {e}") from None
        nemeses = schedule.nemeses
    elif args.seed is None:
        raise ReplogError("--seed N is required (or --matrix FAILURE:TARGET)")
    else:
        nemeses = parse_nemeses(args.nemesis)
    zookeeper_nodes = _zookeeper_nodes(args, nemeses)
    attached = None
    if args.cluster:
        from chaos.attached import AttachedCluster
        attached = AttachedCluster(args.cluster)
    brokers = len(attached.brokers) if attached is not None else args.brokers
    if brokers < 3:
        raise ReplogError(f"{'the cluster has' if attached else '--brokers must be at least'} "
                          f"{brokers if attached else 3} broker(s): the chaos topic has "
                          f"replication factor 3")
    data_dir = Path(args.data_dir) if args.data_dir else None
    if data_dir is not None and data_dir.exists() and any(data_dir.iterdir()):
        raise ReplogError(f"--data-dir {data_dir} is not empty: a chaos run needs a fresh one")
    cfg = RunConfig(seed=args.seed or 0, duration_s=args.duration, nemeses=nemeses,
                    data_dir=data_dir or Path(tempfile.mkdtemp(prefix="replog-chaos-")),
                    brokers=brokers, controllers=args.controllers, timeouts=Timeouts(),
                    hosts=_hosts(args), zookeeper_nodes=zookeeper_nodes)
    if attached is not None:
        tag = (args.matrix.replace(":", "-") if args.matrix else str(args.seed)) + \
            time.strftime("-%Y%m%d-%H%M%S")
        cfg.cluster, cfg.topic, cfg.timeouts = attached, f"chaos-{tag}", attached.timeouts()
        if data_dir is None:
            cfg.data_dir = attached.data_dir / "chaos" / tag
        if schedule is not None:  # drawn against the cluster's own timeouts
            schedule = matrix_schedule(*args.matrix.split(":", 1), timeouts=cfg.timeouts)
    if schedule is not None:
        # The controller target needs a standby: with one controller a kill leaves none.
        cfg.fixed_schedule, cfg.writers = schedule, ("all", "all")
        cfg.controllers = max(2, args.controllers)
    schedule = cfg.schedule()
    if args.matrix:
        print(f"Matrix: {args.matrix}")
    else:
        print(f"Seed: {args.seed}")
    print(f"Schedule: {schedule.describe()}", flush=True)
    if args.schedule_only:
        return 0
    from chaos.runner import run
    try:
        result = run(cfg, log=lambda line: print(line, flush=True))
    finally:
        if attached is not None:
            attached.close()
    for name, why in sorted(result.skipped.items()):
        print(f"Skipped nemesis {name}: {why}")
    print(f"History: {result.history_path}")
    print(f"Verdict: {result.verdict.describe()}")
    if args.matrix:
        print(f"Replay: replog chaos --matrix {args.matrix}", flush=True)
    else:
        print(f"Replay: replog chaos --seed {args.seed} --duration {args.duration:g} "
              f"--nemesis {','.join(nemeses)}"
              + (f" --cluster {args.cluster}" if args.cluster else "")
              + (f" --hosts --racks {args.racks} --inter-rack-latency-ms "
                 f"{args.inter_rack_latency_ms:g}" if args.hosts else "")
              + (f" --zookeeper-nodes {args.zookeeper_nodes}" if args.zookeeper_nodes > 1
                 else ""), flush=True)
    sys.stdout.flush()
    return 0 if result.verdict.valid else 1

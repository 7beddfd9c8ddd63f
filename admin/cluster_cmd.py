"""``replog cluster up|down`` — a local cluster of real processes (see harness/local_cluster.py).

``up`` runs in the foreground until Ctrl-C or SIGTERM, then stops the brokers (SIGTERM: each
does a controlled shutdown), the controllers and ZooKeeper, in that order. Run it in the
background (``replog cluster up --data-dir d &``) and ``replog cluster down --data-dir d`` stops
it the same way; if the supervisor itself was killed, ``down`` stops the processes listed in
``d/cluster.json``.

``up --security mtls`` starts a secure cluster (harness/cluster_security.py): TLS with client
certificates on every listener and ``client.properties`` for the admin principal beside
cluster.json; ``cluster certs --data-dir d --cn NAME`` issues another client's certificate from
the cluster's CA and writes its properties file.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

from common.config import build_config, parse_override
from common.errors import ReplogError
from harness.local_cluster import LocalCluster, stop_cluster_in


def _overrides(items: list[str] | None) -> dict[str, str]:
    entries = [parse_override(item) for item in items or ()]
    build_config(entries)  # an unknown key or a bad value fails here, naming the key
    return {k: v for k, v, _ in entries}


def _up(args) -> int:
    if args.brokers < 1:
        raise ReplogError("--brokers must be at least 1")
    if args.controllers < 1:
        raise ReplogError("--controllers must be at least 1")
    if args.log_dirs_per_broker < 1:
        raise ReplogError("--log-dirs-per-broker must be at least 1")
    if args.zookeeper_nodes > 1 and args.zookeeper:
        raise ReplogError("--zookeeper-nodes starts an ensemble here; --zookeeper uses one "
                          "running elsewhere: give one or the other")
    if args.prometheus:
        from harness.prometheus import prometheus_binary
        prometheus_binary()  # no binary: the install command, before anything is started
    hosts = _hosts_options(args)
    cluster = LocalCluster(args.data_dir, brokers=args.brokers, controllers=args.controllers,
                           log_dirs_per_broker=args.log_dirs_per_broker,
                           zookeeper=args.zookeeper, overrides=_overrides(args.override),
                           startup_timeout_s=args.startup_timeout,
                           zookeeper_nodes=args.zookeeper_nodes, hosts=hosts,
                           security=args.security)
    stop = threading.Event()
    up = False
    exporter = None
    prometheus = None

    def on_signal(signum, _frame):
        if not up:
            raise KeyboardInterrupt  # start() cleans up what it started
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"Starting a replog cluster in {cluster.data_dir}: {args.brokers} broker(s) with "
              f"{args.log_dirs_per_broker} log dir(s) each, {args.controllers} controller(s)"
              + (f", ZooKeeper at {args.zookeeper}" if args.zookeeper else "")
              + (f", a {args.zookeeper_nodes}-node ZooKeeper ensemble"
                 if args.zookeeper_nodes > 1 else "")
              + (f", security {args.security}" if args.security else ""), flush=True)
        cluster.start()
        up = True
        if args.export:
            exporter = _start_exporter(cluster, args.export, args.export_interval_ms)
        if args.prometheus:
            prometheus = _start_prometheus(cluster, args.prometheus_port)
        print(f"Bootstrap servers: {cluster.bootstrap_servers}")
        print(f"Kafka bootstrap servers: {cluster.kafka_bootstrap_servers}")
        print(f"ZooKeeper: {cluster.zookeeper_connect}")
        if cluster.zookeeper_ensemble is not None:
            print(f"ZooKeeper leader: member {cluster.zookeeper_leader()}; restart a member "
                  "with: replog zookeeper --config <its config_file in cluster.json>")
        if cluster.running_hosts is not None:
            _print_hosts(cluster)
        print(f"Active controller: {cluster.active_controller_id()}")
        if cluster.client_properties_path is not None:
            print(f"Admin client properties (User:admin): {cluster.client_properties_path}; "
                  f"pass --command-config {cluster.client_properties_path}")
        print(f"Cluster description: {cluster.cluster_json_path}")
        print(f"Logs: {cluster.data_dir / 'logs'}")
        print("Press Ctrl-C to stop.", flush=True)
        reported: set[str] = set()
        while not stop.wait(1.0):
            for h in [*cluster.controllers.values(), *cluster.brokers.values()]:
                if h.proc is not None and not h.is_running() and h.name not in reported:
                    reported.add(h.name)
                    print(f"{h.name} exited with code {h.returncode}; see {h.log_file}",
                          file=sys.stderr, flush=True)
        print("Stopping the cluster: brokers (controlled shutdown), controllers, ZooKeeper...",
              flush=True)
        # A second Ctrl-C while stopping is ignored: half-stopped clusters are worse.
        for s in old:
            signal.signal(s, signal.SIG_IGN)
        cluster.stop()
        print("Stopped.", flush=True)
        return 0
    finally:
        if prometheus is not None:
            prometheus.stop()
        if exporter is not None:  # after the cluster: the export ends with its shutdown
            _stop_exporter(exporter)
        if cluster._lock_fd is not None:  # interrupted or failed: nothing may outlive us
            cluster.stop(graceful=False)
        for s, h in old.items():
            signal.signal(s, h)


def _hosts_options(args):
    """--hosts and its rack options (harness/cluster_hosts.py), refused in one line before
    anything starts: without --hosts, when not root, or with bad values."""
    shaped = args.racks != 1 or args.inter_rack_latency_ms or args.inter_rack_loss_pct
    if not args.hosts:
        if shaped:
            raise ReplogError("--racks, --inter-rack-latency-ms and --inter-rack-loss-pct "
                              "need --hosts")
        return None
    from harness import hosts as hostlib
    from harness.cluster_hosts import HostsOptions
    why = hostlib.unavailable()
    if why:
        raise ReplogError(why)
    if args.zookeeper:
        raise ReplogError("--hosts starts ZooKeeper on hosts of its own; --zookeeper (one on "
                          "this machine's loopback) is not reachable from them")
    opts = HostsOptions(args.racks, args.inter_rack_latency_ms, args.inter_rack_loss_pct)
    opts.check()
    return opts


def _print_hosts(cluster: LocalCluster) -> None:
    plan = cluster.running_hosts.plan
    print(f"Hosts: {len(plan.hosts)} network namespaces on {plan.switch_netns}'s bridge, "
          f"this machine at {plan.gateway} ({plan.uplink})"
          + (f"; {plan.racks} racks, {plan.latency_ms:g} ms / {plan.loss_pct:g}% loss "
             "between racks (one way)" if plan.racks > 1 else ""))
    for h in plan.hosts:
        print(f"  {h.name:<16} {h.address:<15} {h.netns}" + (f"  {h.rack}" if h.rack else ""))


def _start_exporter(cluster: LocalCluster, out: str, interval_ms: int) -> subprocess.Popen:
    """``replog metrics export`` as its own process for the cluster's lifetime: a stalled
    scrape or a slow disk there never delays the supervisor (analytics/export.py)."""
    log = (cluster.data_dir / "logs" / "exporter.log").open("ab")
    proc = subprocess.Popen(
        [cluster.python, "-m", "admin.cli", "metrics", "export", "--cluster",
         str(cluster.data_dir), "--out", out, "--interval-ms", str(interval_ms)],
        env=cluster.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    log.close()
    print(f"Exporting metrics and events every {interval_ms} ms to {out}", flush=True)
    return proc


def _start_prometheus(cluster: LocalCluster, port: int):
    """Debian's Prometheus scraping every process in cluster.json, with the alert and recording
    rules of docker/prometheus/rules (harness/prometheus.py)."""
    from harness.prometheus import PrometheusServer
    server = PrometheusServer(cluster.cluster_json_path, cluster.data_dir / "prometheus",
                              port=port).start()
    print(f"Prometheus: {server.url} (alerts: {server.url}/alerts; log "
          f"{server.log_file})", flush=True)
    return server


def _stop_exporter(proc: subprocess.Popen) -> None:
    proc.terminate()  # SIGTERM: one last round, then the manifest is closed
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _down(args) -> int:
    if not stop_cluster_in(args.data_dir, timeout=args.timeout):
        print(f"No running replog cluster in {args.data_dir}.")
        return 0
    print(f"Stopped the replog cluster in {args.data_dir}.")
    return 0


def _certs(args) -> int:
    from harness.cluster_security import issue_client
    path = issue_client(args.data_dir, args.cn, args.out)
    print(f"Issued a client certificate for User:{args.cn}; client properties: {path}")
    return 0


def add_parsers(sub) -> None:
    cluster = sub.add_parser("cluster", help="run a local cluster of real processes")
    actions = cluster.add_subparsers(dest="cluster_command", metavar="ACTION")
    actions.required = True

    p = actions.add_parser("up", help="start ZooKeeper, controller(s) and brokers in the "
                                      "foreground until Ctrl-C")
    p.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    p.add_argument("--log-dirs-per-broker", type=int, default=2,
                   help="log dirs per broker (default 2)")
    p.add_argument("--controllers", type=int, default=1,
                   help="controller candidates (default 1)")
    p.add_argument("--data-dir", default="data", help="where logs, configs and data go "
                                                      "(default ./data)")
    p.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]",
                   help="use this ZooKeeper instead of starting one (chroot /replog unless "
                        "given)")
    p.add_argument("--zookeeper-nodes", type=int, choices=(1, 3, 5), default=1,
                   help="ZooKeeper servers to start: 1 (standalone, the default) or a 3- or "
                        "5-node ensemble, every member named in zookeeper.connect")
    p.add_argument("--override", action="append", metavar="KEY=VALUE",
                   help="property for every broker and controller, e.g. "
                        "min.insync.replicas=2 (repeatable)")
    p.add_argument("--startup-timeout", type=float, default=60.0,
                   help="seconds to wait for the cluster to come up (default 60)")
    p.add_argument("--export", metavar="DIR",
                   help="run 'replog metrics export' into DIR while the cluster is up")
    p.add_argument("--export-interval-ms", type=int, default=1000,
                   help="sampling interval of --export (default 1000)")
    p.add_argument("--prometheus", action="store_true",
                   help="start Prometheus (Debian's 'prometheus') scraping the cluster, with "
                        "replog's alert rules; prints its URL")
    p.add_argument("--prometheus-port", type=int, default=9090,
                   help="Prometheus's port on 127.0.0.1 with --prometheus (default 9090; "
                        "0: any free port)")
    p.add_argument("--hosts", action="store_true",
                   help="run every process in its own network namespace with its own address "
                        "on a bridge (as root; docs/hosts-and-racks.md)")
    p.add_argument("--racks", type=int, default=1,
                   help="with --hosts: spread brokers (broker.rack), ZooKeeper members and "
                        "controllers round-robin over this many racks (default 1)")
    p.add_argument("--inter-rack-latency-ms", type=float, default=0.0,
                   help="with --racks: one-way delay of every packet between racks")
    p.add_argument("--inter-rack-loss-pct", type=float, default=0.0,
                   help="with --racks: percent of packets between racks dropped")
    p.add_argument("--security", choices=("mtls",),
                   help="mtls: TLS with client certificates on every listener, a CA and "
                        "certificates under DATA_DIR/ssl, client.properties for the admin "
                        "principal beside cluster.json")
    p.set_defaults(func=_up)

    p = actions.add_parser("certs", help="issue a client certificate from a secure cluster's "
                                         "CA and write its client properties")
    p.add_argument("--data-dir", default="data", help="the cluster's data dir (default ./data)")
    p.add_argument("--cn", required=True, help="the certificate's common name; its principal "
                                               "is User:CN")
    p.add_argument("--out", metavar="FILE",
                   help="where to write the properties (default DATA_DIR/ssl/CN.properties)")
    p.set_defaults(func=_certs)

    p = actions.add_parser("down", help="stop a cluster started in the background")
    p.add_argument("--data-dir", default="data", help="the cluster's data dir (default ./data)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds to wait before killing what is left (default 120)")
    p.set_defaults(func=_down)

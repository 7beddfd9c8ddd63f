"""Registers the subcommands that live in their own modules.

Process subcommands (``broker``, ``controller``) load their config (Kafka property names,
``--override k=v``) and hand it to the process's ``run(config) -> int``. ``zookeeper`` runs one
ZooKeeper server (an ensemble member) from its ``zoo.cfg``: the process becomes the JVM itself.
"""

from __future__ import annotations

from admin import (
    acls_cmd,
    cluster_cmd,
    configs_cmd,
    consume_cmd,
    consumer_groups_cmd,
    delete_records_cmd,
    e2e_latency_cmd,
    elect_cmd,
    log_dirs_cmd,
    produce_cmd,
    reassign,
    topics_cmd,
    zk_security_migration,
)
from analytics import cli as analytics_cli
from chaos import cli as chaos_cli
from chaos import lab_cli


def _broker(config) -> int:
    from broker.server import run  # loaded only for the broker process
    return run(config)


def _controller(config) -> int:
    from controller.server import run  # loaded only for the controller process
    return run(config)


def _process(main, required: tuple[str, ...]):
    def run(args) -> int:
        from common.config import load_config
        config = load_config(args.config, args.override or [], required=required)
        return main(config)
    return run


def _zookeeper(args) -> int:
    """Replace this process with the ZooKeeper JVM for ``args.config`` (harness/zk_server.py's
    command line, the one ``replog cluster up`` runs): same pid, so signals and the exit status
    are the server's own, and a supervisor restarts a member as it restarts a broker."""
    import os

    from common.errors import ReplogError
    from harness.zk_server import ZooKeeperServerError, server_command
    try:
        cmd = server_command(args.config)
    except ZooKeeperServerError as e:
        raise ReplogError(str(e)) from None
    os.execv(cmd[0], cmd)
    return 1  # not reached: execv returns only by raising OSError


def register(sub) -> None:
    p = sub.add_parser("broker", help="run a broker process")
    p.add_argument("--config", required=True, help="server.properties-style file")
    p.add_argument("--override", action="append", metavar="KEY=VALUE",
                   help="override a property (repeatable)")
    p.set_defaults(func=_process(_broker, ("broker.id",)))

    p = sub.add_parser("controller", help="run a controller candidate process")
    p.add_argument("--config", required=True, help="properties file")
    p.add_argument("--override", action="append", metavar="KEY=VALUE",
                   help="override a property (repeatable)")
    p.set_defaults(func=_process(_controller, ("controller.id",)))

    p = sub.add_parser("zookeeper", help="run one ZooKeeper server (an ensemble member) in "
                                         "the foreground")
    p.add_argument("--config", required=True,
                   help="its zoo.cfg (cluster.json lists each member's config_file)")
    p.set_defaults(func=_zookeeper)

    # registered in the order `replog --help` lists them
    for module in (cluster_cmd, topics_cmd, produce_cmd, consume_cmd, e2e_latency_cmd,
                   analytics_cli, chaos_cli, configs_cmd, reassign, elect_cmd, log_dirs_cmd,
                   lab_cli, zk_security_migration, acls_cmd, delete_records_cmd,
                   consumer_groups_cmd):
        module.add_parsers(sub)

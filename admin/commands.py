"""Registers the subcommands that live in their own modules.

Process subcommands (``broker``, ``controller``) load their config (Kafka property names,
``--override k=v``) and hand it to the process's ``run(config) -> int``. ``zookeeper`` runs one
ZooKeeper server (an ensemble member) from its ``zoo.cfg``: the process becomes the JVM itself.
"""

from __future__ import annotations

import importlib


def _process(module: str, required: tuple[str, ...]):
    def run(args) -> int:
        from common.config import load_config
        config = load_config(args.config, args.override or [], required=required)
        return importlib.import_module(module).run(config)
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
    p.set_defaults(func=_process("broker.server", ("broker.id",)))

    p = sub.add_parser("controller", help="run a controller candidate process")
    p.add_argument("--config", required=True, help="properties file")
    p.add_argument("--override", action="append", metavar="KEY=VALUE",
                   help="override a property (repeatable)")
    p.set_defaults(func=_process("controller.server", ("controller.id",)))

    p = sub.add_parser("zookeeper", help="run one ZooKeeper server (an ensemble member) in "
                                         "the foreground")
    p.add_argument("--config", required=True,
                   help="its zoo.cfg (cluster.json lists each member's config_file)")
    p.set_defaults(func=_zookeeper)

    for name in ("admin.cluster_cmd", "admin.topics_cmd", "admin.produce_cmd",
                 "admin.consume_cmd", "admin.e2e_latency_cmd", "analytics.cli", "chaos.cli",
                 "admin.configs_cmd", "admin.reassign", "admin.elect_cmd",
                 "admin.log_dirs_cmd", "chaos.lab_cli", "admin.zk_security_migration",
                 "admin.acls_cmd", "admin.delete_records_cmd"):
        importlib.import_module(name).add_parsers(sub)

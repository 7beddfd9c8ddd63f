"""Registers the subcommands that live in their own modules.

Process subcommands (``broker``, ``controller``) load their config (Kafka property names,
``--override k=v``) and hand it to the process's ``run(config) -> int``.
"""

from __future__ import annotations

import importlib


def _process(module: str, required: tuple[str, ...]):
    def run(args) -> int:
        from common.config import load_config
        config = load_config(args.config, args.override or [], required=required)
        return importlib.import_module(module).run(config)
    return run


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

    for name in ("admin.cluster_cmd", "admin.topics_cmd", "admin.produce_cmd",
                 "admin.consume_cmd", "admin.e2e_latency_cmd", "analytics.cli", "chaos.cli",
                 "admin.configs_cmd", "admin.reassign_cmd", "admin.elect_cmd",
                 "admin.log_dirs_cmd"):
        importlib.import_module(name).add_parsers(sub)

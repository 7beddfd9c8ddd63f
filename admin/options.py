"""The options every client command shares, defined once: ``--bootstrap-server`` (any broker of
the cluster, Kafka's name and format) and ``--command-config`` (Kafka's client properties file,
for TLS). A command takes them as a parent parser - ``sub.add_parser(name,
parents=[options.client()])`` - and admin/cli.py gives ``--command-config`` to every other
command that opens a connection."""

from __future__ import annotations

import argparse

BOOTSTRAP_HELP = "any broker of the cluster (host:port[,host:port...])"


def add_command_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--command-config", metavar="FILE",
                   help="Kafka client properties (security.protocol=SSL, ssl.truststore.*, "
                        "ssl.keystore.*) for every connection this command opens")


def client(required: bool = True, bootstrap_help: str = BOOTSTRAP_HELP
           ) -> argparse.ArgumentParser:
    """The parent parser of a command that talks to a cluster: ``--bootstrap-server``
    (``required``: the command has no other way to find one) and ``--command-config``."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--bootstrap-server", required=required, metavar="HOST:PORT",
                   help=bootstrap_help)
    add_command_config(p)
    return p

"""The options every client command shares, defined once: ``--bootstrap-server`` (any broker of
the cluster, Kafka's name and format) and ``--command-config`` (Kafka's client properties file,
for TLS). A command takes them as a parent parser - ``sub.add_parser(name,
parents=[options.client()])`` - and admin/cli.py gives ``--command-config`` to every other
command that opens a connection. The command bodies share their shell too: ``run_async``
runs one on the event loop, ``admin_client`` opens the AdminClient it talks through."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

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


def run_async(main: Callable[[Any], Awaitable[int]]) -> Callable[[Any], int]:
    """The ``func`` of a command whose body is a coroutine: run it on the event loop
    (common/event_loop.py), its exit code returned."""
    def run(args: Any) -> int:
        from common import event_loop
        return event_loop.run(main(args))
    return run


@contextlib.asynccontextmanager
async def admin_client(args: Any, timeout_ms: int | None = None) -> AsyncIterator[Any]:
    """An AdminClient to ``--bootstrap-server`` (``timeout_ms``: its default.api.timeout.ms,
    else the client's default); a KafkaError raised while it is open becomes the command's
    one-line error (ReplogError), as Kafka's tools print the exception's message."""
    from client import AdminClient, KafkaError
    from common.errors import ReplogError
    kwargs = {} if timeout_ms is None else {"default_api_timeout_ms": timeout_ms}
    try:
        async with AdminClient(args.bootstrap_server, **kwargs) as admin:
            yield admin
    except KafkaError as e:
        raise ReplogError(str(e)) from None

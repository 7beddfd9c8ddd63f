"""The ``replog`` command: one entry point, Kafka's option names, one line per user error.

Each subcommand lives in its own module with ``add_parser(subparsers)`` registering it and
setting ``func``; a user mistake (bad option value, unknown topic, malformed JSON, dead broker)
is raised as ReplogError / ValueError / OSError and printed as a single ``Error: ...`` line
with exit status 1 — never a traceback.

Every subcommand takes ``--command-config FILE`` (Kafka's client properties, as kafka-topics
and the console clients take it): ``security.protocol=SSL`` with ``ssl.truststore.*`` and, for
mutual TLS, ``ssl.keystore.*`` makes every channel the command opens a TLS one. A file that
cannot be read or used is one ``Error:`` line.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

# gRPC's core logs a failed TLS handshake at INFO on stderr (a second line beside the one
# Error: line); its ERROR level keeps the one line (set before grpc is first imported).
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from admin import options
from common.errors import ReplogError  # after GRPC_VERBOSITY


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 1, like every other user error
        self.exit(1, f"Error: {message}\n")


def _dump_log(args) -> int:
    from admin.dump_log import dump
    dump([f.strip() for f in args.files.split(",") if f.strip()], sys.stdout,
         args.print_data_log, args.offsets_decoder)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="replog", description="replog: a replicated, partitioned commit log")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("dump-log", help="print the batches of segment files (kafka-dump-log)")
    p.add_argument("--files", required=True, help="comma-separated .log/.index/.timeindex files")
    p.add_argument("--print-data-log", action="store_true", help="print record keys and values")
    p.add_argument("--offsets-decoder", action="store_true",
                   help="decode __consumer_offsets keys and values (implies --print-data-log)")
    p.set_defaults(func=_dump_log)

    from admin import commands
    commands.register(sub)
    _add_command_config(parser)
    return parser


def _leaf_parsers(parser: argparse.ArgumentParser):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
    for action in subs:
        for p in dict.fromkeys(action.choices.values()):
            yield from _leaf_parsers(p)


def _add_command_config(parser: argparse.ArgumentParser) -> None:
    for p in _leaf_parsers(parser):
        if p is parser or any("--command-config" in a.option_strings for a in p._actions):
            continue
        options.add_command_config(p)


def _apply_command_config(path: str | None) -> None:
    if not path:
        return
    from client.transport import set_default_channel_factory
    from common.security.tls import client_channel_factory
    set_default_channel_factory(client_channel_factory(path))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # The client commands (produce, consume, e2e-latency and their perf modes) keep tens of
    # megabytes of records in flight as small objects; with CPython's default gen-0
    # threshold the collector re-scans them hundreds of times a second. Measured with
    # `replog produce` perf mode, acks=all RF 3, 64 KiB batches: 33.7 -> 40.1 MB/s.
    gc.freeze()  # what the imports allocated is never garbage
    gc.set_threshold(50_000, 20, 100)
    try:
        _apply_command_config(getattr(args, "command_config", None))
        return args.func(args) or 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except (ReplogError, ValueError, OSError) as e:
        print(f"Error: {e}{_tls_hint(e)}", file=sys.stderr)
        return 1


def _tls_hint(e: Exception) -> str:
    """The TLS-mismatch hint for a connection failure, however deep in the error's line gRPC's
    words are (client/errors.py)."""
    from client.errors import tls_mismatch_hint
    from client.transport import default_channel_factory
    from common.grpc_options import insecure_channel
    return tls_mismatch_hint(str(e), default_channel_factory() is not insecure_channel)


if __name__ == "__main__":
    sys.exit(main())

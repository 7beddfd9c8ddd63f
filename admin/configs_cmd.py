"""``replog configs`` — kafka-configs.sh for topics and brokers, over replog's gRPC.

Options, checks and output are Kafka's ConfigCommand (Kafka 3.x, ``--bootstrap-server`` mode):

    replog configs --bootstrap-server H:P --entity-type topics --entity-name orders \\
        --alter --add-config min.insync.replicas=2,retention.ms=86400000
    Completed updating config for topic orders.

    replog configs --bootstrap-server H:P --entity-type topics --entity-name orders --describe
    Dynamic configs for topic orders are:
      min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.insync.replicas=2, DEFAULT_CONFIG:min.insync.replicas=1}

``--entity-type brokers`` takes ``--entity-name <id>`` or ``--entity-default`` (cluster-wide).
``--add-config`` values holding commas go in square brackets
(``leader.replication.throttled.replicas=[0:1,1:2]``), as in Kafka. ``--describe`` shows the
dynamic configs, ``--describe --all`` every config. The brokers check keys and values
(IncrementalAlterConfigs); a refused change leaves the resource as it was.
"""  # noqa: E501

from __future__ import annotations

import re
import sys

from admin import options
from client import AdminClient, KafkaError
from client.admin_client import AlterConfigOp, ConfigEntry
from common.dynamic_config import DEFAULT_BROKER
from common.errors import ReplogError

ENTITY_TYPES = ("topics", "brokers")
DYNAMIC_SOURCE = {"topics": "DYNAMIC_TOPIC_CONFIG", "brokers": "DYNAMIC_BROKER_CONFIG"}
# Kafka's parseConfigsToBeAdded: split on commas outside square brackets.
_PAIR_SPLIT = re.compile(r",(?=[^\]]*(?:\[|$))")


# ---------------------------------------------------------------------------- parsing (pure)

def parse_add_config(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in _PAIR_SPLIT.split(text.strip()):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ReplogError('Invalid entity config: all configs to be added must be in the '
                              'format "key=val" or "key=[val1,val2]".')
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def parse_delete_config(text: str) -> list[str]:
    return [k.strip() for k in text.split(",") if k.strip()]


def check_args(args) -> tuple[str, str]:
    """(entity type, entity name; "" for the broker default), or a one-line ReplogError with
    Kafka's ConfigCommandOptions message."""
    if args.alter == args.describe:
        raise ReplogError("Command must include exactly one action: --describe, --alter")
    if args.entity_type is None:
        raise ReplogError("At least one --entity-type must be specified")
    if args.entity_type not in ENTITY_TYPES:
        raise ReplogError(f"Invalid entity type {args.entity_type}, the entity type must be "
                          f"one of {', '.join(ENTITY_TYPES)}")
    if args.entity_name is not None and args.entity_default:
        raise ReplogError("Only one of --entity-name or --entity-default may be specified")
    if args.entity_default and args.entity_type == "topics":
        raise ReplogError("--entity-default is not supported for topics")
    name = args.entity_name
    if args.entity_type == "brokers" and name is not None and not name.isdigit() \
            and name != DEFAULT_BROKER:
        raise ReplogError(f"The entity name for brokers must be a valid integer broker id, "
                          f"but it is: {name}")
    if args.alter:
        if name is None and not args.entity_default:
            raise ReplogError(f"--entity-name{'' if args.entity_type == 'topics' else ' or --entity-default'}"  # noqa: E501
                              f" must be specified with --alter of {args.entity_type}")
        if args.add_config is None and args.delete_config is None:
            raise ReplogError("At least one of --add-config or --delete-config must be "
                              "specified with --alter")
    if args.all and not args.describe:
        raise ReplogError("--all can only be used with --describe")
    if name == DEFAULT_BROKER or args.entity_default:
        name = ""
    return args.entity_type, name if name is not None else None


# ---------------------------------------------------------------------------- output (pure)

def _value(v: str | None) -> str:
    return "null" if v is None else v


def format_entry(e: ConfigEntry) -> str:
    synonyms = ", ".join(f"{s.source}:{s.name}={_value(s.value)}" for s in e.synonyms)
    return (f"  {e.name}={_value(e.value)} sensitive={'true' if e.sensitive else 'false'} "
            f"synonyms={{{synonyms}}}")


def describe_lines(entity_type: str, name: str, entries: list[ConfigEntry],
                   describe_all: bool) -> list[str]:
    """Kafka's describeResourceConfig output for one entity."""
    if entity_type == "brokers" and name == "":
        head = "Default configs for brokers in the cluster are:"
        wanted = "DYNAMIC_DEFAULT_BROKER_CONFIG"
    else:
        head = (f"{'All' if describe_all else 'Dynamic'} configs for "
                f"{entity_type[:-1]} {name} are:")
        wanted = DYNAMIC_SOURCE[entity_type]
    shown = sorted((e for e in entries if describe_all or e.source == wanted),
                   key=lambda e: e.name)
    return [head, *(format_entry(e) for e in shown)]


def completed_message(entity_type: str, name: str) -> str:
    if name == "":
        return f"Completed updating default config for {entity_type} in the cluster."
    return f"Completed updating config for {entity_type[:-1]} {name}."


# ---------------------------------------------------------------------------- commands

def _error(e: KafkaError) -> ReplogError:
    return ReplogError(e.message or e.name)


async def _one(admin: AdminClient, entity_type: str, name: str) -> list[ConfigEntry]:
    got = (await admin.describe_configs([(entity_type, name)]))[(entity_type, name)]
    if isinstance(got, KafkaError):
        raise _error(got)
    return got


async def _describe(admin: AdminClient, entity_type: str, name: str | None,
                    describe_all: bool) -> list[str]:
    if name is not None:
        names = [name]
    elif entity_type == "topics":
        names = await admin.list_topics()
    else:
        names = [str(b) for b in sorted(await admin.live_brokers())] + [""]
    lines: list[str] = []
    for n in names:
        lines += describe_lines(entity_type, n, await _one(admin, entity_type, n), describe_all)
    return lines


async def _alter(admin: AdminClient, entity_type: str, name: str, add: dict[str, str],
                 delete: list[str]) -> None:
    # Kafka's ConfigCommand refuses to delete what is not set, before sending anything.
    current = await _one(admin, entity_type, name)
    dynamic = {"topics": "DYNAMIC_TOPIC_CONFIG",
               "brokers": "DYNAMIC_DEFAULT_BROKER_CONFIG" if name == ""
               else "DYNAMIC_BROKER_CONFIG"}[entity_type]
    present = {e.name for e in current if e.source == dynamic}
    missing = [k for k in delete if k not in present]
    if missing:
        raise ReplogError(f"Invalid config(s): {','.join(missing)}")
    ops = [AlterConfigOp(k, "set", v) for k, v in add.items()] + \
          [AlterConfigOp(k, "delete") for k in delete]
    err = (await admin.incremental_alter_configs({(entity_type, name): ops}))[(entity_type, name)]
    if err is not None:
        raise _error(err)


async def _run(args) -> int:
    entity_type, name = check_args(args)
    add = parse_add_config(args.add_config) if args.add_config is not None else {}
    delete = parse_delete_config(args.delete_config) if args.delete_config is not None else []
    try:
        async with AdminClient(args.bootstrap_server,
                               default_api_timeout_ms=args.timeout_ms) as admin:
            if args.describe:
                lines = await _describe(admin, entity_type, name, args.all)
                sys.stdout.write("\n".join(lines) + "\n")
                return 0
            await _alter(admin, entity_type, name, add, delete)
    except KafkaError as e:
        raise _error(e) from None
    print(completed_message(entity_type, name))
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("configs", parents=[options.client()],
                       help="describe and alter topic and broker configs "
                            "(kafka-configs)")
    p.add_argument("--entity-type", help="topics or brokers")
    p.add_argument("--entity-name", help="topic name or broker id")
    p.add_argument("--entity-default", action="store_true",
                   help="the cluster-wide default of --entity-type brokers")
    p.add_argument("--describe", action="store_true", help="list the entity's configs")
    p.add_argument("--all", action="store_true",
                   help="with --describe: every config, not only the dynamic ones")
    p.add_argument("--alter", action="store_true", help="change the entity's configs")
    p.add_argument("--add-config", metavar="K=V[,K=V]",
                   help="configs to set; values with commas in square brackets: k=[a,b]")
    p.add_argument("--delete-config", metavar="K[,K]", help="configs to remove")
    p.add_argument("--timeout-ms", type=int, default=60000,
                   help="give up after this long (default.api.timeout.ms)")
    p.set_defaults(func=options.run_async(_run))

"""The options and JSON files of ``replog reassign`` (pure): every mistake a file or an option
can hold is found here, before the first change, as one ``Error:`` line (ReplogError). The
partition names (``TP``, ``tp_name``) the other modules speak in are re-exported here from
client/reassignment.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from client.reassignment import TP as TP
from client.reassignment import ids as ids
from client.reassignment import plural as plural
from client.reassignment import tp_name as tp_name
from common.errors import ReplogError

ANY_LOG_DIR = "any"
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# Which action each option may be used with (Kafka's validateAndParseArgs table).
PERMITTED = {
    "topics_to_move_json_file": ("generate",),
    "broker_list": ("generate",),
    "disable_rack_aware": ("generate",),
    "reassignment_json_file": ("execute", "verify", "cancel"),
    "additional": ("execute",),
    "throttle": ("execute",),
    "replica_alter_log_dirs_throttle": ("execute",),
    "timeout": ("execute", "cancel"),
    "preserve_throttles": ("verify", "cancel"),
}
REQUIRED = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}


def _opt(dest: str) -> str:
    return dest.replace("_", "-")


def names(tps: Iterable[TP]) -> str:
    return ",".join(tp_name(tp) for tp in sorted(tps))


def check_args(args) -> str:
    """The action, or a ReplogError with Kafka's message for a misused option."""
    flags = [a for a in ACTIONS if getattr(args, f"{a}_flag", False)]
    if args.action is not None and args.action not in flags:
        flags.append(args.action)
    if len(flags) != 1:
        raise ReplogError("Command must include exactly one action: --generate, --execute, "
                          "--verify, --cancel, --list")
    action = flags[0]
    for dest, allowed in PERMITTED.items():
        value = getattr(args, dest)
        if value not in (None, False) and action not in allowed:
            raise ReplogError(f'Option "[{_opt(dest)}]" can\'t be used with action '
                              f'"[{action}]"')
    for dest in REQUIRED[action]:
        if getattr(args, dest) is None:
            raise ReplogError(f'Missing required argument "[{_opt(dest)}]"')
    for dest in ("throttle", "replica_alter_log_dirs_throttle"):
        value = getattr(args, dest)
        if value is not None and value <= 0:
            raise ReplogError(f"--{_opt(dest)} must be a positive number of bytes per second, "
                              f"not {value}")
    return action


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b.strip()) for b in text.split(",")]
    except ValueError:
        raise ReplogError(f"--broker-list must be a comma-separated list of integer broker ids, "
                          f"not {text!r}") from None
    dups = _duplicates(brokers)
    if dups:
        raise ReplogError(f"Broker list contains duplicate entries: {ids(dups)}")
    return brokers


def _duplicates(xs: Sequence) -> list:
    seen: set = set()
    return sorted({x for x in xs if x in seen or seen.add(x)}, key=str)


INT32_MAX = 2**31 - 1  # partitions and broker ids are int32 in every request


def _load_json(text: str, what: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ReplogError(f"The {what} is not valid JSON: {e}") from None
    except RecursionError:
        raise ReplogError(f"The {what} is nested too deeply to be read") from None
    if not isinstance(data, dict):
        raise ReplogError(f"The {what} must be a JSON object, not {type(data).__name__}")
    version = data.get("version", 1)  # Kafka's EarliestVersion when absent
    if version != 1:
        raise ReplogError(f"Not supported version field value {version}")
    return data


def _list_field(obj: dict, key: str, where: str) -> list:
    value = obj.get(key)
    if value is None:
        raise ReplogError(f"Missing key {key} in {where}")
    if not isinstance(value, list):
        raise ReplogError(f"{key} in {where} must be a JSON array")
    return value


def _is_int(x) -> bool:
    """A JSON integer that fits an int32 id (a partition, a broker) and is not negative."""
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= INT32_MAX


def parse_topics_to_move(text: str) -> list[str]:
    """Kafka's parseTopicsData: ``{"version":1,"topics":[{"topic":"foo"}]}``."""
    data = _load_json(text, "topics-to-move JSON file")
    topics = []
    for i, entry in enumerate(_list_field(data, "topics", "the topics-to-move JSON file")):
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ReplogError(f"Entry {i} of topics must be an object with a string \"topic\"")
        topics.append(entry["topic"])
    if not topics:
        raise ReplogError("List of topics to reassign is empty")
    dups = _duplicates(topics)
    if dups:
        raise ReplogError(f"List of topics to reassign contains duplicate entries: "
                          f"{','.join(dups)}")
    return topics


def parse_reassignment(text: str) -> dict[TP, list[int]]:
    """Kafka's parsePartitionReassignmentData plus parseExecuteAssignmentArgs' checks:
    ``{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],
    "log_dirs":["any","any"]}]}`` -> {("foo", 0): [1, 2]}, in file order."""
    data = _load_json(text, "reassignment JSON file")
    entries = _list_field(data, "partitions", "the reassignment JSON file")
    parsed: list[tuple[TP, list[int]]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ReplogError(f"Entry {i} of partitions must be a JSON object")
        for key in ("topic", "partition", "replicas"):
            if key not in entry:
                raise ReplogError(f"Missing key {key} in entry {i} of partitions")
        topic, partition, replicas = entry["topic"], entry["partition"], entry["replicas"]
        if not isinstance(topic, str) or not topic:
            raise ReplogError(f"topic of entry {i} of partitions must be a non-empty string")
        if not _is_int(partition):
            raise ReplogError(f"partition of entry {i} of partitions must be a non-negative "
                              f"integer, not {json.dumps(partition)[:40]}")
        tp = (topic, partition)
        if not isinstance(replicas, list) or not all(_is_int(r) for r in replicas):
            raise ReplogError(f"replicas of partition {tp_name(tp)} must be a list of integer "
                              f"broker ids, not {json.dumps(replicas)[:60]}")
        log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
            raise ReplogError(f"log_dirs of partition {tp_name(tp)} must be a list of strings")
        if len(log_dirs) != len(replicas):
            raise ReplogError(f"Size of replicas list {replicas} is different from size of log "
                              f"dirs list {log_dirs} for partition {tp_name(tp)}")
        parsed.append((tp, replicas))
    if not parsed:
        raise ReplogError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in parsed):
        raise ReplogError("Partition replica list cannot be empty")
    dups = _duplicates([tp for tp, _ in parsed])
    if dups:
        raise ReplogError(f"Partition reassignment contains duplicate topic partitions: "
                          f"{names(dups)}")
    repeated = [f"{tp_name(tp)} contains multiple entries for {ids(_duplicates(replicas))}"
                for tp, replicas in parsed if _duplicates(replicas)]
    if repeated:
        raise ReplogError(f"Partition replica lists may contain only unique entries: "
                          f"{'. '.join(repeated)}")
    return dict(parsed)


def parse_log_dirs(text: str) -> dict[tuple[TP, int], str]:
    """The replicas a reassignment file places in a named log dir (KIP-113): (partition,
    broker) -> dir, in file order; "any" leaves the broker's choice. Call after
    ``parse_reassignment``, which validated the file."""
    out: dict[tuple[TP, int], str] = {}
    for entry in json.loads(text)["partitions"]:
        tp = (entry["topic"], entry["partition"])
        for broker, d in zip(entry["replicas"], entry.get("log_dirs", ())):
            if d != ANY_LOG_DIR:
                out[(tp, broker)] = d
    return out


def read_json_file(path: str) -> str:
    """A JSON file's text; ReplogError naming it if it is not UTF-8 (elect_cmd reads its
    --path-to-json-file here too)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError:
        raise ReplogError(f"{path} is not a UTF-8 JSON file") from None

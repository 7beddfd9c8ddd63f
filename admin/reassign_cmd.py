"""``replog reassign`` — kafka-reassign-partitions.sh, over replog's gRPC.

Options, JSON and messages are Kafka's ReassignPartitionsCommand (Kafka 3.x,
``--bootstrap-server`` mode); the action is a flag as in Kafka (``--generate``, ``--execute``,
``--verify``, ``--cancel``, ``--list``) or, equivalently, a positional word
(``replog reassign execute ...``):

    replog reassign --bootstrap-server H:P --generate --topics-to-move-json-file topics.json \\
        --broker-list 1,2,3
    replog reassign --bootstrap-server H:P --execute --reassignment-json-file plan.json \\
        [--throttle 1048576] [--additional]
    replog reassign --bootstrap-server H:P --verify --reassignment-json-file plan.json
    replog reassign --bootstrap-server H:P --cancel --reassignment-json-file plan.json
    replog reassign --bootstrap-server H:P --list

Everything a file or an option can get wrong (malformed JSON, missing fields, duplicate
partitions or replicas, an unknown topic or partition, a broker that is not alive) is checked
before the first change, and reported as one ``Error:`` line with exit status 1. Throttles are
set as Kafka's tool sets them, through IncrementalAlterConfigs (broker
``*.replication.throttled.rate``, topic ``*.replication.throttled.replicas``); if the controller
then refuses the reassignment, the throttle configs are put back as they were, so a refused
``--execute`` changes nothing (Kafka's tool leaves them set). ``--verify`` adds a progress line
per adding replica (log end offset and bytes against the leader's), which Kafka's tool does not
print.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from client import AdminClient, KafkaError, TopicInfo, UnknownTopicError
from client.admin_client import AlterConfigOp, PartitionReassignment
from common import event_loop
from common.assignment import AssignmentError, BrokerMetadata, assign_replicas
from common.errors import ErrorCode, ReplogError

TP = tuple[str, int]
ANY_LOG_DIR = "any"
DEFAULT_TIMEOUT_MS = 10000
# A broker that does not answer within this long leaves its progress unknown (a stalled
# target is when --verify matters most, so it must not hang on it).
PROGRESS_TIMEOUT_S = 5.0  # Kafka's --timeout default
ACTIONS = ("generate", "execute", "verify", "cancel", "list")

LEADER_THROTTLE_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLE_RATE = "follower.replication.throttled.rate"
LOG_DIR_THROTTLE_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
# Kafka's BROKER_LEVEL_THROTTLES / TOPIC_LEVEL_THROTTLES: what --verify and --cancel clear.
BROKER_LEVEL_THROTTLES = (LEADER_THROTTLE_RATE, FOLLOWER_THROTTLE_RATE, LOG_DIR_THROTTLE_RATE)
TOPIC_LEVEL_THROTTLES = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)

CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "Cannot execute because there is an existing partition assignment. Use --additional to "
    "override this and create a new partition assignment in addition to the existing one.")
VERIFY_PERIODICALLY = ("Warning: You must run --verify periodically, until the reassignment "
                       "completes, to ensure the throttle is removed.")

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


def tp_name(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


def _ids(xs: Iterable[int]) -> str:
    return ",".join(str(x) for x in xs)


def _names(tps: Iterable[TP]) -> str:
    return ",".join(tp_name(tp) for tp in sorted(tps))


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


# ---------------------------------------------------------------------------- arguments (pure)

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
        raise ReplogError(f"Broker list contains duplicate entries: {_ids(dups)}")
    return brokers


def _duplicates(xs: Sequence) -> list:
    seen: set = set()
    return sorted({x for x in xs if x in seen or seen.add(x)}, key=str)


# ---------------------------------------------------------------------------- JSON (pure)

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
                          f"{_names(dups)}")
    repeated = [f"{tp_name(tp)} contains multiple entries for {_ids(_duplicates(replicas))}"
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


def replica_name(tp: TP, broker: int) -> str:
    """Kafka's TopicPartitionReplica: ``<topic>-<partition>-<broker>``."""
    return f"{tp_name(tp)}-{broker}"


def log_dir_moves_message(done: Iterable[tuple[TP, int]]) -> str:
    done = sorted(done)
    return (f"Successfully started log directory move{_plural(len(done))} for: "
            f"{','.join(replica_name(tp, b) for tp, b in done)}")


def reassignment_json(parts: Mapping[TP, Sequence[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions sorted by topic then number."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(parts[(t, p)]),
         "log_dirs": [ANY_LOG_DIR] * len(parts[(t, p)])} for t, p in sorted(parts)]},
        separators=(",", ":"))


# ---------------------------------------------------------------------------- generate (pure)

def propose_assignment(current: Mapping[TP, Sequence[int]], brokers: Iterable[BrokerMetadata],
                       rng: random.Random | None = None) -> dict[TP, list[int]]:
    """Kafka's calculateAssignment: each topic's partitions laid out afresh over ``brokers``
    by AdminUtils.assignReplicasToBrokers, keeping the topic's replication factor."""
    brokers = list(brokers)
    by_topic: dict[str, list[int]] = {}
    for t, p in current:
        by_topic.setdefault(t, []).append(p)
    out: dict[TP, list[int]] = {}
    for topic, parts in sorted(by_topic.items()):
        rf = len(current[(topic, min(parts))])
        try:
            assigned = assign_replicas(brokers, len(parts), rf, rng=rng)
        except AssignmentError as e:
            hint = (" Add --disable-rack-aware in command line to make replica assignment "
                    "without rack information." if "rack information" in e.message else "")
            raise ReplogError(f"{e.message}{hint}") from None
        for p, replicas in assigned.items():
            out[(topic, p)] = replicas
    return out


def generate_output(current: Mapping[TP, Sequence[int]],
                    proposed: Mapping[TP, Sequence[int]]) -> str:
    return (f"Current partition replica assignment\n{reassignment_json(current)}\n\n"
            f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}\n")


# ---------------------------------------------------------------------------- execute (pure)

def rollback_output(current: Mapping[TP, Sequence[int]]) -> str:
    """Kafka's currentPartitionReplicaAssignmentToString."""
    return (f"Current partition replica assignment\n\n{reassignment_json(current)}\n\n"
            f"Save this to use as the --reassignment-json-file option during rollback\n")


def started_message(parts: Iterable[TP]) -> str:
    parts = list(parts)
    return f"Successfully started partition reassignment{_plural(len(parts))} for {_names(parts)}"


@dataclass(frozen=True)
class PartitionMove:
    sources: frozenset[int]
    destinations: frozenset[int]


def proposed_moves(ongoing: Mapping[TP, PartitionReassignment],
                   proposed: Mapping[TP, Sequence[int]],
                   current: Mapping[TP, Sequence[int]]) -> dict[TP, PartitionMove]:
    """Kafka's calculateProposedMoveMap: the moves already running (sources = replicas minus
    adding, destinations = adding) overlaid with the proposed ones, whose sources are the
    running move's sources if the partition is moving already, else its current replicas."""
    moves = {tp: PartitionMove(frozenset(r.replicas) - frozenset(r.adding_replicas),
                               frozenset(r.adding_replicas)) for tp, r in ongoing.items()}
    for tp, replicas in proposed.items():
        sources = moves[tp].sources if tp in moves else frozenset(current[tp])
        moves[tp] = PartitionMove(sources, frozenset(replicas) - sources)
    return moves


def throttled_replicas(moves: Mapping[TP, PartitionMove]
                       ) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Kafka's calculateLeaderThrottles / calculateFollowerThrottles: per topic, the
    "partition:broker" pairs of every source (leaders serve the move) and of every destination
    that is not also a source (followers fetch it)."""
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    for (topic, p), move in moves.items():
        leader.setdefault(topic, set()).update(f"{p}:{b}" for b in move.sources)
        follower.setdefault(topic, set()).update(
            f"{p}:{b}" for b in move.destinations - move.sources)
    return leader, follower


def reassigning_brokers(moves: Mapping[TP, PartitionMove]) -> set[int]:
    """Kafka's calculateReassigningBrokers: every source and destination."""
    return {b for m in moves.values() for b in m.sources | m.destinations}


def _pair_key(pair: str) -> tuple[int, int]:
    p, _, b = pair.partition(":")
    ok = p.isascii() and p.isdigit() and b.isascii() and b.isdigit()
    return (int(p), int(b)) if ok else (-1, -1)


def merge_throttled(existing: str | None, pairs: Iterable[str]) -> str:
    """The throttled-replicas value after adding ``pairs`` to what the topic has: a "*"
    (every replica) stays "*"; otherwise the union, in partition then broker order."""
    old = [x.strip() for x in (existing or "").split(",") if x.strip()]
    if "*" in old:
        return "*"
    return ",".join(sorted(set(old) | set(pairs), key=_pair_key))


# ---------------------------------------------------------------------------- verify / list (pure)

@dataclass(frozen=True)
class ReassignmentState:
    """Kafka's PartitionReassignmentState."""

    current_replicas: tuple[int, ...]
    target_replicas: tuple[int, ...]
    done: bool


def reassignment_states(targets: Mapping[TP, Sequence[int]],
                        ongoing: Mapping[TP, PartitionReassignment],
                        current: Mapping[TP, Sequence[int]]) -> dict[TP, ReassignmentState]:
    """Kafka's findPartitionReassignmentStates."""
    return {tp: ReassignmentState(tuple(ongoing[tp].replicas) if tp in ongoing
                                  else tuple(current[tp]), tuple(target), tp not in ongoing)
            for tp, target in targets.items()}


def verify_lines(states: Mapping[TP, ReassignmentState],
                 progress: Mapping[TP, list[str]] | None = None) -> list[str]:
    """Kafka's partitionReassignmentStatesToString; ``progress``: lines to print under a
    partition still in progress (replog's addition)."""
    lines = ["Status of partition reassignment:"]
    for tp in sorted(states):
        s = states[tp]
        if not s.done:
            lines.append(f"Reassignment of partition {tp_name(tp)} is still in progress.")
            lines += (progress or {}).get(tp, [])
        elif s.current_replicas == s.target_replicas:
            lines.append(f"Reassignment of partition {tp_name(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp_name(tp)}, but "
                         f"replica set is {_ids(s.current_replicas)} rather than "
                         f"{_ids(s.target_replicas)}.")
    return lines


def progress_line(broker: int, leader: int, leo: int | KafkaError | None,
                  leader_leo: int | KafkaError | None, size: int | None,
                  leader_size: int | None) -> str:
    """One adding replica's catch-up: its log end offset and bytes against the leader's."""
    head = f"  Replica {broker}:"
    if leader < 0:
        return f"{head} no leader to copy from yet."
    if leo is None or isinstance(leo, KafkaError):
        why = "not created yet" if leo is None or \
            leo.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else str(leo)
        return f"{head} {why} (leader {leader})."
    offsets = (f"log end offset {leo} of {leader_leo}" if isinstance(leader_leo, int)
               else f"log end offset {leo}")
    if size is None or leader_size is None:
        return f"{head} {offsets} (leader {leader})."
    pct = 100.0 if leader_size <= 0 else min(100.0, 100.0 * size / leader_size)
    return f"{head} {offsets}, {size} of {leader_size} bytes ({pct:.1f}%) (leader {leader})."


def list_lines(reassignments: Mapping[TP, PartitionReassignment]) -> list[str]:
    """Kafka's listReassignments."""
    if not reassignments:
        return ["No partition reassignments found."]
    return ["Current partition reassignments:"] + [
        f"{tp_name(tp)}: replicas: {_ids(r.replicas)}. adding: {_ids(r.adding_replicas)}. "
        f"removing: {_ids(r.removing_replicas)}." for tp, r in sorted(reassignments.items())]


@dataclass(frozen=True)
class LogDirMove:
    """Kafka's LogDirMoveState of one replica named in the file with a log dir (KIP-113):
    ``kind`` is "completed", "active" (a future replica in ``future``), "cancelled" (no move
    under way, the replica is in ``current``), "missing" (no such replica on the broker) or
    "missing_dir" (not found, and a log dir of the broker is offline)."""

    kind: str
    target: str
    current: str | None = None
    future: str | None = None

    @property
    def done(self) -> bool:
        return self.kind != "active"


def log_dir_move(target: str, current: str | None, future: str | None,
                 some_dir_offline: bool) -> LogDirMove:
    """Kafka's findLogDirMoveStates for one replica, from DescribeLogDirs' answer."""
    if current is None:
        return LogDirMove("missing_dir" if some_dir_offline else "missing", target)
    if future is not None:
        return LogDirMove("active", target, current, future)
    if current == target:
        return LogDirMove("completed", target, current)
    return LogDirMove("cancelled", target, current)


def log_dir_move_lines(states: Mapping[tuple[TP, int], LogDirMove]) -> list[str]:
    """Kafka's replicaMoveStatesToString."""
    lines = ["Status of replica reassignment:"]
    for (tp, b), s in sorted(states.items()):
        replica, part = replica_name(tp, b), tp_name(tp)
        if s.kind == "missing_dir":
            lines.append(f"Partition {part} is not found in any live log dir on broker {b}. "
                         f"There is likely an offline log directory on the broker.")
        elif s.kind == "missing":
            lines.append(f"Partition {part} cannot be found in any live log directory on "
                         f"broker {b}.")
        elif s.kind == "active" and s.future == s.target:
            lines.append(f"Reassignment of replica {replica} is still in progress.")
        elif s.kind == "active":
            lines.append(f"Partition {part} on broker {b} is being moved to log dir "
                         f"{s.future} instead of {s.target}.")
        elif s.kind == "cancelled":
            lines.append(f"Partition {part} on broker {b} is not being moved from log dir "
                         f"{s.current} to {s.target}.")
        else:
            lines.append(f"Reassignment of replica {replica} completed successfully.")
    return lines


def cancelled_moves_message(replicas: Iterable[tuple[TP, int]]) -> str:
    replicas = sorted(replicas)
    if not replicas:
        return "None of the specified partition moves are active."
    return (f"Successfully cancelled log directory move{_plural(len(replicas))} for: "
            f"{','.join(replica_name(tp, b) for tp, b in replicas)}")


def cancelled_message(parts: Iterable[TP]) -> str:
    parts = list(parts)
    if not parts:
        return "None of the specified partition reassignments are active."
    return (f"Successfully cancelled partition reassignment{_plural(len(parts))} for: "
            f"{_names(parts)}")


def result_error_lines(results: Mapping[TP, KafkaError | None]) -> list[str]:
    """One line per refused partition: the partitions at fault first, then those the
    controller left alone because the request was refused whole (INVALID_REQUEST)."""
    failed = [(tp, e) for tp, e in results.items() if e is not None]
    failed.sort(key=lambda x: (x[1].error_code == ErrorCode.INVALID_REQUEST, x[0]))
    return [f"Error: {tp_name(tp)}: {e}" for tp, e in failed]


# ---------------------------------------------------------------------------- cluster reads

async def _topics(admin: AdminClient, names: Iterable[str]) -> dict[str, TopicInfo]:
    try:
        return await admin.describe_topics(sorted(set(names)), include_configs=False)
    except UnknownTopicError as e:
        raise ReplogError(e.message) from None


async def _current_replicas(admin: AdminClient, parts: Iterable[TP]) -> dict[TP, list[int]]:
    """Kafka's getReplicaAssignmentForPartitions; an unknown topic or partition is an error."""
    parts = list(parts)
    topics = await _topics(admin, (t for t, _ in parts))
    out: dict[TP, list[int]] = {}
    for tp in parts:
        info = topics[tp[0]].partition(tp[1])
        if info is None:
            raise ReplogError(f"Unable to find partition: {tp_name(tp)}")
        out[tp] = list(info.replicas)
    return out


async def _verify_brokers(admin: AdminClient, brokers: Iterable[int]) -> None:
    """Kafka's verifyBrokerIds: every broker named must be a live (registered) one."""
    live = await admin.live_brokers()
    for b in sorted(set(brokers)):
        if b not in live:
            raise ReplogError(f"Unknown broker id {b} (live brokers: {_ids(sorted(live))})")


def _fail(results: Mapping[TP, KafkaError | None]) -> bool:
    lines = result_error_lines(results)
    for line in lines:
        print(line, file=sys.stderr)
    return bool(lines)


# ---------------------------------------------------------------------------- throttles

async def _dynamic_values(admin: AdminClient, resources: list[tuple[str, str]],
                          keys: Iterable[str]) -> dict[tuple[str, str], dict[str, str]]:
    """The dynamic (per-entity) values of ``keys`` each resource has now."""
    keys = set(keys)
    got = await admin.describe_configs(resources, include_synonyms=False)
    out: dict[tuple[str, str], dict[str, str]] = {}
    for res in resources:
        entries = got[res]
        if isinstance(entries, KafkaError):
            raise ReplogError(f"{res[0][:-1]} {res[1]}: {entries}")
        dynamic = "DYNAMIC_TOPIC_CONFIG" if res[0] == "topics" else "DYNAMIC_BROKER_CONFIG"
        out[res] = {e.name: e.value for e in entries
                    if e.name in keys and e.source == dynamic and e.value is not None}
    return out


async def _alter(admin: AdminClient, ops: Mapping[tuple[str, str], list[AlterConfigOp]]) -> None:
    if not ops:
        return
    errors = {res: e for res, e in (await admin.incremental_alter_configs(ops)).items() if e}
    if errors:
        raise ReplogError("; ".join(f"{t[:-1]} {n}: {e}" for (t, n), e in sorted(errors.items())))


def _restore_ops(before: Mapping[tuple[str, str], dict[str, str]], keys: Iterable[str]
                 ) -> dict[tuple[str, str], list[AlterConfigOp]]:
    return {res: [AlterConfigOp(k, "set", old[k]) if k in old else AlterConfigOp(k, "delete")
                  for k in keys] for res, old in before.items()}


async def _set_throttles(admin: AdminClient, moves: Mapping[TP, PartitionMove],
                         inter_broker: int | None, log_dir: int | None
                         ) -> dict[tuple[str, str], list[AlterConfigOp]]:
    """Kafka's modifyReassignmentThrottle / modifyLogDirThrottle; returns the operations that
    put every touched config back as it was."""
    brokers = sorted(reassigning_brokers(moves))
    leader, follower = throttled_replicas(moves)
    topic_res = [("topics", t) for t in sorted(leader)] if inter_broker else []
    broker_res = [("brokers", str(b)) for b in brokers]
    broker_keys = ([LEADER_THROTTLE_RATE, FOLLOWER_THROTTLE_RATE] if inter_broker else []) + \
        ([LOG_DIR_THROTTLE_RATE] if log_dir else [])
    before_topics = await _dynamic_values(admin, topic_res, TOPIC_LEVEL_THROTTLES)
    before_brokers = await _dynamic_values(admin, broker_res, broker_keys)
    undo = {**_restore_ops(before_topics, TOPIC_LEVEL_THROTTLES),
            **_restore_ops(before_brokers, broker_keys)}
    try:
        if inter_broker:
            await _alter(admin, {res: [
                AlterConfigOp(LEADER_THROTTLED_REPLICAS, "set", merge_throttled(
                    before_topics[res].get(LEADER_THROTTLED_REPLICAS), leader[res[1]])),
                AlterConfigOp(FOLLOWER_THROTTLED_REPLICAS, "set", merge_throttled(
                    before_topics[res].get(FOLLOWER_THROTTLED_REPLICAS), follower[res[1]]))]
                for res in topic_res})
        rates = {LEADER_THROTTLE_RATE: inter_broker, FOLLOWER_THROTTLE_RATE: inter_broker,
                 LOG_DIR_THROTTLE_RATE: log_dir}
        await _alter(admin, {res: [AlterConfigOp(k, "set", str(rates[k])) for k in broker_keys]
                             for res in broker_res})
    except BaseException:
        await _alter(admin, undo)
        raise
    if inter_broker:
        print(f"The inter-broker throttle limit was set to {inter_broker} B/s")
    if log_dir:
        print(f"The replica-alter-dir throttle limit was set to {log_dir} B/s")
    return undo


async def _clear_all_throttles(admin: AdminClient, targets: Mapping[TP, Sequence[int]]) -> None:
    """Kafka's clearAllThrottles: every live broker and every broker of the targets (a dead
    one has no configs to clear through a broker), and every topic of the targets."""
    live = await admin.live_brokers()
    brokers = sorted(b for b in set(live) | {b for r in targets.values() for b in r} if b in live)
    print(f"Clearing broker-level throttles on broker{_plural(len(brokers))} {_ids(brokers)}")
    await _alter(admin, {("brokers", str(b)): [AlterConfigOp(k, "delete")
                                                for k in BROKER_LEVEL_THROTTLES]
                         for b in brokers})
    topics = sorted({t for t, _ in targets})
    print(f"Clearing topic-level throttles on topic{_plural(len(topics))} {','.join(topics)}")
    await _alter(admin, {("topics", t): [AlterConfigOp(k, "delete")
                                         for k in TOPIC_LEVEL_THROTTLES] for t in topics})


# ---------------------------------------------------------------------------- actions

def _timeout(args) -> int:
    return DEFAULT_TIMEOUT_MS if args.timeout is None else args.timeout


def read_json_file(path: str) -> str:
    """A JSON file's text; ReplogError naming it if it is not UTF-8 (elect_cmd reads its
    --path-to-json-file here too)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError:
        raise ReplogError(f"{path} is not a UTF-8 JSON file") from None


async def _generate(admin: AdminClient, args) -> int:
    topics = parse_topics_to_move(read_json_file(args.topics_to_move_json_file))
    brokers = parse_broker_list(args.broker_list)
    live = await admin.live_brokers()
    await _verify_brokers(admin, brokers)
    infos = await _topics(admin, topics)
    current = {(t, p.partition): list(p.replicas) for t in topics for p in infos[t].partitions}
    metas = [BrokerMetadata(b, None if args.disable_rack_aware else live[b].rack)
             for b in brokers]
    sys.stdout.write(generate_output(current, propose_assignment(current, metas)))
    return 0


async def _execute(admin: AdminClient, args) -> int:
    proposed = parse_reassignment(read_json_file(args.reassignment_json_file))
    await _verify_brokers(admin, (b for r in proposed.values() for b in r))
    current = await _current_replicas(admin, proposed)
    ongoing = await admin.list_partition_reassignments()
    if ongoing and not args.additional:
        raise ReplogError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
    sys.stdout.write(rollback_output(current))
    undo: dict = {}
    if args.throttle or args.replica_alter_log_dirs_throttle:
        print(VERIFY_PERIODICALLY)
        undo = await _set_throttles(admin, proposed_moves(ongoing, proposed, current),
                                    args.throttle, args.replica_alter_log_dirs_throttle)
    # A partition whose replicas stay as they are (and is not moving) has nothing for the
    # controller to reassign - it refuses the same replicas - so it is not sent: the plan
    # `--generate` prints lists every partition of the topics, moved or not, and Kafka's
    # controller completes such a partition as a no-op. If it names log dirs it only moves
    # between log dirs (KIP-113): AlterReplicaLogDirs below.
    moves = parse_log_dirs(read_json_file(args.reassignment_json_file))
    unchanged = {tp for tp, r in proposed.items()
                 if list(r) == current[tp] and tp not in ongoing}
    reassigned = {tp: r for tp, r in proposed.items() if tp not in unchanged}
    results = await admin.alter_partition_reassignments(
        reassigned, timeout_ms=_timeout(args)) if reassigned else {}
    if any(e is not None for e in results.values()):
        # The controller refused the request (whole, so nothing moves): the throttles set
        # for it would only slow unrelated traffic, so put them back.
        await _alter(admin, undo)
        if undo:
            print("The reassignment was refused; the throttles set for it were removed.")
        _fail(results)
        return 1
    if reassigned or not moves:
        print(started_message(proposed if not moves else reassigned))
    if moves:
        await _execute_log_dir_moves(admin, moves, _timeout(args))
    return 0


# Not created on its broker yet (a replica the reassignment adds): the broker remembers the dir
# for its creation, and the move counts as started once the replica exists.
_REPLICA_PENDING = (ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
LOG_DIR_MOVE_RETRY_S = 0.1  # Kafka's executeMoves sleeps 100 ms between attempts


async def _execute_log_dir_moves(admin: AdminClient, moves: Mapping[tuple[TP, int], str],
                                 timeout_ms: int) -> None:
    """Kafka's executeMoves: AlterReplicaLogDirs to each broker after the reassignment has
    started, again for the replicas not created yet, until ``timeout_ms``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    pending = dict(moves)
    while True:
        by_broker: dict[int, dict[TP, str]] = {}
        for (tp, b), d in pending.items():
            by_broker.setdefault(b, {})[tp] = d
        done = []
        for b, parts in sorted(by_broker.items()):
            try:
                results = await admin.alter_replica_log_dirs(b, parts)
            except KafkaError as e:
                if e.error_code != ErrorCode.BROKER_NOT_AVAILABLE:
                    raise
                continue  # not alive yet: retried until the timeout
            for tp, err in results.items():
                if err is None:
                    done.append((tp, b))
                elif err.error_code not in _REPLICA_PENDING:
                    raise ReplogError(f"Failed to alter dir for {replica_name(tp, b)}: {err}")
        if done:
            print(log_dir_moves_message(done))
        for key in done:
            pending.pop(key, None)
        if not pending:
            return
        if loop.time() >= deadline:
            raise ReplogError(f"Timed out before log directory move{_plural(len(pending))} "
                              f"could be started for: "
                              f"{','.join(replica_name(tp, b) for tp, b in sorted(pending))}")
        await asyncio.sleep(LOG_DIR_MOVE_RETRY_S)  # a retry backoff, as Kafka's


async def _progress(admin: AdminClient, ongoing: Mapping[TP, PartitionReassignment]
                    ) -> dict[TP, list[str]]:
    """Per partition in progress, one line per adding replica. Best effort: a broker that
    does not answer makes its numbers unknown, never fails --verify."""
    if not ongoing:
        return {}
    infos = await _topics(admin, (t for t, _ in ongoing))
    leaders = {tp: (infos[tp[0]].partition(tp[1]).leader
                    if infos[tp[0]].partition(tp[1]) is not None else -1) for tp in ongoing}
    wanted: dict[int, set[TP]] = {}
    for tp, r in ongoing.items():
        for b in [*r.adding_replicas, leaders[tp]]:
            if b >= 0:
                wanted.setdefault(b, set()).add(tp)

    async def ask(b: int, tps: set[TP]):
        try:
            return b, *await asyncio.wait_for(asyncio.gather(
                admin.replica_log_end_offsets(b, tps), admin.replica_sizes(b, tps)),
                PROGRESS_TIMEOUT_S)
        except (TimeoutError, KafkaError):
            return b, {}, {}

    answers = {b: (leos, sizes) for b, leos, sizes in
               await asyncio.gather(*(ask(b, tps) for b, tps in sorted(wanted.items())))}
    out: dict[TP, list[str]] = {}
    for tp, r in ongoing.items():
        leader = leaders[tp]
        lleos, lsizes = answers.get(leader, ({}, {}))
        for b in r.adding_replicas:
            leos, sizes = answers.get(b, ({}, {}))
            out.setdefault(tp, []).append(progress_line(
                b, leader, leos.get(tp), lleos.get(tp), sizes.get(tp), lsizes.get(tp)))
    return out


async def _verify(admin: AdminClient, args) -> int:
    targets = parse_reassignment(read_json_file(args.reassignment_json_file))
    current = await _current_replicas(admin, targets)
    ongoing = await admin.list_partition_reassignments(targets)
    ongoing = {tp: r for tp, r in ongoing.items() if tp in targets}
    states = reassignment_states(targets, ongoing, current)
    sys.stdout.write("\n".join(verify_lines(states, await _progress(admin, ongoing))) + "\n")
    moves = await _log_dir_moves(admin, parse_log_dirs(read_json_file(args.reassignment_json_file)))
    if moves:
        sys.stdout.write("\n" + "\n".join(log_dir_move_lines(moves)) + "\n")
    moving = any(not m.done for m in moves.values())
    if not ongoing and not moving and not args.preserve_throttles:
        # Kafka clears every throttle once nothing of the file is moving: it cannot know
        # which source brokers earlier moves throttled.
        await _clear_all_throttles(admin, targets)
    return 0


async def _cancel(admin: AdminClient, args) -> int:
    targets = parse_reassignment(read_json_file(args.reassignment_json_file))
    await _current_replicas(admin, targets)  # an unknown topic or partition is an error
    ongoing = await admin.list_partition_reassignments(targets)
    # Kafka's cancelAssignment cancels only what is running, so a partition that finished
    # meanwhile is not an error.
    running = sorted(tp for tp, r in ongoing.items()
                     if tp in targets and (r.adding_replicas or r.removing_replicas))
    if running:
        results = await admin.alter_partition_reassignments(
            {tp: None for tp in running}, timeout_ms=_timeout(args))
        if _fail(results):
            return 1
    print(cancelled_message(running))
    # Kafka's cancelAssignment: a log dir move under way is cancelled by asking for the
    # replica's current dir (the broker drops the future replica).
    moves = await _log_dir_moves(admin, parse_log_dirs(read_json_file(args.reassignment_json_file)))
    active = {r: m.current for r, m in moves.items() if m.kind == "active"}
    failed = False
    for b in sorted({b for _, b in active}):
        results = await admin.alter_replica_log_dirs(
            b, {tp: d for (tp, rb), d in active.items() if rb == b})
        for tp, e in sorted(results.items()):
            if e is not None:
                print(f"Error cancelling the log directory move of {replica_name(tp, b)}: "
                      f"{e}", file=sys.stderr)
                failed = True
    if moves:
        print(cancelled_moves_message(active))
    if failed:
        return 1
    if not args.preserve_throttles:
        await _clear_all_throttles(admin, targets)
    return 0


async def _log_dir_moves(admin: AdminClient, targets: Mapping[tuple[TP, int], str]
                         ) -> dict[tuple[TP, int], LogDirMove]:
    """The state of each replica move the file names (DescribeLogDirs of its brokers)."""
    if not targets:
        return {}
    brokers = sorted({b for _, b in targets})
    live = await admin.live_brokers()
    answers = await admin.describe_log_dirs([b for b in brokers if b in live])
    out: dict[tuple[TP, int], LogDirMove] = {}
    for (tp, b), target in targets.items():
        current = future = None
        offline = b not in answers
        for d in answers[b].results if b in answers else ():
            offline |= d.error_code != 0
            for t in d.topics:
                for p in t.partitions:
                    if (t.topic, p.partition) == tp:
                        if p.is_future:
                            future = d.log_dir
                        else:
                            current = d.log_dir
        out[(tp, b)] = log_dir_move(target, current, future, offline)
    return out


async def _list(admin: AdminClient, args) -> int:
    sys.stdout.write("\n".join(list_lines(await admin.list_partition_reassignments())) + "\n")
    return 0


ACTION_FUNCS = {"generate": _generate, "execute": _execute, "verify": _verify,
                "cancel": _cancel, "list": _list}


async def _run(args) -> int:
    action = check_args(args)
    try:
        async with AdminClient(args.bootstrap_server,
                               default_api_timeout_ms=args.timeout_ms) as admin:
            return await ACTION_FUNCS[action](admin, args)
    except KafkaError as e:
        raise ReplogError(str(e)) from None


def add_parsers(sub) -> None:
    p = sub.add_parser("reassign", help="move partition replicas between brokers "
                                        "(kafka-reassign-partitions)")
    p.add_argument("action", nargs="?", choices=ACTIONS,
                   help="the action, as a word instead of its flag")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                   help="any broker of the cluster (host:port[,host:port...])")
    for a, text in (("generate", "propose an assignment of --topics-to-move-json-file's topics "
                                 "over --broker-list"),
                    ("execute", "start the reassignment of --reassignment-json-file"),
                    ("verify", "show whether the reassignment of --reassignment-json-file is "
                               "done, and clear the throttles once it is"),
                    ("cancel", "cancel the running reassignments of --reassignment-json-file"),
                    ("list", "list the reassignments in progress")):
        p.add_argument(f"--{a}", dest=f"{a}_flag", action="store_true", help=text)
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"version":1,"partitions":[{"topic":"foo","partition":0,'
                        '"replicas":[1,2,3]}]}')
    p.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help='{"version":1,"topics":[{"topic":"foo"}]}')
    p.add_argument("--broker-list", metavar="1,2,3", help="brokers to assign to (--generate)")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="ignore racks when generating an assignment")
    p.add_argument("--additional", action="store_true",
                   help="execute while other reassignments are running")
    p.add_argument("--throttle", type=int, metavar="BYTES_PER_SEC",
                   help="inter-broker replication throttle for the move")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, metavar="BYTES_PER_SEC",
                   help="throttle of moves between log dirs of one broker")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="do not clear the throttles (--verify, --cancel)")
    p.add_argument("--timeout", type=int, metavar="MS",
                   help="server-side timeout of the reassignment request (default 10000)")
    p.add_argument("--timeout-ms", type=int, default=60000,
                   help="give up after this long (default.api.timeout.ms)")
    p.set_defaults(func=lambda args: event_loop.run(_run(args)))

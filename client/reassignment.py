"""Reassignment as a library: what a plan means against the cluster, KIP-73's throttles, and
submitting the moves (design.md#reassignment). ``replog reassign`` (admin/reassign/) prints
Kafka's messages around these steps; the lab (chaos/lab/nemeses.py) runs them without a tool,
so no layer above the client imports the CLI.

Messages a step reports go to ``log`` (the CLI passes ``print``; the default drops them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from client.admin_client import AdminClient, AlterConfigOp, PartitionReassignment
from client.errors import KafkaError, UnknownTopicError
from client.metadata import TopicInfo
from common.errors import ReplogError

TP = tuple[str, int]
Log = Callable[[str], None]

CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "Cannot execute because there is an existing partition assignment. Use --additional to "
    "override this and create a new partition assignment in addition to the existing one.")

LEADER_THROTTLE_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLE_RATE = "follower.replication.throttled.rate"
LOG_DIR_THROTTLE_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
# Kafka's BROKER_LEVEL_THROTTLES / TOPIC_LEVEL_THROTTLES: what --verify and --cancel clear.
BROKER_LEVEL_THROTTLES = (LEADER_THROTTLE_RATE, FOLLOWER_THROTTLE_RATE, LOG_DIR_THROTTLE_RATE)
TOPIC_LEVEL_THROTTLES = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)


def _quiet(_: str) -> None:
    pass


def tp_name(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


def ids(xs: Iterable[int]) -> str:
    return ",".join(str(x) for x in xs)


def plural(n: int) -> str:
    return "" if n == 1 else "s"


async def describe_topics(admin: AdminClient, names: Iterable[str]) -> dict[str, TopicInfo]:
    try:
        return await admin.describe_topics(sorted(set(names)), include_configs=False)
    except UnknownTopicError as e:
        raise ReplogError(e.message) from None


async def current_replicas(admin: AdminClient, parts: Iterable[TP]) -> dict[TP, list[int]]:
    """Kafka's getReplicaAssignmentForPartitions; an unknown topic or partition is an error."""
    parts = list(parts)
    topics = await describe_topics(admin, (t for t, _ in parts))
    out: dict[TP, list[int]] = {}
    for tp in parts:
        info = topics[tp[0]].partition(tp[1])
        if info is None:
            raise ReplogError(f"Unable to find partition: {tp_name(tp)}")
        out[tp] = list(info.replicas)
    return out


async def verify_brokers(admin: AdminClient, brokers: Iterable[int]) -> None:
    """Kafka's verifyBrokerIds: every broker named must be a live (registered) one."""
    live = await admin.live_brokers()
    for b in sorted(set(brokers)):
        if b not in live:
            raise ReplogError(f"Unknown broker id {b} (live brokers: {ids(sorted(live))})")


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


def reassigning_brokers(moves: Mapping[TP, PartitionMove]) -> set[int]:
    """Kafka's calculateReassigningBrokers: every source and destination."""
    return {b for m in moves.values() for b in m.sources | m.destinations}


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


async def alter_configs(admin: AdminClient,
                        ops: Mapping[tuple[str, str], list[AlterConfigOp]]) -> None:
    if not ops:
        return
    errors = {res: e for res, e in (await admin.incremental_alter_configs(ops)).items() if e}
    if errors:
        raise ReplogError("; ".join(f"{t[:-1]} {n}: {e}" for (t, n), e in sorted(errors.items())))


def _restore_ops(before: Mapping[tuple[str, str], dict[str, str]], keys: Iterable[str]
                 ) -> dict[tuple[str, str], list[AlterConfigOp]]:
    return {res: [AlterConfigOp(k, "set", old[k]) if k in old else AlterConfigOp(k, "delete")
                  for k in keys] for res, old in before.items()}


async def set_throttles(admin: AdminClient, moves: Mapping[TP, PartitionMove],
                        inter_broker: int | None, log_dir: int | None, log: Log = _quiet
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
            await alter_configs(admin, {res: [
                AlterConfigOp(LEADER_THROTTLED_REPLICAS, "set", merge_throttled(
                    before_topics[res].get(LEADER_THROTTLED_REPLICAS), leader[res[1]])),
                AlterConfigOp(FOLLOWER_THROTTLED_REPLICAS, "set", merge_throttled(
                    before_topics[res].get(FOLLOWER_THROTTLED_REPLICAS), follower[res[1]]))]
                for res in topic_res})
        rates = {LEADER_THROTTLE_RATE: inter_broker, FOLLOWER_THROTTLE_RATE: inter_broker,
                 LOG_DIR_THROTTLE_RATE: log_dir}
        await alter_configs(admin, {res: [AlterConfigOp(k, "set", str(rates[k]))
                                          for k in broker_keys] for res in broker_res})
    except BaseException:
        await alter_configs(admin, undo)
        raise
    if inter_broker:
        log(f"The inter-broker throttle limit was set to {inter_broker} B/s")
    if log_dir:
        log(f"The replica-alter-dir throttle limit was set to {log_dir} B/s")
    return undo


async def clear_all_throttles(admin: AdminClient, targets: Mapping[TP, Sequence[int]],
                              log: Log = _quiet) -> None:
    """Kafka's clearAllThrottles: every live broker and every broker of the targets (a dead
    one has no configs to clear through a broker), and every topic of the targets."""
    live = await admin.live_brokers()
    brokers = sorted(b for b in set(live) | {b for r in targets.values() for b in r} if b in live)
    log(f"Clearing broker-level throttles on broker{plural(len(brokers))} {ids(brokers)}")
    await alter_configs(admin, {("brokers", str(b)): [AlterConfigOp(k, "delete")
                                                      for k in BROKER_LEVEL_THROTTLES]
                                for b in brokers})
    topics = sorted({t for t, _ in targets})
    log(f"Clearing topic-level throttles on topic{plural(len(topics))} {','.join(topics)}")
    await alter_configs(admin, {("topics", t): [AlterConfigOp(k, "delete")
                                                for k in TOPIC_LEVEL_THROTTLES] for t in topics})


async def submit(admin: AdminClient, proposed: Mapping[TP, Sequence[int]],
                 current: Mapping[TP, Sequence[int]],
                 ongoing: Mapping[TP, PartitionReassignment], timeout_ms: int
                 ) -> tuple[dict[TP, Sequence[int]], dict[TP, KafkaError | None]]:
    """AlterPartitionReassignments for the partitions the plan changes: (what was sent, the
    controller's answer per partition). A partition whose replicas stay as they are (and is
    not moving) has nothing for the controller to reassign - it refuses the same replicas - so
    it is not sent: a plan may list every partition of its topics, moved or not, and Kafka's
    controller completes such a partition as a no-op."""
    unchanged = {tp for tp, r in proposed.items()
                 if list(r) == list(current[tp]) and tp not in ongoing}
    reassigned = {tp: r for tp, r in proposed.items() if tp not in unchanged}
    results = await admin.alter_partition_reassignments(
        reassigned, timeout_ms=timeout_ms) if reassigned else {}
    return reassigned, results


async def execute(admin: AdminClient, proposed: Mapping[TP, Sequence[int]],
                  throttle: int | None = None, timeout_ms: int = 10000
                  ) -> tuple[dict[TP, list[int]], dict[TP, KafkaError | None]]:
    """A move of replicas between brokers as ``replog reassign --execute`` makes it, without
    its messages or log-dir moves: the brokers checked live, refused while another
    reassignment runs, KIP-73's throttles set when ``throttle`` is given, the moves submitted;
    a refused request puts the throttles back. Returns (the replicas before, the answers)."""
    await verify_brokers(admin, (b for r in proposed.values() for b in r))
    current = await current_replicas(admin, proposed)
    ongoing = await admin.list_partition_reassignments()
    if ongoing:
        raise ReplogError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
    undo: dict = {}
    if throttle:
        undo = await set_throttles(admin, proposed_moves(ongoing, proposed, current),
                                   throttle, None)
    _, results = await submit(admin, proposed, current, ongoing, timeout_ms)
    if any(e is not None for e in results.values()):
        await alter_configs(admin, undo)
    return current, results

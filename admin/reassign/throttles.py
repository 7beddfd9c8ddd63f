"""KIP-73's throttles as Kafka's tool sets them, through IncrementalAlterConfigs: broker
``*.replication.throttled.rate`` and topic ``*.replication.throttled.replicas``; put back as they
were when the controller refuses the reassignment, cleared by ``--verify`` once it completes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from admin.reassign.parsing import TP, ids, plural
from admin.reassign.planning import PartitionMove, reassigning_brokers
from client import AdminClient, KafkaError
from client.admin_client import AlterConfigOp
from common.errors import ReplogError

LEADER_THROTTLE_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLE_RATE = "follower.replication.throttled.rate"
LOG_DIR_THROTTLE_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
# Kafka's BROKER_LEVEL_THROTTLES / TOPIC_LEVEL_THROTTLES: what --verify and --cancel clear.
BROKER_LEVEL_THROTTLES = (LEADER_THROTTLE_RATE, FOLLOWER_THROTTLE_RATE, LOG_DIR_THROTTLE_RATE)
TOPIC_LEVEL_THROTTLES = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)


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


async def alter(admin: AdminClient, ops: Mapping[tuple[str, str], list[AlterConfigOp]]) -> None:
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
            await alter(admin, {res: [
                AlterConfigOp(LEADER_THROTTLED_REPLICAS, "set", merge_throttled(
                    before_topics[res].get(LEADER_THROTTLED_REPLICAS), leader[res[1]])),
                AlterConfigOp(FOLLOWER_THROTTLED_REPLICAS, "set", merge_throttled(
                    before_topics[res].get(FOLLOWER_THROTTLED_REPLICAS), follower[res[1]]))]
                for res in topic_res})
        rates = {LEADER_THROTTLE_RATE: inter_broker, FOLLOWER_THROTTLE_RATE: inter_broker,
                 LOG_DIR_THROTTLE_RATE: log_dir}
        await alter(admin, {res: [AlterConfigOp(k, "set", str(rates[k])) for k in broker_keys]
                             for res in broker_res})
    except BaseException:
        await alter(admin, undo)
        raise
    if inter_broker:
        print(f"The inter-broker throttle limit was set to {inter_broker} B/s")
    if log_dir:
        print(f"The replica-alter-dir throttle limit was set to {log_dir} B/s")
    return undo


async def clear_all_throttles(admin: AdminClient, targets: Mapping[TP, Sequence[int]]) -> None:
    """Kafka's clearAllThrottles: every live broker and every broker of the targets (a dead
    one has no configs to clear through a broker), and every topic of the targets."""
    live = await admin.live_brokers()
    brokers = sorted(b for b in set(live) | {b for r in targets.values() for b in r} if b in live)
    print(f"Clearing broker-level throttles on broker{plural(len(brokers))} {ids(brokers)}")
    await alter(admin, {("brokers", str(b)): [AlterConfigOp(k, "delete")
                                                for k in BROKER_LEVEL_THROTTLES]
                         for b in brokers})
    topics = sorted({t for t, _ in targets})
    print(f"Clearing topic-level throttles on topic{plural(len(topics))} {','.join(topics)}")
    await alter(admin, {("topics", t): [AlterConfigOp(k, "delete")
                                         for k in TOPIC_LEVEL_THROTTLES] for t in topics})

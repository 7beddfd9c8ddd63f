"""``replog topics create|describe|list|alter|delete`` — kafka-topics.sh, over replog's gRPC.

Option names, output and messages are Kafka's (tools/.../TopicCommand.java, Kafka 3.7+):

    Topic: t\tTopicId: <id>\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: min.insync.replicas=2
    \tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2\tElr: \tLastKnownElr: 

``Leader: none`` for a partition without a leader; ``\tAdding Replicas: ..\tRemoving Replicas: ..``
after ``Isr`` while a reassignment is in progress. With one of the partition filters
(``--under-replicated-partitions``, ``--unavailable-partitions``, ``--under-min-isr-partitions``,
``--at-min-isr-partitions``, and replog's ``--eligible-leader-replicas``: partitions with an ELR
or LastKnownELR, KIP-966) only the matching partition lines are printed, as in Kafka.

``--topic`` is a regular expression matched against whole topic names for describe, list,
alter and delete, as Kafka's include list is.

``alter --partitions N [--replica-assignment ...]`` adds partitions (CreatePartitions). It prints
what ZooKeeper-era kafka-topics printed for each topic: ``WARNING: If partitions are increased
for a topic that has a key, the partition logic or ordering of the messages will be affected``
then ``Adding partitions succeeded!`` - here only once the controller has added them, so a
refused request prints nothing but its one error line. ``--replica-assignment`` lists every
partition, as in Kafka; the entries past the topic's current count are the new partitions'. "Configs:" lists the topic's overrides as DescribeConfigs
reads them from ZooKeeper now (Kafka's TopicCommand asks describeConfigs too; it also prints
static broker values, replog only the topic's own), and the min-ISR filters use the
``min.insync.replicas`` the brokers apply (override, else broker dynamic or static default).
"""  # noqa: E501, W291

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Iterable

from admin import options
from client import AdminClient, KafkaError, NewPartitions, PartitionInfo, TopicInfo
from common import event_loop
from common.errors import ErrorCode, ReplogError
from common.names import validate_topic

SHORT_MAX = 32767
ALTER_WARNING = ("WARNING: If partitions are increased for a topic that has a key, the partition "
                 "logic or ordering of the messages will be affected")
COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') or "
                     "underscore ('_') could collide. To avoid issues it is best to use either, "
                     "but not both.")


# ---------------------------------------------------------------------------- formatting (pure)

def _ids(xs: Iterable[int]) -> str:
    return ",".join(str(x) for x in xs)


def replication_factor(p: PartitionInfo) -> int:
    """Kafka's getReplicationFactor: during a move, RS minus the adding replicas."""
    if p.reassignment_in_progress:
        return len(p.replicas) - len(p.adding_replicas)
    return len(p.replicas)


def min_isr(topic: TopicInfo) -> int:
    try:
        return int(topic.configs.get("min.insync.replicas", "1"))
    except ValueError:
        return 1


def format_topic_line(topic: TopicInfo) -> str:
    configs = ",".join(f"{k}={v}" for k, v in sorted(topic.configs.items()))
    rf = replication_factor(topic.partitions[0]) if topic.partitions else 0
    out = f"Topic: {topic.name}"
    if topic.topic_id and topic.topic_id != "AAAAAAAAAAAAAAAAAAAAAA":  # Kafka's ZERO_UUID
        out += f"\tTopicId: {topic.topic_id}"
    return out + (f"\tPartitionCount: {len(topic.partitions)}\tReplicationFactor: {rf}"
                  f"\tConfigs: {configs}")


def format_partition_line(p: PartitionInfo) -> str:
    out = (f"\tTopic: {p.topic}\tPartition: {p.partition}"
           f"\tLeader: {p.leader if p.leader >= 0 else 'none'}"
           f"\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}")
    if p.reassignment_in_progress:
        out += (f"\tAdding Replicas: {_ids(p.adding_replicas)}"
                f"\tRemoving Replicas: {_ids(p.removing_replicas)}")
    return out + f"\tElr: {_ids(p.elr)}\tLastKnownElr: {_ids(p.last_known_elr)}"


def is_under_replicated(p: PartitionInfo) -> bool:
    return replication_factor(p) - len(p.isr) > 0


def is_unavailable(p: PartitionInfo, live_brokers: set[int]) -> bool:
    return p.leader < 0 or p.leader not in live_brokers


def is_under_min_isr(p: PartitionInfo, topic: TopicInfo, m: int | None = None) -> bool:
    return p.leader < 0 or len(p.isr) < (min_isr(topic) if m is None else m)


def is_at_min_isr(p: PartitionInfo, topic: TopicInfo, m: int | None = None) -> bool:
    return len(p.isr) == (min_isr(topic) if m is None else m)


def has_eligible_leader_replicas(p: PartitionInfo) -> bool:
    """KIP-966: the partition fell below min ISR and keeps replicas outside the ISR that may
    still lead (ELR), or lost some to unclean shutdowns (LastKnownELR)."""
    return bool(p.elr or p.last_known_elr)


def describe_lines(topics: Iterable[TopicInfo], live_brokers: set[int], *,
                   under_replicated: bool = False, unavailable: bool = False,
                   under_min_isr: bool = False, at_min_isr: bool = False,
                   eligible_leader_replicas: bool = False,
                   min_isrs: dict[str, int] | None = None) -> list[str]:
    """Kafka's describe output for ``topics`` (already sorted and filtered by name);
    ``min_isrs``: each topic's effective min ISR, if known (else its override or 1)."""
    describe_configs = not (under_replicated or unavailable or under_min_isr or at_min_isr
                            or eligible_leader_replicas)
    lines: list[str] = []
    for t in topics:
        if describe_configs:
            lines.append(format_topic_line(t))
        for p in t.partitions:
            if (describe_configs
                    or (under_replicated and is_under_replicated(p))
                    or (unavailable and is_unavailable(p, live_brokers))
                    or (under_min_isr and is_under_min_isr(p, t, (min_isrs or {}).get(t.name)))
                    or (at_min_isr and is_at_min_isr(p, t, (min_isrs or {}).get(t.name)))
                    or (eligible_leader_replicas and has_eligible_leader_replicas(p))):
                lines.append(format_partition_line(p))
    return lines


# ---------------------------------------------------------------------------- argument parsing

def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's ``--replica-assignment 1:2:3,2:3:1`` (partition 0 first)."""
    out: dict[int, list[int]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise ReplogError(f"Invalid replica assignment {text!r}: broker ids must be integers "
                              f"(expected e.g. 1:2:3,2:3:1)") from None
        dups = sorted({b for b in brokers if brokers.count(b) > 1})
        if dups:
            raise ReplogError(f"Partition replica lists may not contain duplicate entries: "
                              f"{_ids(dups)}")
        out[i] = brokers
        if len(brokers) != len(out[0]):
            raise ReplogError(f"Partition {i} has different replication factor: "
                              f"[{', '.join(map(str, brokers))}]")
    return out


def parse_configs(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or "=" in value:
            raise ReplogError('Invalid topic config: all configs to be added must be in the '
                              'format "key=val".')
        out[key.strip()] = value.strip()
    return out


def _matching(all_topics: Iterable[str], pattern: str | None) -> list[str]:
    names = sorted(all_topics)
    if pattern is None:
        return names
    try:
        rx = re.compile(pattern)
    except re.error:
        return [n for n in names if n == pattern]
    return [n for n in names if rx.fullmatch(n)]


def _ensure_found(found: list[str], pattern: str | None, if_exists: bool) -> None:
    if pattern and not found and not if_exists:
        raise ReplogError(f"Topic '{pattern}' does not exist as expected")


def _user_error(e: KafkaError) -> ReplogError:
    return ReplogError(e.message or e.name)


# ---------------------------------------------------------------------------- commands

async def _create(args) -> int:
    name = validate_topic(args.topic)
    assignment = parse_replica_assignment(args.replica_assignment) \
        if args.replica_assignment else None
    if assignment is not None and (args.partitions is not None
                                   or args.replication_factor is not None):
        which = "partitions" if args.partitions is not None else "replication-factor"
        raise ReplogError(f'Option "[replica-assignment]" can\'t be used with option '
                          f'"[{which}]"')
    if args.replication_factor is not None and not 1 <= args.replication_factor <= SHORT_MAX:
        raise ReplogError(f"The replication factor must be between 1 and {SHORT_MAX} inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise ReplogError("The partitions must be greater than 0")
    configs = parse_configs(args.config)
    if "." in name or "_" in name:
        print(COLLISION_WARNING)
    async with _admin(args) as admin:
        try:
            await admin.create_topic(name, args.partitions, args.replication_factor,
                                     configs=configs, replica_assignment=assignment)
        except KafkaError as e:
            if e.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
                if args.if_not_exists:
                    return 0
                raise ReplogError(e.message or f"Topic '{name}' already exists.") from None
            if e.error_code == ErrorCode.INVALID_REPLICATION_FACTOR and not e.message:
                live = await admin.live_brokers()
                raise ReplogError(f"Replication factor: {args.replication_factor} larger than "
                                  f"available brokers: {len(live)}.") from None
            raise _user_error(e) from None
    print(f"Created topic {name}.")
    return 0


async def _describe(args) -> int:
    async with _admin(args) as admin:
        md = await admin.describe_cluster_metadata(all_topics=True)
        names = _matching((n for n, t in md.topics.items() if t.error_code == ErrorCode.NONE),
                          args.topic)
        _ensure_found(names, args.topic, args.if_exists)
        described = await admin.describe_configs([("topics", n) for n in names]) \
            if names else {}
    topics, min_isrs = [], {}
    for n in names:
        got = described.get(("topics", n))
        if isinstance(got, KafkaError):
            raise _user_error(got)
        entries = got or []
        overrides = {e.name: e.value for e in entries
                     if e.source == "DYNAMIC_TOPIC_CONFIG" and e.value is not None}
        topics.append(dataclasses.replace(md.topics[n], configs=overrides))
        for e in entries:
            if e.name == "min.insync.replicas" and e.value is not None and e.value.isdigit():
                min_isrs[n] = int(e.value)
    lines = describe_lines(topics, set(md.brokers),
                           under_replicated=args.under_replicated_partitions,
                           unavailable=args.unavailable_partitions,
                           under_min_isr=args.under_min_isr_partitions,
                           at_min_isr=args.at_min_isr_partitions,
                           eligible_leader_replicas=args.eligible_leader_replicas,
                           min_isrs=min_isrs)
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
    return 0


async def _list(args) -> int:
    async with _admin(args) as admin:
        names = _matching(await admin.list_topics(), args.topic)
    if names:
        sys.stdout.write("\n".join(names) + "\n")
    return 0


async def _alter(args) -> int:
    assignment = parse_replica_assignment(args.replica_assignment) \
        if args.replica_assignment else None
    async with _admin(args) as admin:
        md = await admin.describe_cluster_metadata(all_topics=True)
        names = _matching((n for n, t in md.topics.items() if t.error_code == ErrorCode.NONE),
                          args.topic)
        _ensure_found(names, args.topic, args.if_exists)
        if not names:
            return 0
        wanted: dict[str, NewPartitions] = {}
        for n in names:
            new = None
            if assignment is not None:
                # TopicCommand: the listed partitions past the current count (startPartitionId)
                current = len(md.topics[n].partitions)
                new = [r for p, r in sorted(assignment.items()) if p >= current]
            wanted[n] = NewPartitions(args.partitions, new)
        results = await admin.create_partitions(wanted)
    failed = [(n, e) for n, e in sorted(results.items()) if e is not None]
    for n in names:
        if n in results and results[n] is None:
            print(ALTER_WARNING)
            print("Adding partitions succeeded!")
    if failed:
        raise ReplogError("; ".join(
            (f"{n}: " if len(names) > 1 else "") + (e.message or e.name) for n, e in failed))
    return 0


async def _delete(args) -> int:
    async with _admin(args) as admin:
        names = _matching(await admin.list_topics(), args.topic)
        _ensure_found(names, args.topic, args.if_exists)
        if not names:
            return 0
        results = await admin.delete_topics(names)
    failed = [(n, e) for n, e in sorted(results.items()) if e is not None]
    if failed:
        raise ReplogError("; ".join(f"{n}: {e.message or e.name}" for n, e in failed))
    return 0


def _admin(args) -> AdminClient:
    return AdminClient(args.bootstrap_server, default_api_timeout_ms=args.timeout_ms)


def _run(coro_fn):
    def run(args) -> int:
        try:
            return event_loop.run(coro_fn(args))
        except KafkaError as e:
            raise _user_error(e) if not e.message else ReplogError(str(e)) from None
    return run


def add_parsers(sub) -> None:
    topics = sub.add_parser("topics", help="create, describe, list, alter and delete topics "
                                           "(kafka-topics)")
    actions = topics.add_subparsers(dest="topics_command", metavar="ACTION")
    actions.required = True

    def common(p, topic_required: bool) -> None:
        p.add_argument("--topic", required=topic_required,
                       help="topic name" + ("" if topic_required else
                                            " (a regular expression, as in Kafka)"))
        p.add_argument("--timeout-ms", type=int, default=60000,
                       help="give up after this long (default.api.timeout.ms)")

    p = actions.add_parser("create", parents=[options.client()], help="create a topic")
    common(p, True)
    p.add_argument("--partitions", type=int, help="number of partitions (default: the "
                                                  "controller's num.partitions)")
    p.add_argument("--replication-factor", type=int,
                   help="replicas per partition (default: default.replication.factor)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="topic config override, e.g. min.insync.replicas=2 (repeatable)")
    p.add_argument("--replica-assignment", metavar="B:B:B,B:B:B",
                   help="explicit assignment: partitions separated by ',', replicas by ':', "
                        "preferred leader first")
    p.add_argument("--if-not-exists", action="store_true",
                   help="do nothing if the topic exists")
    p.set_defaults(func=_run(_create))

    p = actions.add_parser("describe", parents=[options.client()],
                           help="describe topics (Kafka's format)")
    common(p, False)
    p.add_argument("--if-exists", action="store_true", help="no error if the topic is missing")
    p.add_argument("--exclude-internal", action="store_true",
                   help="accepted for compatibility (replog has no internal topics)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--under-replicated-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than the replica set")
    g.add_argument("--unavailable-partitions", action="store_true",
                   help="only partitions whose leader is not available")
    g.add_argument("--under-min-isr-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than min.insync.replicas")
    g.add_argument("--at-min-isr-partitions", action="store_true",
                   help="only partitions whose ISR equals min.insync.replicas")
    g.add_argument("--eligible-leader-replicas", action="store_true",
                   help="only partitions with an ELR or LastKnownELR (KIP-966)")
    p.set_defaults(func=_run(_describe))

    p = actions.add_parser("list", parents=[options.client()], help="list topic names")
    common(p, False)
    p.add_argument("--exclude-internal", action="store_true",
                   help="accepted for compatibility (replog has no internal topics)")
    p.set_defaults(func=_run(_list))

    p = actions.add_parser("alter", parents=[options.client()],
                           help="add partitions to topics (kafka-topics --alter)")
    common(p, True)
    p.add_argument("--partitions", type=int, required=True,
                   help="the new number of partitions (it can only grow; WARNING: if partitions "
                        "are increased for a topic that has a key, the partition logic or "
                        "ordering of the messages will be affected)")
    p.add_argument("--replica-assignment", metavar="B:B:B,B:B:B",
                   help="replicas of every partition, partitions separated by ',', replicas "
                        "by ':', preferred leader first; those past the current count are "
                        "used for the new partitions")
    p.add_argument("--if-exists", action="store_true", help="do nothing if the topic is missing")
    p.set_defaults(func=_run(_alter))

    p = actions.add_parser("delete", parents=[options.client()], help="delete topics")
    common(p, True)
    p.add_argument("--if-exists", action="store_true", help="no error if the topic is missing")
    p.set_defaults(func=_run(_delete))

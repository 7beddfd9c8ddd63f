"""The znodes of the JBOD design (design.md#jbod, KIP-112/113): ``/restart_partitions``, where a
broker reports the replicas it lost with a log dir for the controller to re-create, and
``/brokers/lost_replicas/<id>``, replog's own record of them until a start has set them aside.
common/zk_layout.py re-exports every name, so callers keep reading the whole layout there.

    /restart_partitions/restart-<seq>        {"version":1,"broker":N,"log_dir":D,
                                              "broker_epoch":E,"partitions":[{"topic":T,
                                              "partitions":[..],"partition_epochs":[..]}]}
    /brokers/lost_replicas/<id>              {"version":1,"log_dirs":{"/d0":[{"topic":T,
                                              "partitions":[..]}]}}
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from common.zk_codec import (
    INT32_MAX,
    MalformedZnode,
    decoder,
    dumps,
    int_or,
    loads,
    topic_name,
)

RESTART_PARTITIONS = "/restart_partitions"
# replog's own (not Kafka's): per broker, the replicas it lost with a log dir (lost_replicas_*)
LOST_REPLICAS = "/brokers/lost_replicas"


# ------------------------------------------------------------- /restart_partitions (design.md#jbod)

RESTART_ENTRY_PREFIX = "restart-"


@dataclass(frozen=True)
class RestartEntry:
    """One /restart_partitions/restart-<seq> entry (design.md#jbod-step-2-4): broker `broker` lost
    its replicas of `partitions` (sorted (topic, partition) pairs) with log dir `log_dir`.

    design.md#jbod-open-questions (open question 3) (brokers writing one znode at once, the
    controller removing what it handled) is settled as ZooKeeper's Queue recipe: each report is its
    own persistent sequential child, so brokers never contend; the controller handles each child on
    its event queue and deletes it afterwards. Processing is at least once, so it is idempotent (the
    controller's `decisions.restarts`). `broker_epoch` names the broker incarnation that lost
    them (the czxid of its registration, KIP-380), for the event log and diagnosis.

    `partition_epochs` (parallel to `partitions`; -1 or empty: unknown) is the fence: the
    partition epoch the broker held for each replica when it lost it (or, for a
    refused LeaderAndIsr, the epoch of the state it refused). A late duplicate - the notifier's
    retry after a write that timed out but landed, or a second refusal - must not be applied
    after the re-created replica has rejoined the ISR; `decisions.restarts.stale_restart` says
    when an entry is older than that rejoin. Kafka fences the same way with the epochs a
    request quotes (KIP-497's partition epoch in AlterPartition)."""

    broker: int
    log_dir: str
    partitions: tuple[tuple[str, int], ...]
    broker_epoch: int = -1
    partition_epochs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.partition_epochs and len(self.partition_epochs) != len(self.partitions):
            raise ValueError("partition_epochs must match partitions one for one")

    def partition_epoch(self, topic: str, partition: int) -> int:
        """The epoch the broker held when it lost ``topic-partition``; -1: not said (an entry
        from a broker before the fence)."""
        if not self.partition_epochs:
            return -1
        try:
            return self.partition_epochs[self.partitions.index((topic, partition))]
        except ValueError:
            return -1


def restart_entry_path(name: str) -> str:
    return f"{RESTART_PARTITIONS}/{name}"


def encode_restart_entry(e: RestartEntry) -> bytes:
    """The SPEC's JSON: {"version":1,"broker":1,"log_dir":"/d1","broker_epoch":N,
    "partitions":[{"topic":"t","partitions":[1,2,3],"partition_epochs":[4,4,9]}]} (design.md#jbod's
    format, grouped by topic). "partition_epochs" is new with the fence and optional: a
    controller before it ignores the key (JSON readers skip what they do not know), so the
    version stays 1 and brokers and controllers can be upgraded in any order."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for t, p in sorted(e.partitions):
        by_topic.setdefault(t, []).append((p, e.partition_epoch(t, p)))
    groups = []
    for t, pes in sorted(by_topic.items()):
        g: dict = {"topic": t, "partitions": [p for p, _ in pes]}
        if e.partition_epochs:
            g["partition_epochs"] = [pe for _, pe in pes]
        groups.append(g)
    return dumps({"version": 1, "broker": e.broker, "log_dir": e.log_dir,
                   "broker_epoch": e.broker_epoch, "partitions": groups})


@decoder(RESTART_PARTITIONS)
def decode_restart_entry(data: bytes) -> RestartEntry:
    """ValueError naming what is wrong (the controller logs and deletes an unreadable entry:
    nothing can ever make it readable)."""
    o = loads(data, RESTART_PARTITIONS)
    broker, log_dir = o.get("broker"), o.get("log_dir", "")
    if isinstance(broker, str) and broker.isascii() and broker.isdigit():  # quoted, as the seed
        broker = int(broker)
    if not isinstance(broker, int) or isinstance(broker, bool) or not 0 <= broker <= INT32_MAX:
        raise MalformedZnode(f'{RESTART_PARTITIONS}: no valid "broker"')
    if not isinstance(log_dir, str):
        raise MalformedZnode(f'{RESTART_PARTITIONS}: "log_dir" must be a string')
    groups = o.get("partitions")
    if not isinstance(groups, list):
        raise MalformedZnode(f'{RESTART_PARTITIONS}: "partitions" must be a list')
    out: dict[tuple[str, int], int] = {}
    fenced = False
    for g in groups:
        topic = g.get("topic") if isinstance(g, dict) else None
        ps = g.get("partitions") if isinstance(g, dict) else None
        if not isinstance(topic, str) or not topic or not isinstance(ps, list):
            raise MalformedZnode(f'{RESTART_PARTITIONS}: each entry needs "topic" and '
                                 f'"partitions"')
        topic = topic_name(topic, RESTART_PARTITIONS)
        # An entry without epochs (a broker before the fence), or with an unreadable list, is
        # read as unfenced but valid (-1): applying a late duplicate costs availability (the
        # replica rejoins the ISR again), dropping a real loss could leave an empty replica
        # in the ISR to be elected cleanly - durability first, as KIP-966 chooses.
        pes = g.get("partition_epochs")
        fenced = fenced or pes is not None
        if not isinstance(pes, list) or len(pes) != len(ps):
            pes = [-1] * len(ps)
        for p, pe in zip(ps, pes, strict=True):
            if isinstance(p, str) and p.isascii() and p.isdigit():
                p = int(p)
            if not isinstance(p, int) or isinstance(p, bool) or not 0 <= p <= INT32_MAX:
                raise MalformedZnode(f"{RESTART_PARTITIONS}: {topic}: bad partition {p!r}")
            pe = int_or(pe, -1)
            # named twice: the higher epoch is the later report of the same lost replica
            out[(topic, p)] = max(out.get((topic, p), -1), pe)
    parts = tuple(sorted(out))
    return RestartEntry(broker, log_dir, parts, int_or(o.get("broker_epoch", -1), -1),
                        tuple(out[tp] for tp in parts) if fenced else ())


# ----------------------------------------------------------------------------- lost replicas

def lost_replicas_path(broker_id: int) -> str:
    return f"{LOST_REPLICAS}/{broker_id}"


def encode_lost_replicas(lost: dict[str, set[tuple[str, int]]]) -> bytes:
    """/brokers/lost_replicas/<id>: the copies broker <id> lost, by log dir, until a start
    with that dir readable has set them aside (broker/restart_notifier.py says why):
    {"version":1,"log_dirs":{"/d0":[{"topic":"t","partitions":[0,1]}]}}."""
    out: dict[str, list] = {}
    for d, tps in sorted(lost.items()):
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(tps):
            by_topic.setdefault(t, []).append(p)
        out[d] = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
    return json.dumps({"version": 1, "log_dirs": out}, separators=(",", ":")).encode()


@decoder(LOST_REPLICAS)
def decode_lost_replicas(data: bytes) -> dict[str, set[tuple[str, int]]]:
    """ValueError naming what is wrong."""
    o = loads(data, LOST_REPLICAS)
    dirs = o.get("log_dirs")
    if not isinstance(dirs, dict):
        raise MalformedZnode(f'{LOST_REPLICAS}: "log_dirs" must be an object')
    out: dict[str, set[tuple[str, int]]] = {}
    for d, groups in dirs.items():
        if not isinstance(groups, list):
            raise MalformedZnode(f"{LOST_REPLICAS}: {d}: expected a list")
        tps = out.setdefault(d, set())
        for g in groups:
            topic = g.get("topic") if isinstance(g, dict) else None
            ps = g.get("partitions") if isinstance(g, dict) else None
            if not isinstance(topic, str) or not isinstance(ps, list) or not all(
                    isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in ps):
                raise MalformedZnode(f"{LOST_REPLICAS}: {d}: bad entry {g!r}")
            tps.update((topic, p) for p in ps)
    return out

"""ZooKeeper layout and JSON codecs: what the controller and the brokers agree on.

Kafka's ZooKeeper-era layout (KafkaZkClient / ZkData), versioned JSON:

    /cluster/id                              {"version":"1","id":"<uuid>"}
    /controller            (ephemeral)       {"version":1,"brokerid":N,"timestamp":"ms",
                                              "host":H,"port":P,"endpoints":["NAME://H:P"]}
    /controller_epoch                        "N"   (the fencing token)
    /brokers/ids/<id>      (ephemeral)       {"version":5,"host":H,"port":P,
                                              "endpoints":["INTERNAL://H:P","EXTERNAL://H2:P2"],
                                              "listener_security_protocol_map":{...},
                                              "rack":..,"log_dirs":[..],"clean_shutdown":..}
    /brokers/topics/<t>                      {"version":3,"partitions":{"0":[1,2,3]},
                                              "adding_replicas":{},"removing_replicas":{},
                                              "topic_id":"..."}
    /brokers/topics/<t>/partitions/<p>/state {"version":1,"controller_epoch":..,"leader":..,
                                              "leader_epoch":..,"isr":[..],"elr":[..],
                                              "last_known_elr":[..],"leader_recovery_state":0}
    /config/topics/<t>                       {"version":1,"config":{...}}
    /config/brokers/<id> | <default>         {"version":1,"config":{...}}  (dynamic configs)
    /config/changes/config_change_<seq>      {"version":2,"entity_path":"topics/<t>"}
    /admin/delete_topics/<t>
    /admin/reassign_partitions               (seed 004 / Kafka's JSON)
    /admin/preferred_replica_election
    /restart_partitions/restart-<seq>        (seed 003)

Choices replog makes where Kafka's layout has no answer:

- Controllers are separate processes, so ``/controller`` also carries the active controller's
  gRPC endpoint (``host``, ``port``: its inter-broker listener): brokers send AlterPartition and
  ControlledShutdown there. ``endpoints`` lists every advertised listener (KIP-103, as in a
  broker registration), so a broker answers Metadata with the controller's endpoint on the
  listener the request came in on. A ``/controller`` without ``endpoints`` (written before
  listeners had names) has the one endpoint, which serves every listener.
- A broker registration's ``host``/``port`` are those of its inter-broker listener (Kafka writes
  the first PLAINTEXT endpoint there for old clients; every replog listener is PLAINTEXT): the
  controller connects there, and readers of registrations older than ``endpoints`` keep
  working.
- The broker epoch is the czxid of the broker's registration znode, as in Kafka (KIP-380): it
  changes with every new registration, so requests meant for an earlier incarnation are fenced.
- The partition epoch is the ZooKeeper version of the partition's state znode; AlterPartition
  carries it and the controller writes with it as the expected version (INVALID_UPDATE_VERSION
  otherwise).
- Partition state stays one znode per partition (Kafka's layout). Writes are batched in
  multi-op transactions, each also checking ``/controller_epoch``'s version, so a deposed
  controller's batch fails as a whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from common.listeners import PLAINTEXT, EndPoint, decode_endpoints, encode_endpoints

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
RESTART_PARTITIONS = "/restart_partitions"
# replog's own (not Kafka's): per broker, the replicas it lost with a log dir (lost_replicas_*)
LOST_REPLICAS = "/brokers/lost_replicas"

# Persistent paths created once by whoever gets there first.
PERSISTENT_PATHS = ("/cluster", BROKER_IDS, TOPICS, CONFIG_TOPICS, CONFIG_BROKERS,
                    CONFIG_CHANGES, ADMIN, DELETE_TOPICS, RESTART_PARTITIONS, LOST_REPLICAS)

LEADER_RECOVERED = 0
LEADER_RECOVERING = 1
NO_LEADER = -1


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def _dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def _loads(data: bytes, what: str) -> dict:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{what}: not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{what}: expected a JSON object")
    return obj


# ----------------------------------------------------------------------------- cluster / controller

def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_loads(data, CLUSTER_ID)["id"])


@dataclass(frozen=True)
class ControllerInfo:
    controller_id: int
    host: str
    port: int
    timestamp_ms: int = 0
    # Every advertised listener (KIP-103); () when written before listeners had names.
    endpoints: tuple[EndPoint, ...] = ()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def encode_controller(info: ControllerInfo) -> bytes:
    o = {"version": 1, "brokerid": info.controller_id, "timestamp": str(info.timestamp_ms),
         "host": info.host, "port": info.port}
    if info.endpoints:
        o["endpoints"] = encode_endpoints(info.endpoints)
    return _dumps(o)


def decode_controller(data: bytes) -> ControllerInfo:
    o = _loads(data, CONTROLLER)
    return ControllerInfo(int(o["brokerid"]), str(o.get("host", "")), int(o.get("port", -1)),
                          int(o.get("timestamp", 0)), decode_endpoints(o.get("endpoints") or ()))


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode().strip())


# ----------------------------------------------------------------------------- brokers

@dataclass(frozen=True)
class LogDirInfo:
    path: str
    directory_id: str
    online: bool = True


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    log_dirs: tuple[LogDirInfo, ...] = ()
    clean_shutdown: bool = True  # whether the previous shutdown was clean (KIP-966)
    metrics_url: str | None = None
    timestamp_ms: int = 0
    epoch: int = -1  # czxid of the znode: filled in when read, never written
    # Every advertised listener, inter-broker one included (KIP-103); host/port above are the
    # inter-broker listener's. Empty means the one PLAINTEXT listener at host:port.
    endpoints: tuple[EndPoint, ...] = ()

    @property
    def listener_endpoints(self) -> tuple[EndPoint, ...]:
        return self.endpoints or (EndPoint(PLAINTEXT, self.host, self.port),)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def offline_log_dirs(self) -> tuple[str, ...]:
        """The dirs this broker has taken offline (seed 003 / KIP-112), as registered."""
        return tuple(d.path for d in self.log_dirs if not d.online)


def encode_broker(reg: BrokerRegistration) -> bytes:
    return _dumps({
        "version": 5, "host": reg.host, "port": reg.port, "jmx_port": -1,
        "timestamp": str(reg.timestamp_ms),
        "endpoints": encode_endpoints(reg.listener_endpoints),
        # Only PLAINTEXT is served (common/listeners.py).
        "listener_security_protocol_map": {e.listener: PLAINTEXT
                                           for e in reg.listener_endpoints},
        "rack": reg.rack, "features": {},
        "log_dirs": [{"path": d.path, "directory_id": d.directory_id, "online": d.online}
                     for d in reg.log_dirs],
        # Seed 003: the dirs taken offline, also as a list for operators and tools; the
        # broker rewrites its registration when one goes offline.
        "offline_log_dirs": list(reg.offline_log_dirs),
        "clean_shutdown": reg.clean_shutdown, "metrics_url": reg.metrics_url,
    })


def decode_broker(broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
    o = _loads(data, broker_path(broker_id))
    offline = set(o.get("offline_log_dirs") or ())  # absent in registrations before seed 003
    endpoints = decode_endpoints(o.get("endpoints") or ())
    if o.get("host") is None and endpoints:
        # Kafka writes host null / port -1 when no listener is PLAINTEXT: use the first one.
        host, port = endpoints[0].host, endpoints[0].port
    else:
        host, port = o["host"], o["port"]
    return BrokerRegistration(
        broker_id, str(host), int(port), o.get("rack"),
        tuple(LogDirInfo(d["path"], d.get("directory_id", ""),
                         bool(d.get("online", True)) and d["path"] not in offline)
              for d in o.get("log_dirs", [])),
        bool(o.get("clean_shutdown", True)), o.get("metrics_url"), int(o.get("timestamp", 0)),
        epoch, endpoints)


# ----------------------------------------------------------------------------- topics

@dataclass(frozen=True)
class TopicAssignment:
    topic: str
    topic_id: str
    partitions: dict[int, list[int]]
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)


def encode_topic(t: TopicAssignment) -> bytes:
    return _dumps({
        "version": 3,
        "partitions": {str(p): list(r) for p, r in sorted(t.partitions.items())},
        "adding_replicas": {str(p): list(r) for p, r in sorted(t.adding_replicas.items()) if r},
        "removing_replicas": {str(p): list(r) for p, r in sorted(t.removing_replicas.items())
                              if r},
        "topic_id": t.topic_id,
    })


def decode_topic(topic: str, data: bytes) -> TopicAssignment:
    o = _loads(data, topic_path(topic))

    def ints(m) -> dict[int, list[int]]:
        return {int(p): [int(b) for b in r] for p, r in (m or {}).items()}

    return TopicAssignment(topic, str(o.get("topic_id", "")), ints(o["partitions"]),
                           ints(o.get("adding_replicas")), ints(o.get("removing_replicas")))


# ----------------------------------------------------------------------------- partition state

@dataclass(frozen=True)
class LeaderAndIsr:
    """One partition's state znode, plus its version (the partition epoch)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int = 0  # znode version; not stored in the JSON
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    leader_recovery_state: int = LEADER_RECOVERED


def encode_partition_state(s: LeaderAndIsr) -> bytes:
    return _dumps({"version": 1, "controller_epoch": s.controller_epoch, "leader": s.leader,
                   "leader_epoch": s.leader_epoch, "isr": list(s.isr), "elr": list(s.elr),
                   "last_known_elr": list(s.last_known_elr),
                   "leader_recovery_state": s.leader_recovery_state})


def decode_partition_state(data: bytes, version: int, what: str = "partition state"
                           ) -> LeaderAndIsr:
    o = _loads(data, what)
    return LeaderAndIsr(int(o["leader"]), int(o["leader_epoch"]),
                        tuple(int(b) for b in o["isr"]), int(o["controller_epoch"]), version,
                        tuple(int(b) for b in o.get("elr", ())),
                        tuple(int(b) for b in o.get("last_known_elr", ())),
                        int(o.get("leader_recovery_state", LEADER_RECOVERED)))


# ----------------------------------------------------------------------------- configs

def encode_topic_config(config: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(config)})


def decode_topic_config(data: bytes) -> dict[str, str]:
    return {str(k): str(v) for k, v in _loads(data, "topic config").get("config", {}).items()}


# Kafka's ConfigType names: the first part of a change notification's entity path.
CONFIG_TYPE_PATHS = {"topics": CONFIG_TOPICS, "brokers": CONFIG_BROKERS}


def entity_config_path(entity_type: str, name: str) -> str:
    """``/config/topics/<t>``, ``/config/brokers/<id>`` or ``/config/brokers/<default>``."""
    return f"{CONFIG_TYPE_PATHS[entity_type]}/{name}"


encode_entity_config = encode_topic_config  # the same {"version":1,"config":{...}} for brokers
decode_entity_config = decode_topic_config


def encode_config_change(entity_type: str, name: str) -> bytes:
    """Kafka's version-2 change notification (AdminZkClient.changeEntityConfig): every broker
    watching /config/changes reloads the named entity's config."""
    return _dumps({"version": 2, "entity_path": f"{entity_type}/{name}"})


def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, entity name) of a change notification; ValueError if malformed."""
    o = _loads(data, CONFIG_CHANGES)
    entity_type, sep, name = str(o.get("entity_path", "")).partition("/")
    if o.get("version") != 2 or not sep or not name or entity_type not in CONFIG_TYPE_PATHS:
        raise ValueError(f"{CONFIG_CHANGES}: unsupported notification {o}")
    return entity_type, name


def config_change_seq(node: str) -> int | None:
    """The sequence number of a ``config_change_<seq>`` child; None for any other name."""
    if not node.startswith(CONFIG_CHANGE_PREFIX):
        return None
    digits = node[len(CONFIG_CHANGE_PREFIX):]
    return int(digits) if digits.isdigit() else None


# ----------------------------------------------------------------------------- reassignment

def encode_reassignment(entries) -> bytes:
    """/admin/reassign_partitions in Kafka's format (seed 004; kafka-reassign-partitions'
    --reassignment-json-file): {"version":1,"partitions":[{"topic":..,"partition":..,
    "replicas":[..]}]}. `entries`: (topic, partition, replicas) triples."""
    return _dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for t, p, r in sorted(
            entries, key=lambda e: (e[0], e[1]))]})


def decode_reassignment(data: bytes) -> list[tuple[str, int, list[int]]]:
    """The (topic, partition, replicas) entries; ValueError naming the first thing wrong
    (Kafka's parsePartitionReassignmentData rejects the whole document, and so does replog:
    a request is never half-read)."""
    o = _loads(data, REASSIGN_PARTITIONS)
    parts = o.get("partitions")
    if not isinstance(parts, list):
        raise ValueError(f'{REASSIGN_PARTITIONS}: "partitions" must be a list')
    out: list[tuple[str, int, list[int]]] = []
    seen: set[tuple[str, int]] = set()
    for i, e in enumerate(parts):
        if not isinstance(e, dict):
            raise ValueError(f"{REASSIGN_PARTITIONS}: entry {i} is not an object")
        topic, partition, replicas = e.get("topic"), e.get("partition"), e.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f'{REASSIGN_PARTITIONS}: entry {i} has no "topic"')
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise ValueError(f'{REASSIGN_PARTITIONS}: entry {i} ({topic}) has no valid '
                             f'"partition"')
        if not isinstance(replicas, list) or not all(
                isinstance(r, int) and not isinstance(r, bool) for r in replicas):
            raise ValueError(f'{REASSIGN_PARTITIONS}: {topic}-{partition}: "replicas" must be '
                             f"a list of broker ids")
        if (topic, partition) in seen:
            raise ValueError(f"{REASSIGN_PARTITIONS}: duplicate partition {topic}-{partition}")
        seen.add((topic, partition))
        out.append((topic, partition, list(replicas)))
    return out


# ---------------------------------------------------------------- /restart_partitions (C5)

RESTART_ENTRY_PREFIX = "restart-"


@dataclass(frozen=True)
class RestartEntry:
    """One /restart_partitions/restart-<seq> entry (seed 003 step 2.4): broker `broker` lost
    its replicas of `partitions` (sorted (topic, partition) pairs) with log dir `log_dir`.

    Seed 003's open question 3 (brokers writing one znode at once, the controller removing what
    it handled) is settled as ZooKeeper's Queue recipe: each report is its own persistent
    sequential child, so brokers never contend; the controller handles each child on its event
    queue and deletes it afterwards. Processing is at least once, so it is idempotent (the
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
    "partitions":[{"topic":"t","partitions":[1,2,3],"partition_epochs":[4,4,9]}]} (seed 003's
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
    return _dumps({"version": 1, "broker": e.broker, "log_dir": e.log_dir,
                   "broker_epoch": e.broker_epoch, "partitions": groups})


def decode_restart_entry(data: bytes) -> RestartEntry:
    """ValueError naming what is wrong (the controller logs and deletes an unreadable entry:
    nothing can ever make it readable)."""
    o = _loads(data, RESTART_PARTITIONS)
    broker, log_dir = o.get("broker"), o.get("log_dir", "")
    if isinstance(broker, str) and broker.isdigit():  # the seed's example quotes numbers
        broker = int(broker)
    if not isinstance(broker, int) or isinstance(broker, bool) or broker < 0:
        raise ValueError(f'{RESTART_PARTITIONS}: no valid "broker"')
    if not isinstance(log_dir, str):
        raise ValueError(f'{RESTART_PARTITIONS}: "log_dir" must be a string')
    groups = o.get("partitions")
    if not isinstance(groups, list):
        raise ValueError(f'{RESTART_PARTITIONS}: "partitions" must be a list')
    out: dict[tuple[str, int], int] = {}
    fenced = False
    for g in groups:
        topic = g.get("topic") if isinstance(g, dict) else None
        ps = g.get("partitions") if isinstance(g, dict) else None
        if not isinstance(topic, str) or not topic or not isinstance(ps, list):
            raise ValueError(f'{RESTART_PARTITIONS}: each entry needs "topic" and "partitions"')
        # An entry without epochs (a broker before the fence), or with an unreadable list, is
        # read as unfenced but valid (-1): applying a late duplicate costs availability (the
        # replica rejoins the ISR again), dropping a real loss could leave an empty replica
        # in the ISR to be elected cleanly - durability first, as KIP-966 chooses.
        pes = g.get("partition_epochs")
        fenced = fenced or pes is not None
        if not isinstance(pes, list) or len(pes) != len(ps):
            pes = [-1] * len(ps)
        for p, pe in zip(ps, pes, strict=True):
            if isinstance(p, str) and p.isdigit():
                p = int(p)
            if not isinstance(p, int) or isinstance(p, bool) or p < 0:
                raise ValueError(f"{RESTART_PARTITIONS}: {topic}: bad partition {p!r}")
            pe = _int_or(pe, -1)
            # named twice: the higher epoch is the later report of the same lost replica
            out[(topic, p)] = max(out.get((topic, p), -1), pe)
    parts = tuple(sorted(out))
    return RestartEntry(broker, log_dir, parts, _int_or(o.get("broker_epoch", -1), -1),
                        tuple(out[tp] for tp in parts) if fenced else ())


def _int_or(x: object, default: int) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else default


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


def decode_lost_replicas(data: bytes) -> dict[str, set[tuple[str, int]]]:
    """ValueError naming what is wrong."""
    o = _loads(data, LOST_REPLICAS)
    dirs = o.get("log_dirs")
    if not isinstance(dirs, dict):
        raise ValueError(f'{LOST_REPLICAS}: "log_dirs" must be an object')
    out: dict[str, set[tuple[str, int]]] = {}
    for d, groups in dirs.items():
        if not isinstance(groups, list):
            raise ValueError(f"{LOST_REPLICAS}: {d}: expected a list")
        tps = out.setdefault(d, set())
        for g in groups:
            topic = g.get("topic") if isinstance(g, dict) else None
            ps = g.get("partitions") if isinstance(g, dict) else None
            if not isinstance(topic, str) or not isinstance(ps, list) or not all(
                    isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in ps):
                raise ValueError(f"{LOST_REPLICAS}: {d}: bad entry {g!r}")
            tps.update((topic, p) for p in ps)
    return out

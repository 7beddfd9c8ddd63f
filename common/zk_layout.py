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
    /admin/reassign_partitions               (design.md#reassignment / Kafka's JSON)
    /admin/preferred_replica_election
    /restart_partitions/restart-<seq>        (design.md#jbod)

Choices replog makes where Kafka's layout has no answer:

- Controllers are separate processes, so ``/controller`` also carries the active controller's
  gRPC endpoint (``host``, ``port``: its inter-broker listener): brokers send AlterPartition and
  ControlledShutdown there. ``endpoints`` lists every advertised listener (KIP-103, as in a
  broker registration), so a broker answers Metadata with the controller's endpoint on the
  listener the request came in on. A ``/controller`` without ``endpoints`` (written before
  listeners had names) has the one endpoint, which serves every listener.
- A broker registration's ``host``/``port`` are those of its inter-broker listener (Kafka writes
  the first PLAINTEXT endpoint there for old clients): the controller connects there, and
  readers of registrations older than ``endpoints`` keep working. Its
  ``listener_security_protocol_map`` is the broker's (PLAINTEXT or SSL per listener).
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

import functools
import json
import re
from dataclasses import dataclass, field

from common.errors import InvalidTopicError
from common.listeners import PLAINTEXT, EndPoint, decode_endpoints, encode_endpoints
from common.names import validate_topic

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


class MalformedZnode(ValueError):
    """A znode replog cannot read: the one error every decoder here raises (a ValueError, as
    callers written before it catch)."""


def decode_at(path: str, data: bytes, decode):
    """``decode(data)``, a MalformedZnode naming ``path`` when it cannot be read (the decoders
    name the kind of znode, not which one)."""
    try:
        return decode(data)
    except MalformedZnode as e:
        raise MalformedZnode(f"{path}: {e}") from None


def _loads(data: bytes, what: str) -> dict:
    try:
        obj = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MalformedZnode(f"{what}: not JSON ({e})") from None
    except RecursionError:  # nesting deeper than the interpreter's stack (a hostile znode)
        raise MalformedZnode(f"{what}: JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise MalformedZnode(f"{what}: expected a JSON object")
    return obj


# Every decoder below raises MalformedZnode, and only that, for a znode it cannot read: the
# controller and the brokers log such a znode and skip or refuse it (a hostile or corrupt znode
# never stops a process). Kafka's ints are int32 (broker ids, partitions, epochs) or int64
# (timestamps): a larger number would only fail later, when it is put in a request.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def _decoder(what: str):
    """Turn the KeyError/TypeError/AttributeError/OverflowError of reading a JSON value of the
    wrong shape into ValueError naming ``what`` (the znode)."""
    def wrap(fn):
        @functools.wraps(fn)
        def decode(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except MalformedZnode as e:
                if str(e).startswith(what):
                    raise
                raise MalformedZnode(f"{what}: {e}") from None
            except ValueError as e:  # int(), endpoint parsing, ...
                raise MalformedZnode(f"{what}: {e}") from None
            except KeyError as e:
                raise MalformedZnode(f"{what}: missing field {e}") from None
            except (TypeError, AttributeError, OverflowError, RecursionError) as e:
                raise MalformedZnode(f"{what}: malformed ({type(e).__name__}: {e})") from None
        return decode
    return wrap


def _int(x: object, what: str, lo: int = 0, hi: int = INT32_MAX) -> int:
    """A JSON integer (or a string of decimal digits, as Kafka writes timestamps and versions)
    in [lo, hi]; ValueError otherwise (a bool, a float, null, out of range)."""
    if isinstance(x, str) and re.fullmatch(r"-?[0-9]{1,19}", x.strip()):
        x = int(x)
    if not isinstance(x, int) or isinstance(x, bool):
        raise MalformedZnode(f"{what} must be an integer, not {_short(x)}")
    if not lo <= x <= hi:
        raise MalformedZnode(f"{what} {x} is out of range [{lo}, {hi}]")
    return x


def _ids(xs: object, what: str, lo: int = 0) -> tuple[int, ...]:
    """A list of distinct int32 ids >= lo (replicas, an ISR, an ELR)."""
    if not isinstance(xs, list):
        raise MalformedZnode(f"{what} must be a list, not {_short(xs)}")
    out = tuple(_int(x, what, lo) for x in xs)
    if len(set(out)) != len(out):
        raise MalformedZnode(f"{what} {list(out)} names a broker twice")
    return out


def _str(x: object, what: str) -> str:
    if not isinstance(x, str):
        raise MalformedZnode(f"{what} must be a string, not {_short(x)}")
    return x


def _short(x: object) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _topic_name(topic: object, what: str) -> str:
    try:
        return validate_topic(topic)  # type: ignore[arg-type]
    except InvalidTopicError as e:
        raise MalformedZnode(f"{what}: {e}") from None


# ----------------------------------------------------------------------------- cluster / controller

def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


@_decoder(CLUSTER_ID)
def decode_cluster_id(data: bytes) -> str:
    cluster_id = _str(_loads(data, CLUSTER_ID)["id"], f"{CLUSTER_ID} id")
    if not cluster_id:
        raise MalformedZnode(f"{CLUSTER_ID}: empty id")
    return cluster_id


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


@_decoder(CONTROLLER)
def decode_controller(data: bytes) -> ControllerInfo:
    o = _loads(data, CONTROLLER)
    return ControllerInfo(_int(o["brokerid"], "brokerid"), _str(o.get("host", ""), "host"),
                          _int(o.get("port", -1), "port", -1, 65535),
                          _int(o.get("timestamp", 0), "timestamp", -1, INT64_MAX),
                          _endpoints(o.get("endpoints")))


def _endpoints(items: object) -> tuple[EndPoint, ...]:
    if items is None:
        return ()
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise MalformedZnode(f"endpoints must be a list of strings, not {_short(items)}")
    return decode_endpoints(items)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


@_decoder(CONTROLLER_EPOCH)
def decode_controller_epoch(data: bytes) -> int:
    try:
        text = bytes(data).decode("ascii")
    except UnicodeDecodeError:
        raise MalformedZnode(f"{CONTROLLER_EPOCH}: not a number") from None
    return _int(text, CONTROLLER_EPOCH)


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
    # (listener, security protocol) of each listener that is not PLAINTEXT
    # (listener.security.protocol.map), sorted
    security_protocols: tuple[tuple[str, str], ...] = ()

    @property
    def listener_endpoints(self) -> tuple[EndPoint, ...]:
        return self.endpoints or (EndPoint(PLAINTEXT, self.host, self.port),)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def offline_log_dirs(self) -> tuple[str, ...]:
        """The dirs this broker has taken offline (design.md#jbod / KIP-112), as registered."""
        return tuple(d.path for d in self.log_dirs if not d.online)


def encode_broker(reg: BrokerRegistration) -> bytes:
    return _dumps({
        "version": 5, "host": reg.host, "port": reg.port, "jmx_port": -1,
        "timestamp": str(reg.timestamp_ms),
        "endpoints": encode_endpoints(reg.listener_endpoints),
        "listener_security_protocol_map": {
            e.listener: dict(reg.security_protocols).get(e.listener, PLAINTEXT)
            for e in reg.listener_endpoints},
        "rack": reg.rack, "features": {},
        "log_dirs": [{"path": d.path, "directory_id": d.directory_id, "online": d.online}
                     for d in reg.log_dirs],
        # design.md#jbod: the dirs taken offline, also as a list for operators and tools; the
        # broker rewrites its registration when one goes offline.
        "offline_log_dirs": list(reg.offline_log_dirs),
        "clean_shutdown": reg.clean_shutdown, "metrics_url": reg.metrics_url,
    })


def decode_broker(broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
    return _decoder(broker_path(broker_id))(_decode_broker)(broker_id, data, epoch)


def _decode_broker(broker_id: int, data: bytes, epoch: int) -> BrokerRegistration:
    o = _loads(data, broker_path(broker_id))
    # absent in registrations before design.md#jbod
    offline = set(_strs(o.get("offline_log_dirs") or [], "offline_log_dirs"))
    endpoints = _endpoints(o.get("endpoints"))
    if o.get("host") is None and endpoints:
        # Kafka writes host null / port -1 when no listener is PLAINTEXT: use the first one.
        host, port = endpoints[0].host, endpoints[0].port
    else:
        host, port = _str(o["host"], "host"), _int(o["port"], "port", 0, 65535)
    log_dirs = o.get("log_dirs", [])
    if not isinstance(log_dirs, list):
        raise MalformedZnode(f"log_dirs must be a list, not {_short(log_dirs)}")
    rack, url = o.get("rack"), o.get("metrics_url")
    protocols = o.get("listener_security_protocol_map")
    protocols = {} if protocols is None else protocols
    if not isinstance(protocols, dict):
        raise MalformedZnode(f"listener_security_protocol_map must be an object, not "
                             f"{_short(protocols)}")
    return BrokerRegistration(
        broker_id, host, port, None if rack is None else _str(rack, "rack"),
        tuple(LogDirInfo(_str(d["path"], "log dir path"),
                         _str(d.get("directory_id", ""), "directory_id"),
                         bool(d.get("online", True)) and d["path"] not in offline)
              for d in log_dirs),
        bool(o.get("clean_shutdown", True)), None if url is None else _str(url, "metrics_url"),
        _int(o.get("timestamp", 0), "timestamp", -1, INT64_MAX), epoch, endpoints,
        tuple(sorted((_str(k, "listener"), _str(v, "security protocol"))
                     for k, v in protocols.items() if v != PLAINTEXT)))


def _strs(xs: object, what: str) -> list[str]:
    if not isinstance(xs, list) or not all(isinstance(x, str) for x in xs):
        raise MalformedZnode(f"{what} must be a list of strings, not {_short(xs)}")
    return xs


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
    """ValueError for an illegal topic name (a znode child any ZooKeeper client can create),
    partition ids that are not int32s >= 0, or replica lists that are empty or name a broker
    twice (Kafka's AdminZkClient refuses both when it writes an assignment)."""
    what = topic_path(topic)
    return _decoder(what)(_decode_topic)(_topic_name(topic, what), data, what)


def _decode_topic(topic: str, data: bytes, what: str) -> TopicAssignment:
    o = _loads(data, what)

    def ints(m: object, key: str, required: bool = False) -> dict[int, list[int]]:
        if m is None and not required:
            return {}
        if not isinstance(m, dict):
            raise MalformedZnode(f"{what}: {key} must be an object, not {_short(m)}")
        out = {}
        for p, r in m.items():
            replicas = _ids(r, f"{key}[{p}]")
            if required and not replicas:
                raise MalformedZnode(f"{what}: partition {p} has no replicas")
            out[_int(p, f"{what}: partition")] = list(replicas)
        return out

    partitions = ints(o["partitions"], "partitions", required=True)
    return TopicAssignment(topic, _str(o.get("topic_id", ""), "topic_id"), partitions,
                           ints(o.get("adding_replicas"), "adding_replicas"),
                           ints(o.get("removing_replicas"), "removing_replicas"))


# ----------------------------------------------------------------------------- partition state

# Kafka's LeaderAndIsr.LeaderDuringDelete / EpochDuringDelete: the leader an UpdateMetadata
# names, and the epoch a StopReplica(delete) carries, for a topic being deleted.
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2


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
    return _decoder(what)(_decode_partition_state)(data, version, what)


def _decode_partition_state(data: bytes, version: int, what: str) -> LeaderAndIsr:
    o = _loads(data, what)
    return LeaderAndIsr(_int(o["leader"], "leader", NO_LEADER),
                        _int(o["leader_epoch"], "leader_epoch"), _ids(o["isr"], "isr"),
                        _int(o["controller_epoch"], "controller_epoch"), version,
                        _ids(o.get("elr", []), "elr"),
                        _ids(o.get("last_known_elr", []), "last_known_elr"),
                        _int(o.get("leader_recovery_state", LEADER_RECOVERED),
                             "leader_recovery_state", LEADER_RECOVERED, LEADER_RECOVERING))


# ----------------------------------------------------------------------------- configs

def encode_topic_config(config: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(config)})


@_decoder("config")
def decode_topic_config(data: bytes) -> dict[str, str]:
    """The ``config`` map; ValueError unless it is an object of strings (Kafka writes every
    value as a string)."""
    config = _loads(data, "config").get("config", {})
    if not isinstance(config, dict) or not all(
            isinstance(v, (str, int, float, bool)) for v in config.values()):
        raise MalformedZnode(f"config: expected an object of strings, not {_short(config)}")
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


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


@_decoder(CONFIG_CHANGES)
def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, entity name) of a change notification; ValueError if malformed."""
    o = _loads(data, CONFIG_CHANGES)
    entity_type, sep, name = str(o.get("entity_path", "")).partition("/")
    if o.get("version") != 2 or not sep or not name or entity_type not in CONFIG_TYPE_PATHS:
        raise MalformedZnode(f"{CONFIG_CHANGES}: unsupported notification {o}")
    return entity_type, name


def config_change_seq(node: str) -> int | None:
    """The sequence number of a ``config_change_<seq>`` child; None for any other name."""
    if not node.startswith(CONFIG_CHANGE_PREFIX):
        return None
    digits = node[len(CONFIG_CHANGE_PREFIX):]
    return int(digits) if digits.isascii() and digits.isdigit() else None


# ----------------------------------------------------------------------------- reassignment

def encode_reassignment(entries) -> bytes:
    """/admin/reassign_partitions in Kafka's format (design.md#reassignment;
    kafka-reassign-partitions' --reassignment-json-file):
    {"version":1,"partitions":[{"topic":..,"partition":.., "replicas":[..]}]}. `entries`: (topic,
    partition, replicas) triples."""
    return _dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for t, p, r in sorted(
            entries, key=lambda e: (e[0], e[1]))]})


@_decoder(REASSIGN_PARTITIONS)
def decode_reassignment(data: bytes) -> list[tuple[str, int, list[int]]]:
    """The (topic, partition, replicas) entries; ValueError naming the first thing wrong
    (Kafka's parsePartitionReassignmentData rejects the whole document, and so does replog:
    a request is never half-read)."""
    o = _loads(data, REASSIGN_PARTITIONS)
    parts = o.get("partitions")
    if not isinstance(parts, list):
        raise MalformedZnode(f'{REASSIGN_PARTITIONS}: "partitions" must be a list')
    out: list[tuple[str, int, list[int]]] = []
    seen: set[tuple[str, int]] = set()
    for i, e in enumerate(parts):
        if not isinstance(e, dict):
            raise MalformedZnode(f"{REASSIGN_PARTITIONS}: entry {i} is not an object")
        topic, partition, replicas = e.get("topic"), e.get("partition"), e.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise MalformedZnode(f'{REASSIGN_PARTITIONS}: entry {i} has no "topic"')
        topic = _topic_name(topic, f"{REASSIGN_PARTITIONS}: entry {i}")
        if not isinstance(partition, int) or isinstance(partition, bool) or \
                not 0 <= partition <= INT32_MAX:
            raise MalformedZnode(f'{REASSIGN_PARTITIONS}: entry {i} ({topic}) has no valid '
                                 f'"partition"')
        if not isinstance(replicas, list) or not all(
                isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= INT32_MAX
                for r in replicas):
            # empty or repeated replicas are the controller's to refuse per partition
            # (INVALID_REPLICA_ASSIGNMENT), as KIP-455's API does
            raise MalformedZnode(f'{REASSIGN_PARTITIONS}: {topic}-{partition}: "replicas" must '
                                 f"be a list of broker ids")
        if (topic, partition) in seen:
            raise MalformedZnode(f"{REASSIGN_PARTITIONS}: duplicate partition "
                                 f"{topic}-{partition}")
        seen.add((topic, partition))
        out.append((topic, partition, list(replicas)))
    return out


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
    return _dumps({"version": 1, "broker": e.broker, "log_dir": e.log_dir,
                   "broker_epoch": e.broker_epoch, "partitions": groups})


@_decoder(RESTART_PARTITIONS)
def decode_restart_entry(data: bytes) -> RestartEntry:
    """ValueError naming what is wrong (the controller logs and deletes an unreadable entry:
    nothing can ever make it readable)."""
    o = _loads(data, RESTART_PARTITIONS)
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
        topic = _topic_name(topic, RESTART_PARTITIONS)
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
            pe = _int_or(pe, -1)
            # named twice: the higher epoch is the later report of the same lost replica
            out[(topic, p)] = max(out.get((topic, p), -1), pe)
    parts = tuple(sorted(out))
    return RestartEntry(broker, log_dir, parts, _int_or(o.get("broker_epoch", -1), -1),
                        tuple(out[tp] for tp in parts) if fenced else ())


def _int_or(x: object, default: int) -> int:
    ok = isinstance(x, int) and not isinstance(x, bool) and -1 <= x <= INT64_MAX
    return x if ok else default  # type: ignore[return-value]


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


@_decoder(LOST_REPLICAS)
def decode_lost_replicas(data: bytes) -> dict[str, set[tuple[str, int]]]:
    """ValueError naming what is wrong."""
    o = _loads(data, LOST_REPLICAS)
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

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
    /restart_partitions/restart-<seq>        (design.md#jbod; common/zk_restarts.py)

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

import json
from dataclasses import dataclass, field

from common.listeners import PLAINTEXT, EndPoint, decode_endpoints, encode_endpoints
from common.zk_codec import INT32_MAX as INT32_MAX
from common.zk_codec import INT64_MAX as INT64_MAX
from common.zk_codec import MalformedZnode as MalformedZnode
from common.zk_codec import decode_at as decode_at
from common.zk_codec import decoder, dumps, ids, int_in, loads, short, string, strs, topic_name

# the JBOD design's znodes (design.md#jbod), kept in a module of their own and read from here
from common.zk_restarts import LOST_REPLICAS as LOST_REPLICAS
from common.zk_restarts import RESTART_ENTRY_PREFIX as RESTART_ENTRY_PREFIX
from common.zk_restarts import RESTART_PARTITIONS as RESTART_PARTITIONS
from common.zk_restarts import RestartEntry as RestartEntry
from common.zk_restarts import decode_lost_replicas as decode_lost_replicas
from common.zk_restarts import decode_restart_entry as decode_restart_entry
from common.zk_restarts import encode_lost_replicas as encode_lost_replicas
from common.zk_restarts import encode_restart_entry as encode_restart_entry
from common.zk_restarts import lost_replicas_path as lost_replicas_path
from common.zk_restarts import restart_entry_path as restart_entry_path

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


# ----------------------------------------------------------------------------- cluster / controller

def encode_cluster_id(cluster_id: str) -> bytes:
    return dumps({"version": "1", "id": cluster_id})


@decoder(CLUSTER_ID)
def decode_cluster_id(data: bytes) -> str:
    cluster_id = string(loads(data, CLUSTER_ID)["id"], f"{CLUSTER_ID} id")
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
    return dumps(o)


@decoder(CONTROLLER)
def decode_controller(data: bytes) -> ControllerInfo:
    o = loads(data, CONTROLLER)
    return ControllerInfo(int_in(o["brokerid"], "brokerid"), string(o.get("host", ""), "host"),
                          int_in(o.get("port", -1), "port", -1, 65535),
                          int_in(o.get("timestamp", 0), "timestamp", -1, INT64_MAX),
                          _endpoints(o.get("endpoints")))


def _endpoints(items: object) -> tuple[EndPoint, ...]:
    if items is None:
        return ()
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise MalformedZnode(f"endpoints must be a list of strings, not {short(items)}")
    return decode_endpoints(items)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


@decoder(CONTROLLER_EPOCH)
def decode_controller_epoch(data: bytes) -> int:
    try:
        text = bytes(data).decode("ascii")
    except UnicodeDecodeError:
        raise MalformedZnode(f"{CONTROLLER_EPOCH}: not a number") from None
    return int_in(text, CONTROLLER_EPOCH)


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
    return dumps({
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
    return decoder(broker_path(broker_id))(_decode_broker)(broker_id, data, epoch)


def _decode_broker(broker_id: int, data: bytes, epoch: int) -> BrokerRegistration:
    o = loads(data, broker_path(broker_id))
    # absent in registrations before design.md#jbod
    offline = set(strs(o.get("offline_log_dirs") or [], "offline_log_dirs"))
    endpoints = _endpoints(o.get("endpoints"))
    if o.get("host") is None and endpoints:
        # Kafka writes host null / port -1 when no listener is PLAINTEXT: use the first one.
        host, port = endpoints[0].host, endpoints[0].port
    else:
        host, port = string(o["host"], "host"), int_in(o["port"], "port", 0, 65535)
    log_dirs = o.get("log_dirs", [])
    if not isinstance(log_dirs, list):
        raise MalformedZnode(f"log_dirs must be a list, not {short(log_dirs)}")
    rack, url = o.get("rack"), o.get("metrics_url")
    protocols = o.get("listener_security_protocol_map")
    protocols = {} if protocols is None else protocols
    if not isinstance(protocols, dict):
        raise MalformedZnode(f"listener_security_protocol_map must be an object, not "
                             f"{short(protocols)}")
    return BrokerRegistration(
        broker_id, host, port, None if rack is None else string(rack, "rack"),
        tuple(LogDirInfo(string(d["path"], "log dir path"),
                         string(d.get("directory_id", ""), "directory_id"),
                         bool(d.get("online", True)) and d["path"] not in offline)
              for d in log_dirs),
        bool(o.get("clean_shutdown", True)), None if url is None else string(url, "metrics_url"),
        int_in(o.get("timestamp", 0), "timestamp", -1, INT64_MAX), epoch, endpoints,
        tuple(sorted((string(k, "listener"), string(v, "security protocol"))
                     for k, v in protocols.items() if v != PLAINTEXT)))


# ----------------------------------------------------------------------------- topics

@dataclass(frozen=True)
class TopicAssignment:
    topic: str
    topic_id: str
    partitions: dict[int, list[int]]
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)


def encode_topic(t: TopicAssignment) -> bytes:
    return dumps({
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
    return decoder(what)(_decode_topic)(topic_name(topic, what), data, what)


def _decode_topic(topic: str, data: bytes, what: str) -> TopicAssignment:
    o = loads(data, what)

    def ints(m: object, key: str, required: bool = False) -> dict[int, list[int]]:
        if m is None and not required:
            return {}
        if not isinstance(m, dict):
            raise MalformedZnode(f"{what}: {key} must be an object, not {short(m)}")
        out = {}
        for p, r in m.items():
            replicas = ids(r, f"{key}[{p}]")
            if required and not replicas:
                raise MalformedZnode(f"{what}: partition {p} has no replicas")
            out[int_in(p, f"{what}: partition")] = list(replicas)
        return out

    partitions = ints(o["partitions"], "partitions", required=True)
    return TopicAssignment(topic, string(o.get("topic_id", ""), "topic_id"), partitions,
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
    return dumps({"version": 1, "controller_epoch": s.controller_epoch, "leader": s.leader,
                   "leader_epoch": s.leader_epoch, "isr": list(s.isr), "elr": list(s.elr),
                   "last_known_elr": list(s.last_known_elr),
                   "leader_recovery_state": s.leader_recovery_state})


def decode_partition_state(data: bytes, version: int, what: str = "partition state"
                           ) -> LeaderAndIsr:
    return decoder(what)(_decode_partition_state)(data, version, what)


def _decode_partition_state(data: bytes, version: int, what: str) -> LeaderAndIsr:
    o = loads(data, what)
    return LeaderAndIsr(int_in(o["leader"], "leader", NO_LEADER),
                        int_in(o["leader_epoch"], "leader_epoch"), ids(o["isr"], "isr"),
                        int_in(o["controller_epoch"], "controller_epoch"), version,
                        ids(o.get("elr", []), "elr"),
                        ids(o.get("last_known_elr", []), "last_known_elr"),
                        int_in(o.get("leader_recovery_state", LEADER_RECOVERED),
                             "leader_recovery_state", LEADER_RECOVERED, LEADER_RECOVERING))


# ----------------------------------------------------------------------------- configs

def encode_topic_config(config: dict[str, str]) -> bytes:
    return dumps({"version": 1, "config": dict(config)})


@decoder("config")
def decode_topic_config(data: bytes) -> dict[str, str]:
    """The ``config`` map; ValueError unless it is an object of strings (Kafka writes every
    value as a string)."""
    config = loads(data, "config").get("config", {})
    if not isinstance(config, dict) or not all(
            isinstance(v, (str, int, float, bool)) for v in config.values()):
        raise MalformedZnode(f"config: expected an object of strings, not {short(config)}")
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
    return dumps({"version": 2, "entity_path": f"{entity_type}/{name}"})


@decoder(CONFIG_CHANGES)
def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, entity name) of a change notification; ValueError if malformed."""
    o = loads(data, CONFIG_CHANGES)
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
    return dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for t, p, r in sorted(
            entries, key=lambda e: (e[0], e[1]))]})


@decoder(REASSIGN_PARTITIONS)
def decode_reassignment(data: bytes) -> list[tuple[str, int, list[int]]]:
    """The (topic, partition, replicas) entries; ValueError naming the first thing wrong
    (Kafka's parsePartitionReassignmentData rejects the whole document, and so does replog:
    a request is never half-read)."""
    o = loads(data, REASSIGN_PARTITIONS)
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
        topic = topic_name(topic, f"{REASSIGN_PARTITIONS}: entry {i}")
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

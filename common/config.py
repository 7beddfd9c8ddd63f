"""Configuration: Kafka's property names, ``server.properties``-style files, CLI overrides.

Every key replog understands is declared once here with its type, default and check; a file or
override naming an unknown key, or a value that does not parse or is out of range, is rejected
at startup with a ConfigError naming the key (SPEC "Configuration"). Values are typed after
parsing: ``cfg["log.dirs"]`` is a list, ``cfg["replica.lag.time.max.ms"]`` an int.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from common.errors import ConfigError
from common.listeners import (
    EndPoint,
    listener_config,
    parse_endpoints,
    parse_protocol_map,
)
from common.properties import parse_properties_text
from common.security.ssl_principal_mapper import parse_mapping_rules
from common.security.tls import LISTENER_PREFIXED

LONG_MAX = (1 << 63) - 1


def _int(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        v = int(text.strip())
        if lo is not None and v < lo:
            raise ValueError(f"must be at least {lo}")
        if hi is not None and v > hi:
            raise ValueError(f"must be at most {hi}")
        return v
    parse.__doc__ = "integer"
    return parse


def _bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "false"):
        return t == "true"
    raise ValueError("must be true or false")


def _float(lo: float | None = None, hi: float | None = None) -> Callable[[str], float]:
    def parse(text: str) -> float:
        v = float(text.strip())
        if v != v or (lo is not None and v < lo) or (hi is not None and v > hi):
            raise ValueError(f"must be between {lo} and {hi}" if hi is not None else
                             f"must be at least {lo}")
        return v
    parse.__doc__ = "number"
    return parse


def _policy(text: str) -> str:
    """cleanup.policy's list: delete, compact, or both (Kafka's ValidList)."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items or any(x not in ("delete", "compact") for x in items):
        raise ValueError("must list delete, compact or both")
    return ",".join(items)


def _str(text: str) -> str:
    return text.strip()


def _list(text: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ValueError("must list at least one entry")
    return items


def _super_users(text: str) -> str:
    from common.security.acl import parse_super_users
    parse_super_users(text)  # a malformed principal is refused at startup
    return text.strip()


def _ip_counts(text: str) -> dict[str, int]:
    """host:count,host:count (max.connections.per.ip.overrides)."""
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip() or int(count) < 0:
            raise ValueError(f"{item!r} is not host:count")
        out[host.strip()] = int(count)
    return out


def _choice(*options: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        for o in options:
            if text.strip().lower() == o.lower():
                return o
        raise ValueError(f"must be one of {', '.join(options)}")
    return parse


@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    # A secret (Kafka's ConfigDef.Type.PASSWORD): DescribeConfigs answers it with value null
    # and is_sensitive true, synonyms included, whoever asks (KafkaConfig.maybeSensitive).
    sensitive: bool = False


def _k(name: str, parse, default, doc: str, sensitive: bool = False) -> Key:
    return Key(name, parse, default, doc, sensitive)


# One table for the broker, the controller and the local cluster. Where replog adds a key it is
# marked; everything else means what it means in Kafka.
KEYS: dict[str, Key] = {k.name: k for k in [
    _k("broker.id", _int(0), None, "this broker's id (required for a broker)"),
    _k("controller.id", _int(0), None, "replog: this controller candidate's id"),
    _k("broker.rack", _str, None, "rack, for rack-aware replica assignment"),
    _k("listeners", parse_endpoints, [EndPoint("PLAINTEXT", "127.0.0.1", 9092)],
       "gRPC listeners, [NAME://]host:port,... (KIP-103; host:port alone is PLAINTEXT)"),
    _k("advertised.listeners", parse_endpoints, None,
       "per listener, the address registered for clients and peers, if not listeners"),
    _k("listener.security.protocol.map", parse_protocol_map, None,
       "NAME:PROTOCOL,... (Kafka's default maps PLAINTEXT to PLAINTEXT and SSL to SSL; "
       "PLAINTEXT and SSL are served)"),
    _k("control.plane.listener.name", _str, None,
       "KIP-291: the broker listener the controller's requests go to (default: "
       "inter.broker.listener.name)"),
    # TLS (common/security/tls.py; PEM as KIP-651). Each may also be set per listener as
    # listener.name.<name>.<key>, which wins for that listener, as in Kafka.
    _k("ssl.client.auth", _choice("none", "requested", "required"), "none",
       "SSL listeners: whether clients must present a certificate (mutual TLS)"),
    _k("ssl.keystore.type", _choice("PEM"), "PEM", "PEM only (KIP-651)"),
    _k("ssl.keystore.location", _str, None, "PEM file: private key and certificate chain"),
    # Kafka types the inline PEM forms and the key password PASSWORD (SslConfigs, KIP-651):
    # the private key is the broker's identity, a super user over mTLS.
    _k("ssl.keystore.certificate.chain", _str, None, "inline PEM certificate chain",
       sensitive=True),
    _k("ssl.keystore.key", _str, None, "inline PEM private key", sensitive=True),
    _k("ssl.key.password", _str, None, "password of an encrypted PEM private key",
       sensitive=True),
    _k("ssl.truststore.type", _choice("PEM"), "PEM", "PEM only (KIP-651)"),
    _k("ssl.truststore.location", _str, None, "PEM file of trusted CA certificates"),
    _k("ssl.truststore.certificates", _str, None, "inline PEM trusted certificates",
       sensitive=True),
    _k("ssl.principal.mapping.rules", parse_mapping_rules, "DEFAULT",
       "KIP-371: RULE:pattern/replacement/[LU],...,DEFAULT - certificate DN to principal name"),
    _k("ssl.endpoint.identification.algorithm", _choice("https"), "https",
       "the server's name is checked against its certificate (https only)"),
    _k("kafka.listener.names", _list, None,
       "replog: listeners that speak Kafka's wire protocol to Kafka clients instead of gRPC "
       "(default KAFKA; broker/kafka_listener.py)"),
    _k("socket.request.max.bytes", _int(1), 104857600,
       "largest request a Kafka-protocol listener accepts; a larger one closes its connection"),
    # Issue 42: the Kafka listener's connection bounds (broker/kafka_connections.py)
    _k("connections.max.idle.ms", _int(-1), 600000,
       "a Kafka-protocol connection that sends no request for this long is closed (-1: never)"),
    _k("max.connections.per.ip", _int(0), 2147483647,
       "Kafka-protocol connections allowed from one address; more are closed at once"),
    _k("max.connections.per.ip.overrides", _ip_counts, {},
       "host:count,...: per-address exceptions to max.connections.per.ip"),
    _k("queued.max.request.bytes", _int(-1), -1,
       "bytes of Kafka-protocol requests read or served at once per listener; past it no "
       "further request is read until some is done (-1: no bound)"),
    _k("socket.request.read.timeout.ms", _int(1), 60000,
       "replog: a Kafka-protocol request's bytes must arrive within this time of its size, "
       "else the connection is closed (a large size followed by a trickle)"),
    _k("inter.broker.listener.name", _str, None,
       "listener for replication and controller->broker requests (default PLAINTEXT, or the "
       "first advertised listener when none is named PLAINTEXT)"),
    _k("log.dirs", _list, ["/tmp/replog-logs"], "comma-separated log directories (JBOD)"),
    _k("log.dir.failure.policy", _choice("offline", "halt"), "offline",
       "offline: a failed log dir goes offline and the broker serves the others (KIP-112, "
       "docs/design.md#jbod); halt: the broker exits on any log-dir failure - pre-design behaviour "
       "(Kafka before KIP-112), for comparison (replog lab jbod)"),
    _k("zookeeper.connect", _str, "127.0.0.1:2181", "ZooKeeper connection string with chroot"),
    _k("zookeeper.session.timeout.ms", _int(1), 18000, "ZooKeeper session timeout"),
    _k("zookeeper.connection.timeout.ms", _int(1), 18000, "time to wait for a first connection"),
    _k("zookeeper.set.acl", _bool, False,
       "create znodes with ACLs: creator-all, world-read except sensitive paths (needs "
       "ZooKeeper credentials)"),
    _k("zookeeper.auth.digest", _str, None,
       "replog: ZooKeeper digest credentials user:password (Kafka uses a JAAS file); "
       "whoever holds them writes /kafka-acl and /controller", sensitive=True),
    _k("zookeeper.auth.digest.file", _str, None,
       "replog: a file holding the ZooKeeper digest credentials user:password"),
    # Authorization (common/security/authorizer.py): Kafka's AclAuthorizer on ZooKeeper.
    _k("authorizer.class.name", _str, "",
       "kafka.security.authorizer.AclAuthorizer (or kafka.security.auth.SimpleAclAuthorizer) "
       "checks every request against the ACLs in /kafka-acl; empty: no authorization"),
    _k("super.users", _super_users, "",
       "principals allowed everything, separated by semicolons (User:admin;User:CN=broker)"),
    _k("allow.everyone.if.no.acl.found", _bool, False,
       "allow every principal on a resource that has no ACL at all"),
    _k("num.replica.fetchers", _int(1), 1, "fetcher tasks per source broker"),
    _k("replica.fetch.wait.max.ms", _int(0), 500, "follower fetch long-poll wait"),
    _k("replica.fetch.min.bytes", _int(1), 1, "follower fetch min bytes"),
    _k("replica.fetch.max.bytes", _int(1), 1048576, "follower fetch bytes per partition"),
    _k("replica.fetch.response.max.bytes", _int(1), 10485760, "follower fetch bytes in all"),
    _k("max.incremental.fetch.session.cache.slots", _int(0), 1000,
       "incremental fetch sessions a leader keeps (KIP-227; 0: none, every fetch is full)"),
    _k("replica.fetch.backoff.ms", _int(0), 1000, "delay after a fetch error"),
    _k("replica.fetcher.isolate.partition.failures", _bool, True,
       "true: a partition whose fetch fails is marked failed and its fetcher goes on with the "
       "others (KIP-461, docs/design.md#kip-461); false: the whole fetcher stops - "
       "pre-design behaviour (Kafka before KIP-461), for comparison (replog lab kip-461)"),
    # replog's: followers fetch over one long-lived gRPC stream per leader (FetchStream), not
    # a unary call per fetch; false selects the unary path (A/B, or a debugging aid).
    _k("replica.fetch.stream.enable", _bool, True, "follower fetch over a gRPC stream"),
    _k("replica.lag.time.max.ms", _int(1), 30000, "ISR lag limit (lastCaughtUpTime rule)"),
    _k("replica.high.watermark.checkpoint.interval.ms", _int(1), 5000, "HW checkpoint period"),
    _k("min.insync.replicas", _int(1), 1, "acks=all needs this many in-sync replicas"),
    _k("default.replication.factor", _int(1), 1, "replication factor of auto-created topics"),
    _k("num.partitions", _int(1), 1, "partitions of auto-created topics"),
    _k("auto.create.topics.enable", _bool, True, "create unknown topics on metadata requests"),
    _k("log.segment.bytes", _int(14), 1 << 30, "roll a segment at this size"),
    _k("log.roll.ms", _int(1), 7 * 24 * 3600 * 1000, "roll a segment at this age"),
    _k("log.roll.hours", _int(1), 168, "roll a segment at this age (log.roll.ms wins)"),
    _k("log.index.interval.bytes", _int(0), 4096, "bytes between offset index entries"),
    _k("log.flush.interval.messages", _int(1), LONG_MAX,
       "fsync after this many messages: the append that crosses it fsyncs the segment files "
       "and new directory entries and moves the recovery point; only flushed records survive "
       "a power loss on this broker (otherwise durability comes from replication)"),
    _k("file.delete.delay.ms", _int(0), 60000,
       "a deleted segment is renamed to .deleted at once and removed this much later, so "
       "reads already under way finish on its open file"),
    _k("log.flush.offset.checkpoint.interval.ms", _int(0), 60000, "recovery point checkpoints"),
    _k("log.retention.ms", _int(-1), None, "delete segments older than this (-1: never)"),
    _k("log.retention.hours", _int(-1), 168, "as log.retention.ms, in hours"),
    _k("log.retention.bytes", _int(-1), -1, "delete old segments beyond this size (-1: never)"),
    _k("log.retention.check.interval.ms", _int(1), 300000, "retention check period"),
    _k("log.cleanup.policy", _policy, "delete",
       "what happens to old segments of topics without a cleanup.policy: delete (retention), "
       "compact (the log cleaner keeps the last record of each key), or both"),
    # The log cleaner (broker/storage/log_cleaner.py, design.md#compaction): Kafka's
    # CleanerConfig and the broker synonyms of the topic-level compaction settings.
    _k("log.cleaner.enable", _bool, True,
       "run the log cleaner, which compacts topics whose cleanup.policy holds compact"),
    _k("log.cleaner.threads", _int(0), 1, "background threads that clean logs"),
    _k("log.cleaner.dedupe.buffer.size", _int(0), 128 * 1024 * 1024,
       "memory for the cleaners' key -> offset maps, shared by the threads (24 bytes a key, "
       "as Kafka counts it)"),
    _k("log.cleaner.io.buffer.size", _int(0), 512 * 1024,
       "memory for the cleaners' read and write buffers, shared by the threads"),
    _k("log.cleaner.io.buffer.load.factor", _float(0.0, 1.0), 0.9,
       "how full a cleaner's offset map may get before the round stops taking keys"),
    _k("log.cleaner.io.max.bytes.per.second", _float(0.0), float("inf"),
       "bytes/s the cleaners read and write at most, together"),
    _k("log.cleaner.backoff.ms", _int(0), 15000, "a cleaner's sleep when no log needs cleaning"),
    _k("log.cleaner.min.cleanable.ratio", _float(0.0, 1.0), 0.5,
       "a log is cleaned once its dirty bytes are more than this share of its cleanable size "
       "(topic: min.cleanable.dirty.ratio)"),
    _k("log.cleaner.delete.retention.ms", _int(0), 86400000,
       "how long a tombstone stays once a cleaning has kept it (topic: delete.retention.ms)"),
    _k("log.cleaner.min.compaction.lag.ms", _int(0), 0,
       "records younger than this are not compacted (topic: min.compaction.lag.ms)"),
    _k("log.cleaner.max.compaction.lag.ms", _int(1), LONG_MAX,
       "records older than this are compacted whatever the dirty ratio; the active segment "
       "rolls at this age (topic: max.compaction.lag.ms)"),
    # The group coordinator (broker/group/, docs/groups.md): Kafka's GroupCoordinatorConfig
    # and OffsetConfig, KafkaConfig's group.* and offsets.* properties with their defaults.
    _k("group.min.session.timeout.ms", _int(0), 6000,
       "the smallest session.timeout.ms a group member may ask for"),
    _k("group.max.session.timeout.ms", _int(0), 1800000,
       "the largest session.timeout.ms a group member may ask for"),
    _k("group.initial.rebalance.delay.ms", _int(0), 3000,
       "how long a new group waits for more members before its first rebalance"),
    _k("group.max.size", _int(1), 2147483647, "members a group may hold"),
    _k("offsets.topic.num.partitions", _int(1), 50,
       "partitions of __consumer_offsets (do not change after it is created)"),
    _k("offsets.topic.replication.factor", _int(1), 3,
       "replication factor of __consumer_offsets; capped at the live brokers when created"),
    _k("offsets.topic.segment.bytes", _int(1), 104857600,
       "segment.bytes of __consumer_offsets, kept small for faster compaction and loads"),
    _k("offsets.retention.minutes", _int(1), 10080,
       "committed offsets of a group that has been empty this long are deleted"),
    _k("offsets.retention.check.interval.ms", _int(1), 600000,
       "how often the coordinator looks for expired offsets"),
    _k("offset.metadata.max.bytes", _int(0), 4096, "metadata an offset commit may carry"),
    _k("offsets.commit.timeout.ms", _int(1), 5000,
       "an offset commit waits this long for the replicas of __consumer_offsets (acks=all)"),
    _k("offsets.load.buffer.size", _int(1), 5242880,
       "bytes read at a time while loading a __consumer_offsets partition"),
    _k("message.max.bytes", _int(0), 1048588, "largest record batch accepted"),
    _k("unclean.leader.election.enable", _bool, False, "elect an out-of-sync replica if needed"),
    _k("eligible.leader.replicas.enable", _bool, False, "KIP-966 ELR"),
    _k("unclean.recovery.strategy", _choice("Proactive", "Balanced", "Manual"), "Balanced",
       "KIP-966 unclean recovery strategy"),
    _k("unclean.recovery.timeout.ms", _int(0), 300000, "KIP-966 Balanced wait for replies"),
    _k("controlled.shutdown.enable", _bool, True, "move leadership away before stopping"),
    _k("controlled.shutdown.max.retries", _int(0), 3, "controlled shutdown attempts"),
    _k("controlled.shutdown.retry.backoff.ms", _int(0), 5000, "delay between attempts"),
    _k("follower.fetch.pending.reads.insync.enable", _bool, False,
       "KIP-501 (docs/design.md#kip-501): a pending follower fetch keeps the follower in sync"),
    _k("follower.fetch.process.time.max.ms", _int(1), 500,
       "KIP-501 (only with follower.fetch.pending.reads.insync.enable): a leader "
       "that takes longer than this to serve a follower fetch relinquishes leadership "
       "(AlterPartition with relinquish_leadership); against thrashing, the controller does "
       "not make it leader again by preferred election for leader.imbalance.check.interval."
       "seconds"),
    _k("leader.replication.throttled.rate", _int(1), LONG_MAX, "bytes/s, throttled leaders"),
    _k("follower.replication.throttled.rate", _int(1), LONG_MAX, "bytes/s, throttled followers"),
    _k("replication.quota.window.num", _int(1), 11,
       "KIP-73: sample windows the replication throttle rates are measured over"),
    _k("replication.quota.window.size.seconds", _int(1), 1,
       "KIP-73: the length of one replication throttle sample window"),
    _k("replica.alter.log.dirs.io.max.bytes.per.second", _int(1), LONG_MAX,
       "bytes/s for intra-broker log dir moves"),
    _k("auto.leader.rebalance.enable", _bool, True, "periodic preferred leader election"),
    _k("leader.imbalance.check.interval.seconds", _int(1), 300, "imbalance check period"),
    _k("leader.imbalance.per.broker.percentage", _int(0, 100), 10, "imbalance threshold"),
    _k("metrics.port", _int(0, 65535), None, "replog: Prometheus /metrics port (0: any)"),
    _k("event.log.file", _str, None, "replog: structlog JSON event file"),
    _k("fault.injection.file", _str, None,
       "replog, tests only: JSON fault rules applied through the file-operation seam "
       "(broker/fault_injection.py)"),
    _k("replog.test.kill.at.reassignment.step", _int(1, 7), None,
       "replog, tests only: the controller SIGKILLs itself right after this reassignment "
       "step (1-7, docs/design.md#reassignment) - a real kill at a named step boundary"),
    _k("replog.test.kill.after.restart.entry", _bool, False,
       "replog, tests only: the controller SIGKILLs itself after applying a "
       "/restart_partitions entry and before deleting it (docs/design.md#jbod: processing is "
       "at least once)"),
]}


# Kafka's PASSWORD-type keys that replog's static schema does not declare but accepts on a
# BROKER resource (common/dynamic_config.py's ACCEPTED_WITHOUT_EFFECT), so that their dynamic
# /config/brokers values are masked too. With KEYS' ``sensitive`` marks this is the one list of
# secrets: DescribeConfigs (both front-ends) and the CLI read ``is_sensitive``.
OTHER_SENSITIVE_KEYS = frozenset({
    "ssl.keystore.password", "ssl.truststore.password", "sasl.jaas.config",
    "sasl.oauthbearer.jwks.endpoint.url.password", "password.encoder.secret",
    "password.encoder.old.secret", "delegation.token.secret.key",
    "delegation.token.master.key",
})


def is_sensitive(name: str) -> bool:
    """Whether DescribeConfigs must hide ``name``'s value: a key marked sensitive in the schema
    or a Kafka PASSWORD key, also under a listener prefix (``listener.name.<l>.ssl.key.password``,
    ``listener.name.<l>.<mechanism>.sasl.jaas.config``), and any ``*.password``."""
    base = name
    if base.startswith("listener.name."):
        base = base[len("listener.name."):].partition(".")[2]
        if base.endswith(".sasl.jaas.config"):
            base = "sasl.jaas.config"
    if base.endswith(".password") or base in OTHER_SENSITIVE_KEYS:
        return True
    spec = KEYS.get(base)
    return spec is not None and spec.sensitive


def key_spec(key: str) -> Key | None:
    """A key's declaration; ``listener.name.<name>.ssl.*`` is its ssl.* key's (Kafka's
    listener-prefixed configs), stored under the prefixed name with the listener lower-cased."""
    spec = KEYS.get(key)
    if spec is None:
        m = LISTENER_PREFIXED.match(key)
        if m is not None and m.group(2) in KEYS:
            return KEYS[m.group(2)]
    return spec


class Config(Mapping[str, Any]):
    """Typed, validated configuration; unset keys read as their defaults."""

    def __init__(self, values: Mapping[str, Any], origin: dict[str, str]):
        self._values = dict(values)
        self.origin = origin  # key -> where it was set (file path or "override")

    def __getitem__(self, key: str) -> Any:
        if key in self._values:
            return self._values[key]
        if key in KEYS:
            return KEYS[key].default
        raise KeyError(key)

    def __iter__(self):
        return iter(KEYS)

    def __len__(self) -> int:
        return len(KEYS)

    def is_set(self, key: str) -> bool:
        return key in self._values

    @property
    def retention_ms(self) -> int:
        if self.is_set("log.retention.ms"):
            return self["log.retention.ms"]
        hours = self["log.retention.hours"]
        return -1 if hours < 0 else hours * 3600 * 1000

    @property
    def roll_ms(self) -> int:
        return self["log.roll.ms"] if self.is_set("log.roll.ms") else \
            self["log.roll.hours"] * 3600 * 1000


def build_config(entries: Iterable[tuple[str, str, str]], required: Iterable[str] = ()) -> Config:
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, raw, where in entries:
        spec = key_spec(key)
        if spec is None:
            raise ConfigError(f"unknown configuration key '{key}' ({where})")
        try:
            m = LISTENER_PREFIXED.match(key)
            if m is not None:
                key = f"listener.name.{m.group(1).lower()}.{m.group(2)}"
            values[key] = spec.parse(raw)
        except ValueError as e:
            raise ConfigError(f"invalid value {raw!r} for configuration key '{key}' ({where}): "
                              f"{e}") from None
        origin[key] = where
    for key in required:
        if key not in values:
            raise ConfigError(f"missing required configuration key '{key}'")
    config = Config(values, origin)
    listener_config(config)  # cross-key listener rules (KIP-103), rejected at startup too
    return config


def parse_override(text: str) -> tuple[str, str, str]:
    if "=" not in text:
        raise ConfigError(f"--override expects key=value, got {text!r}")
    k, v = text.split("=", 1)
    return k.strip(), v.strip(), "--override"


def load_config(path: str | None, overrides: Iterable[str] = (),
                required: Iterable[str] = ()) -> Config:
    """Read a properties file (if any), apply ``--override k=v`` entries, validate."""
    entries: list[tuple[str, str, str]] = []
    if path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
        entries += parse_properties_text(text, path)
    entries += [parse_override(o) for o in overrides]
    return build_config(entries, required)

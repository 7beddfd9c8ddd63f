"""Dynamic configs: topic overrides and broker dynamic configs, their checks, alteration and
description. Pure: no ZooKeeper, no gRPC (the broker's config manager is the shell).

What both sides agree on (controller at topic creation, brokers at IncrementalAlterConfigs and
DescribeConfigs, the CLI when it prints):

- ``TOPIC_CONFIGS``: Kafka's topic-level names that replog accepts, each with its check (Kafka's
  LogConfig validators and messages), its broker-level synonym (Kafka's
  ``LogConfig.TopicConfigSynonyms``: ``retention.ms`` <- ``log.retention.ms``) and, when the broker
  has no such key, Kafka's topic default. Unknown names are INVALID_CONFIG ("Unknown topic config
  name"), as in Kafka.
- ``BROKER_DYNAMIC_CONFIGS``: the broker keys that may be changed at runtime through
  ``/config/brokers/<id>`` or ``/config/brokers/<default>`` (Kafka's DynamicBrokerConfig); values
  are parsed by common.config's schema, so a dynamic value obeys the same rules as a static one.
- ``alter``: Kafka's IncrementalAlterConfigs semantics (SET, DELETE, APPEND, SUBTRACT; a duplicate
  key is INVALID_REQUEST; nothing is applied unless every operation is valid).
- ``describe_topic`` / ``describe_broker``: DescribeConfigs entries with their source and
  synonyms, most specific first (Kafka's ConfigSource order).
- ``configured_min_isr`` / ``effective_min_isr``: the min ISR the controller and every leader
  read, from one resolver. A config that cannot
  be read is *unknown*, never "no override"; until it is known the replication factor is used, so
  acks=all never becomes weaker than configured (a configured value above the replication factor
  only makes acks=all impossible; it adds no durability the full replica set does not give).

Partial: of the topic keys, the brokers act at runtime on ``min.insync.replicas`` and the
``*.replication.throttled.replicas`` lists, and of the broker keys on the ``*.throttled.rate``
bounds (KIP-73, broker/replication_quota.py); the controller acts on
``unclean.leader.election.enable``, and - with ``eligible.leader.replicas.enable`` -
``unclean.recovery.strategy`` and ``min.insync.replicas`` (KIP-966, controller/elr.py; it watches
``/config/topics/<t>``); log-level keys (retention, segment size) are accepted as
at creation but not yet applied per topic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from common.config import KEYS, Config, is_sensitive
from common.errors import ConfigError, ErrorCode, ReplogError
from common.min_isr import effective_min_isr  # noqa: F401 (re-exported: the resolver's rule)
from common.names import ascii_digits

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
DEFAULT_BROKER = "<default>"  # Kafka's ZooKeeper entity name for cluster-wide broker configs


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource (numbers as on Kafka's wire)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class AlterOp(IntEnum):
    """Kafka's AlterConfigOp.OpType (numbers as on Kafka's wire)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class InvalidRequestError(ReplogError, ValueError):
    error_code = ErrorCode.INVALID_REQUEST


# ----------------------------------------------------------------------------- checks

def _long(lo: int, hi: int = LONG_MAX, type_name: str = "LONG") -> Callable[[str], None]:
    def check(v: str) -> None:
        try:
            n = int(v.strip())
        except ValueError:
            raise ValueError(f"Not a number of type {type_name}") from None
        if n < lo or n > hi:
            raise ValueError(f"Value must be at least {lo}" if n < lo else
                             f"Value must be no more than {hi}")
    return check


def _ratio(v: str) -> None:
    try:
        x = float(v.strip())
    except ValueError:
        raise ValueError("Not a number of type DOUBLE") from None
    if not 0.0 <= x <= 1.0:
        raise ValueError("Value must be between 0.0 and 1.0" if x == x else
                         "Not a number of type DOUBLE")


def _bool(v: str) -> None:
    if v.strip().lower() not in ("true", "false"):
        raise ValueError("Expected value to be either true or false")


def _one_of(*options: str) -> Callable[[str], None]:
    def check(v: str) -> None:
        for item in v.split(","):
            if item.strip() not in options:
                raise ValueError(f"String must be one of: {', '.join(options)}")
    return check


def _replica_list(v: str) -> None:
    # Kafka's throttled-replicas syntax: "*" or "partition:broker,partition:broker".
    if v.strip() in ("", "*"):
        return
    for item in v.split(","):
        p, sep, b = item.strip().partition(":")
        if not sep or not ascii_digits(p) or not ascii_digits(b):
            raise ValueError("must be the literal '*' or a list of replicas in the following "
                             "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


@dataclass(frozen=True)
class TopicKey:
    check: Callable[[str], None]
    broker_synonym: str | None = None  # the broker key whose value applies without an override
    default: str | None = None  # Kafka's default, where the broker has no synonym key


TOPIC_KEYS: Mapping[str, TopicKey] = {
    "cleanup.policy": TopicKey(_one_of("delete", "compact"), "log.cleanup.policy",
                               default="delete"),
    "compression.type": TopicKey(
        _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), default="producer"),
    "delete.retention.ms": TopicKey(_long(0), "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": TopicKey(_long(0), "file.delete.delay.ms"),
    "flush.messages": TopicKey(_long(1), "log.flush.interval.messages"),
    "flush.ms": TopicKey(_long(0), default=str(LONG_MAX)),
    "follower.replication.throttled.replicas": TopicKey(_replica_list, default=""),
    "index.interval.bytes": TopicKey(_long(0, INT_MAX, "INT"), "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": TopicKey(_replica_list, default=""),
    "max.message.bytes": TopicKey(_long(0, INT_MAX, "INT"), "message.max.bytes"),
    "message.timestamp.type": TopicKey(_one_of("CreateTime", "LogAppendTime"),
                                       default="CreateTime"),
    # log compaction (design.md#compaction), each with its log.cleaner.* broker synonym
    "max.compaction.lag.ms": TopicKey(_long(1), "log.cleaner.max.compaction.lag.ms"),
    "min.cleanable.dirty.ratio": TopicKey(_ratio, "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": TopicKey(_long(0), "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": TopicKey(_long(1, INT_MAX, "INT"), "min.insync.replicas"),
    "retention.bytes": TopicKey(_long(-1), "log.retention.bytes"),
    "retention.ms": TopicKey(_long(-1), "log.retention.ms", default="604800000"),
    "segment.bytes": TopicKey(_long(14, INT_MAX, "INT"), "log.segment.bytes"),
    "segment.ms": TopicKey(_long(1), "log.roll.ms", default="604800000"),
    "unclean.leader.election.enable": TopicKey(_bool, "unclean.leader.election.enable"),
    # KIP-966 (the ELR issue): how the controller recovers a partition with no eligible leader.
    "unclean.recovery.strategy": TopicKey(_one_of("Proactive", "Balanced", "Manual"),
                                          "unclean.recovery.strategy"),
}

# The topic-name -> check view the controller validates CreateTopics configs with.
TOPIC_CONFIGS: Mapping[str, Callable[[str], None]] = {k: v.check for k, v in TOPIC_KEYS.items()}

# Kafka's DynamicBrokerConfig keys that replog lets operators change at runtime.
BROKER_DYNAMIC_CONFIGS = frozenset({
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "unclean.recovery.strategy",
    # replog's: followers' transport (FetchStream or unary Fetch), switchable at runtime so a
    # benchmark compares both on one cluster in one run.
    "replica.fetch.stream.enable",
})

def _double(lo: float | None = None, hi: float | None = None) -> Callable[[str], None]:
    def check(v: str) -> None:
        try:
            x = float(v.strip())
        except ValueError:
            raise ValueError("Not a number of type DOUBLE") from None
        if lo is not None and x < lo:
            raise ValueError(f"Value must be at least {lo}")
        if hi is not None and x > hi:
            raise ValueError(f"Value must be no more than {hi}")
    return check


def _any(_v: str) -> None:
    """STRING, LIST, PASSWORD and CLASS values: Kafka checks their type only."""


_INT = _long(-(1 << 31), INT_MAX, "INT")
_SHORT = _long(-(1 << 15), (1 << 15) - 1, "SHORT")

# The rest of Kafka's DynamicBrokerConfig.AllDynamicConfigs (3.9), with each key's type check
# (a key replog's static schema also knows is parsed by that schema instead): accepted on a
# BROKER resource as Kafka accepts them, stored in /config/brokers and described, but replog
# does not act on them at runtime (only BROKER_DYNAMIC_CONFIGS above take effect). Grouped as
# Kafka's reconfigurables are.
_LISTENER_CONFIGS: Mapping[str, Callable[[str], None]] = {
    # DynamicListenerConfig: listeners, TLS, SASL (per broker)
    "advertised.listeners": _any, "listeners": _any, "listener.security.protocol.map": _any,
    "principal.builder.class": _any,
    "ssl.protocol": _any, "ssl.provider": _any, "ssl.cipher.suites": _any,
    "ssl.enabled.protocols": _any, "ssl.keymanager.algorithm": _any,
    "ssl.trustmanager.algorithm": _any, "ssl.endpoint.identification.algorithm": _any,
    "ssl.secure.random.implementation": _any,
    "ssl.client.auth": _one_of("required", "requested", "none"),
    "ssl.engine.factory.class": _any,
    "sasl.mechanism.inter.broker.protocol": _any, "sasl.jaas.config": _any,
    "sasl.enabled.mechanisms": _any, "sasl.kerberos.service.name": _any,
    "sasl.kerberos.kinit.cmd": _any, "sasl.kerberos.ticket.renew.window.factor": _double(),
    "sasl.kerberos.ticket.renew.jitter": _double(),
    "sasl.kerberos.min.time.before.relogin": _long(-LONG_MAX - 1),
    "sasl.kerberos.principal.to.local.rules": _any,
    "sasl.login.refresh.window.factor": _double(0.5, 1.0),
    "sasl.login.refresh.window.jitter": _double(0.0, 0.25),
    "sasl.login.refresh.min.period.seconds": _long(0, 900, "SHORT"),
    "sasl.login.refresh.buffer.seconds": _long(0, 3600, "SHORT"),
}
ACCEPTED_WITHOUT_EFFECT: Mapping[str, Callable[[str], None]] = {
    **_LISTENER_CONFIGS,
    # SslConfigs.RECONFIGURABLE_CONFIGS: with a listener prefix only (LISTENER_ONLY_CONFIGS)
    "ssl.keystore.type": _any, "ssl.keystore.location": _any, "ssl.keystore.password": _any,
    "ssl.key.password": _any, "ssl.truststore.type": _any, "ssl.truststore.location": _any,
    "ssl.truststore.password": _any, "ssl.keystore.certificate.chain": _any,
    "ssl.keystore.key": _any, "ssl.truststore.certificates": _any,
    # SocketServer and the connection limits
    "max.connections": _long(0, INT_MAX, "INT"),
    "max.connection.creation.rate": _long(0, INT_MAX, "INT"),
    "max.connections.per.ip": _long(0, INT_MAX, "INT"), "max.connections.per.ip.overrides": _any,
    "num.network.threads": _long(1, INT_MAX, "INT"),
    # DynamicThreadPool
    "num.io.threads": _long(1, INT_MAX, "INT"), "num.replica.fetchers": _INT,
    "num.recovery.threads.per.data.dir": _long(1, INT_MAX, "INT"),
    "background.threads": _long(1, INT_MAX, "INT"),
    "metric.reporters": _any,
    # LogCleaner
    "log.cleaner.threads": _long(0, INT_MAX, "INT"), "log.cleaner.dedupe.buffer.size": _long(0),
    "log.cleaner.io.buffer.load.factor": _double(), "log.cleaner.io.buffer.size": _long(0, INT_MAX, "INT"),  # noqa: E501
    "log.cleaner.io.max.bytes.per.second": _double(), "log.cleaner.backoff.ms": _long(0),
    # DynamicLogConfig: the broker synonyms of the topic configs (ServerTopicConfigSynonyms)
    "log.segment.bytes": _long(14, INT_MAX, "INT"), "log.roll.ms": _long(1),
    "log.roll.jitter.ms": _long(0), "log.index.size.max.bytes": _long(4, INT_MAX, "INT"),
    "log.flush.interval.messages": _long(1), "log.flush.interval.ms": _long(0),
    "log.retention.bytes": _long(-LONG_MAX - 1), "log.retention.ms": _long(-1),
    "message.max.bytes": _long(0, INT_MAX, "INT"), "log.index.interval.bytes": _long(0, INT_MAX, "INT"),  # noqa: E501
    "log.cleaner.delete.retention.ms": _long(0), "log.cleaner.min.compaction.lag.ms": _long(0),
    "log.cleaner.max.compaction.lag.ms": _long(1), "log.segment.delete.delay.ms": _long(0),
    "log.cleaner.min.cleanable.ratio": _double(0.0, 1.0),
    "log.cleanup.policy": _one_of("delete", "compact"),
    "compression.type": _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "compression.gzip.level": _INT, "compression.lz4.level": _long(1, 17, "INT"),
    "compression.zstd.level": _long(-131072, 22, "INT"), "log.preallocate": _bool,
    "log.message.timestamp.type": _one_of("CreateTime", "LogAppendTime"),
    "log.message.timestamp.difference.max.ms": _long(0),
    "log.message.timestamp.before.max.ms": _long(0), "log.message.timestamp.after.max.ms": _long(0),
    "log.message.downconversion.enable": _bool, "log.local.retention.ms": _long(-2),
    "log.local.retention.bytes": _long(-2),
    # DynamicProducerStateManagerConfig, DynamicRemoteLogConfig
    "producer.id.expiration.ms": _long(1, INT_MAX, "INT"),
    "transaction.partition.verification.enable": _bool,
    "remote.log.index.file.cache.total.size.bytes": _long(1),
    "remote.fetch.max.wait.ms": _long(1, INT_MAX, "INT"),
    "remote.log.manager.copy.max.bytes.per.second": _long(1),
    "remote.log.manager.fetch.max.bytes.per.second": _long(1),
    "remote.list.offsets.request.timeout.ms": _long(1),
}
# SslConfigs.RECONFIGURABLE_CONFIGS: only as listener.name.<listener>.<key>
LISTENER_ONLY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"})
# DynamicBrokerConfig.PerBrokerConfigs: set on one broker's entity only, never cluster-wide
# (Kafka: "Cannot update these configs at default cluster level, broker id must be specified")
PER_BROKER_CONFIGS = frozenset(_LISTENER_CONFIGS) | LISTENER_ONLY_CONFIGS
_LISTENER_PREFIX = "listener.name."

# Keys whose value is a list, the only ones APPEND and SUBTRACT apply to (Kafka's ConfigDef LIST).
LIST_KEYS = frozenset({"cleanup.policy", "leader.replication.throttled.replicas",
                       "follower.replication.throttled.replicas"})


def check_topic_config(key: str, value: str) -> str:
    """The stripped value, or ConfigError (INVALID_CONFIG) with Kafka's message."""
    spec = TOPIC_KEYS.get(key)
    if spec is None:
        raise ConfigError(f"Unknown topic config name: {key}")
    try:
        spec.check(value)
    except ValueError as e:
        raise ConfigError(f"Invalid value {value} for configuration {key}: {e}") from None
    return value.strip()


# Broker keys only the cluster-wide default entity may set: the controller and every broker
# must read one value (configured_min_isr).
CLUSTER_WIDE_ONLY = frozenset({"min.insync.replicas"})


def check_broker_entity_config(key: str, value: str) -> str:
    """``check_broker_config`` for one broker's entity (/config/brokers/<id>)."""
    if key in CLUSTER_WIDE_ONLY:
        raise ConfigError(f"{key} can only be set cluster-wide (--entity-default): the "
                          f"controller's ELR rules and every leader must read one value")
    return _check_broker_key(key, value)


def check_broker_config(key: str, value: str) -> str:
    """A key for the cluster-wide default entity (/config/brokers/<default>)."""
    if key in PER_BROKER_CONFIGS or key.startswith(_LISTENER_PREFIX):
        raise ConfigError(f"Cannot update these configs at default cluster level, broker id "
                          f"must be specified: {key}")
    return _check_broker_key(key, value)


def is_dynamic_broker_config(key: str) -> bool:
    """Whether a BROKER resource may SET ``key`` (for one broker at least)."""
    base = _listener_base(key)
    return key in BROKER_DYNAMIC_CONFIGS or key in ACCEPTED_WITHOUT_EFFECT or (
        base is not None and base in PER_BROKER_CONFIGS)


def _listener_base(key: str) -> str | None:
    """``listener.name.<listener>.<key>`` -> <key> (Kafka's per-listener overrides)."""
    if not key.startswith(_LISTENER_PREFIX):
        return None
    _, sep, base = key[len(_LISTENER_PREFIX):].partition(".")
    return base if sep and base else None


def _check_broker_key(key: str, value: str) -> str:
    base = _listener_base(key)
    if base is not None and is_dynamic_broker_config(key):
        key_for_type = base
    elif key in LISTENER_ONLY_CONFIGS:
        raise ConfigError(f"These security configs can be dynamically updated only "
                          f"per-listener using the listener prefix: {key}")
    else:
        key_for_type = key
    if key_for_type in ACCEPTED_WITHOUT_EFFECT and key_for_type not in KEYS:
        try:
            ACCEPTED_WITHOUT_EFFECT[key_for_type](value)
        except ValueError as e:
            raise ConfigError(f"Invalid value {value} for configuration {key}: {e}") from None
        return value.strip()
    if key not in BROKER_DYNAMIC_CONFIGS and key_for_type not in ACCEPTED_WITHOUT_EFFECT:
        if key in KEYS:
            raise ConfigError(f"Cannot update these configs dynamically: {key}")
        raise ConfigError(f"Unknown broker config name: {key}")
    try:
        KEYS[key_for_type].parse(value)
    except ValueError as e:
        raise ConfigError(f"Invalid value {value} for configuration {key}: {e}") from None
    return value.strip()


# ----------------------------------------------------------------------------- alteration

@dataclass(frozen=True)
class Alteration:
    name: str
    op: AlterOp
    value: str | None = None


def alter(current: Mapping[str, str], alterations: Iterable[Alteration],
          check: Callable[[str, str], str]) -> dict[str, str]:
    """Kafka's incrementalAlterConfigs on one resource: the new override map, or an error with
    nothing applied (ConfigError: INVALID_CONFIG; InvalidRequestError: INVALID_REQUEST)."""
    alterations = list(alterations)
    names = [a.name for a in alterations]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise InvalidRequestError(f"Error due to duplicate config keys: {', '.join(dups)}")
    out = dict(current)
    for a in alterations:
        if a.op == AlterOp.DELETE:
            out.pop(a.name, None)
            continue
        if a.value is None:
            raise ConfigError(f"Null value not supported for: {a.name}")
        if a.op == AlterOp.SET:
            out[a.name] = check(a.name, a.value)
            continue
        if a.name not in LIST_KEYS:
            raise ConfigError(f"Config value {a.op.name.lower()} is not allowed for config "
                              f"key: {a.name}")
        # Kafka's prepareIncrementalConfigs starts from the config's default when the
        # resource has no value of its own: APPEND compact to cleanup.policy gives
        # "delete,compact".
        base = out[a.name] if a.name in out else (TOPIC_KEYS[a.name].default or "")
        items = [x for x in base.split(",") if x.strip()]
        given = [x.strip() for x in a.value.split(",") if x.strip()]
        if a.op == AlterOp.APPEND:
            items += [x for x in given if x not in items]
        else:
            items = [x for x in items if x.strip() not in given]
        if items:
            out[a.name] = check(a.name, ",".join(items))
        else:
            out.pop(a.name, None)
    return out


# ----------------------------------------------------------------------------- description

@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool = False
    sensitive: bool = False
    synonyms: tuple[Synonym, ...] = ()


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, dict):  # listener.security.protocol.map, in its own syntax
        return ",".join(f"{k}:{v}" for k, v in value.items())
    return str(value)


# A topic key's broker synonyms after its first (TopicKey.broker_synonym), with the factor to
# the topic key's unit: Kafka's LogConfig.TopicConfigSynonyms lists.
_MORE_SYNONYMS: Mapping[str, tuple[tuple[str, int], ...]] = {
    "log.retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "log.roll.ms": (("log.roll.hours", 3_600_000),),
}


def _broker_synonyms(key: str, per_broker: Mapping[str, str], default: Mapping[str, str],
                     static: Config) -> list[Synonym]:
    """Kafka's order: this broker's dynamic value, the cluster-wide dynamic default, the
    server.properties value, the built-in default."""
    out = []
    if key in per_broker:
        out.append(Synonym(key, per_broker[key], ConfigSource.DYNAMIC_BROKER_CONFIG))
    if key in default:
        out.append(Synonym(key, default[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    if key in KEYS:
        if static.is_set(key):
            out.append(Synonym(key, _text(static[key]), ConfigSource.STATIC_BROKER_CONFIG))
        if KEYS[key].default is not None:
            out.append(Synonym(key, _text(KEYS[key].default), ConfigSource.DEFAULT_CONFIG))
    return out


def hidden(name: str) -> bool:
    """Whether a described value is withheld: a secret of the schema (``is_sensitive``), or a
    name of no known type - a value written around the checks may hold anything (Kafka's
    ``KafkaConfig.maybeSensitive``: an unknown type is sensitive)."""
    return is_sensitive(name) or not (
        name in KEYS or name in ACCEPTED_WITHOUT_EFFECT or name in TOPIC_KEYS
        or name in BROKER_DYNAMIC_CONFIGS or is_dynamic_broker_config(name))


def _entry(name: str, synonyms: list[Synonym], read_only: bool = False) -> ConfigEntry | None:
    """The described entry; a secret's value is null in it and in every synonym, whatever its
    source (Kafka's DescribeConfigs answers PASSWORD configs ``value=null, isSensitive=true``)."""
    if not synonyms:
        return None
    if hidden(name):
        synonyms = [Synonym(s.name, None, s.source) for s in synonyms]
        return ConfigEntry(name, None, synonyms[0].source, read_only, True, tuple(synonyms))
    top = synonyms[0]
    return ConfigEntry(name, top.value, top.source, read_only, False, tuple(synonyms))


def _wanted(names: Iterable[str], keys: Iterable[str] | None) -> list[str]:
    keys = list(keys or ())
    return sorted(n for n in names if not keys or n in keys)


def describe_topic(overrides: Mapping[str, str], per_broker: Mapping[str, str],
                   default: Mapping[str, str], static: Config,
                   keys: Iterable[str] | None = None) -> list[ConfigEntry]:
    """Every topic config (or those in ``keys``) as the describing broker would apply it."""
    out = []
    for name in _wanted(TOPIC_KEYS, keys):
        spec = TOPIC_KEYS[name]
        syn = []
        if name in overrides:
            syn.append(Synonym(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if spec.broker_synonym is not None:
            # Kafka's LogConfig synonyms: retention.ms <- log.retention.ms, .minutes, .hours
            # (first set wins, each scaled to ms); the built-in default shown is the last
            # key's with one (log.retention.hours=168, log.roll.hours=168, as Kafka lists).
            chain = [(spec.broker_synonym, 1), *_MORE_SYNONYMS.get(spec.broker_synonym, ())]
            found = [x for k, _ in chain
                     for x in _broker_synonyms(k, per_broker, default, static)
                     if x.source != ConfigSource.DEFAULT_CONFIG]
            defaults = [x for k, _ in chain
                        for x in _broker_synonyms(k, per_broker, default, static)
                        if x.source == ConfigSource.DEFAULT_CONFIG]
            syn += found + defaults[-1:]
            scale = dict(chain)
        else:
            scale = {}
        if spec.default is not None and not any(
                s.source == ConfigSource.DEFAULT_CONFIG for s in syn):
            syn.append(Synonym(name, spec.default, ConfigSource.DEFAULT_CONFIG))
        if syn and scale.get(syn[0].name, 1) != 1 and syn[0].value is not None:
            # the topic's value is the synonym's in the topic key's unit (hours -> ms)
            top = syn[0]
            value = str(int(top.value) * scale[top.name]) if int(top.value) >= 0 else top.value
            e = ConfigEntry(name, value, top.source, False, False, tuple(syn))
            out.append(e)
            continue
        e = _entry(name, syn)
        if e is not None:
            out.append(e)
    return out


def describe_broker(per_broker: Mapping[str, str] | None, default: Mapping[str, str],
                    static: Config, keys: Iterable[str] | None = None) -> list[ConfigEntry]:
    """A broker's configs (``per_broker`` None: the cluster-wide default entity, which holds
    only its dynamic values, as in Kafka)."""
    out = []
    if per_broker is None:
        for name in _wanted(default, keys):
            e = _entry(name, [Synonym(name, default[name],
                                      ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)])
            if e is not None:
                out.append(e)
        return out
    for name in _wanted(set(KEYS) | set(per_broker) | set(default), keys):
        e = _entry(name, _broker_synonyms(name, per_broker, default, static),
                   read_only=not is_dynamic_broker_config(name))
        if e is not None:
            out.append(e)
    return out


# ----------------------------------------------------------------------------- what applies

def configured_min_isr(topic_overrides: Mapping[str, str] | None,
                       broker_default: Mapping[str, str] | None, static_min_isr: int,
                       replication_factor: int) -> int:
    """min.insync.replicas as configured for a topic - the one resolver the controller's ELR
    rules and every broker's leader read (with two resolvers the controller read the topic
    override then its own static config while brokers also read the dynamic broker configs, so
    with a dynamic default of 1 and a controller configured with 2 the controller filled the
    ELR while leaders acknowledged acks=all on one replica, and the ELR member was then elected
    cleanly without those records).

    Sources, in order: the topic override (/config/topics/<t>), the cluster-wide dynamic broker
    default (/config/brokers/<default>), the static ``min.insync.replicas``. A per-broker dynamic
    value is refused (``check_broker_entity_config``): it would make one broker's rule differ
    from the controller's. ``None`` means *unknown* (ZooKeeper could not be read): the
    replication factor then, never a weaker fallback; so does a value
    written by hand around the checks."""
    strictest = max(1, replication_factor)
    if topic_overrides is None:
        return strictest
    raw = topic_overrides.get("min.insync.replicas")
    if raw is None:
        if broker_default is None:
            return strictest
        raw = broker_default.get("min.insync.replicas")
    if raw is None:
        return max(1, static_min_isr)
    try:
        return max(1, int(raw))
    except ValueError:
        return strictest



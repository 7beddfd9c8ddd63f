"""DescribeConfigs and IncrementalAlterConfigs, one resource at a time, for both of a broker's
wire APIs (gRPC, broker/servicer.py; Kafka's protocol, broker/kafka_config_apis.py): which
resource types a broker keeps configs for, Kafka's checks on an alter request before any
resource is touched, and the Kafka error code and one-line message of each resource. Reading
and writing the configs is the config manager's (broker/config_manager.py).

Kafka's rules, from ConfigHelper.describeConfigs and ConfigAdminManager.preprocess /
ZkAdminManager.incrementalAlterConfigs:
- a broker has configs for TOPIC and BROKER resources; a type it has none for is
  INVALID_REQUEST for that resource only;
- a topic resource's name must be a legal topic name (DescribeConfigs: INVALID_TOPIC_EXCEPTION;
  an alter of an empty name is "Default topic resources are not allowed.");
- an alter request naming one resource twice refuses both; a SET, APPEND or SUBTRACT without a
  value, or an operation Kafka does not know, refuses that resource with INVALID_REQUEST before
  anything is read (duplicate keys and invalid values are refused by
  common.dynamic_config.alter); a refused resource writes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from broker.config_manager import ConfigManager, UnknownTopicError
from common.dynamic_config import Alteration, AlterOp, ConfigEntry
from common.errors import ErrorCode, InvalidTopicError, ReplogError
from common.names import validate_topic


class ResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids (the gRPC API uses the same numbers)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


ENTITY_TYPES = {ResourceType.TOPIC: "topics", ResourceType.BROKER: "brokers"}
NO_CONFIGS = "this broker serves no dynamic configs (no ZooKeeper)"


def type_name(resource_type: int) -> str:
    try:
        return ResourceType(resource_type).name
    except ValueError:
        return ResourceType.UNKNOWN.name


@dataclass(frozen=True)
class Outcome:
    """One resource's answer: the Kafka error code, its message (None without an error) and,
    for DescribeConfigs, the entries."""

    error_code: int = int(ErrorCode.NONE)
    error_message: str | None = None
    entries: tuple[ConfigEntry, ...] = ()


def failed(code: ErrorCode, message: str) -> Outcome:
    return Outcome(int(code), message)


def config_error(e: Exception) -> Outcome:
    """The Kafka code of a ReplogError, else UNKNOWN_SERVER_ERROR (ZooKeeper unreachable...),
    with a one-line message."""
    code = e.error_code if isinstance(e, ReplogError) else ErrorCode.UNKNOWN_SERVER_ERROR
    return Outcome(int(code), (str(e) or type(e).__name__).splitlines()[0][:300])


# ---------------------------------------------------------------------- DescribeConfigs

async def describe(configs: ConfigManager | None, resource_type: int, name: str,
                   keys: Iterable[str] | None) -> Outcome:
    """One resource's entries (``keys`` empty or None: all of them)."""
    if configs is None:
        return failed(ErrorCode.UNKNOWN_SERVER_ERROR, NO_CONFIGS)
    entity_type = ENTITY_TYPES.get(resource_type)
    if entity_type is None:
        # ConfigHelper.describeConfigs' last case.
        return failed(ErrorCode.INVALID_REQUEST,
                      f"Unsupported resource type: {type_name(resource_type)}")
    try:
        if entity_type == "topics":
            validate_topic(name)  # Kafka's Topic.validate, before the topic is looked up
        entries = await configs.describe(entity_type, name, list(keys or ()))
    except Exception as e:  # noqa: BLE001 - reported per resource
        return config_error(e)
    return Outcome(entries=tuple(entries))


# ---------------------------------------------------------------------- IncrementalAlterConfigs

@dataclass(frozen=True)
class AlterResource:
    resource_type: int
    name: str
    configs: tuple[tuple[str, int, str | None], ...]  # (name, Kafka op id, value)


def _preprocess(r: AlterResource) -> tuple[str, list[Alteration]] | Outcome:
    """(entity type, alterations), or the refusal Kafka gives before reading anything."""
    names = [c[0] for c in r.configs]
    if len(set(names)) == len(names):  # duplicates: common.dynamic_config.alter names them
        bad_ops = [op for _, op, _ in r.configs if op not in AlterOp._value2member_map_]
        if bad_ops:
            return failed(ErrorCode.INVALID_REQUEST, f"Unknown operations type {bad_ops[0]}")
        nulls = [n for n, op, v in r.configs if op != AlterOp.DELETE and v is None]
        if nulls:
            return failed(ErrorCode.INVALID_REQUEST,
                          f"Null value not supported for : {', '.join(nulls)}")
    entity_type = ENTITY_TYPES.get(r.resource_type)
    if entity_type is None:
        if r.resource_type in ResourceType._value2member_map_ and r.resource_type:
            return failed(ErrorCode.INVALID_REQUEST,
                          f"AlterConfigs is only supported for topics and brokers, but "
                          f"resource type is {type_name(r.resource_type)}")
        return failed(ErrorCode.INVALID_REQUEST, f"Unknown resource type {r.resource_type}")
    if entity_type == "topics":
        if not r.name:
            return failed(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        try:
            validate_topic(r.name)
        except InvalidTopicError:
            # No topic has an illegal name (ZkAdminManager finds no such topic).
            return config_error(UnknownTopicError(f"The topic '{r.name}' does not exist."))
    ops = [Alteration(n, AlterOp(op) if op in AlterOp._value2member_map_ else AlterOp.SET, v)
           for n, op, v in r.configs]
    return entity_type, ops


async def alter(configs: ConfigManager | None, resources: list[AlterResource],
                validate_only: bool, replace: bool = False) -> list[Outcome]:
    """One outcome per resource, in order; a refused resource writes nothing. ``replace``
    (the legacy AlterConfigs): each resource's overrides become exactly its SETs."""
    seen = Counter((r.resource_type, r.name) for r in resources)
    out = []
    for r in resources:
        if configs is None:
            out.append(failed(ErrorCode.UNKNOWN_SERVER_ERROR, NO_CONFIGS))
            continue
        if seen[(r.resource_type, r.name)] > 1:
            out.append(failed(ErrorCode.INVALID_REQUEST,
                              "Each resource must appear at most once."))
            continue
        checked = _preprocess(r)
        if isinstance(checked, Outcome):
            out.append(checked)
            continue
        entity_type, alterations = checked
        try:
            await configs.alter(entity_type, r.name, alterations, validate_only,
                                replace=replace)
        except Exception as e:  # noqa: BLE001 - reported per resource
            out.append(config_error(e))
        else:
            out.append(Outcome())
    return out

"""Topic creation checks (Kafka's CreateTopics validation) and topic configs. Pure.

`plan_topic` turns one CreatableTopic into a TopicPlan (id, assignment, configs) or raises
TopicError with the Kafka error code and message a client prints: INVALID_TOPIC_EXCEPTION,
TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT,
INVALID_CONFIG, INVALID_REQUEST.

Topic configs: the keys below are Kafka's topic-level names that replog's brokers or controller
give a meaning to; brokers read /config/topics/<t> themselves. Unknown keys are INVALID_CONFIG
(Kafka's "Unknown topic config name"). The key table lives in common/dynamic_config.py: brokers
check IncrementalAlterConfigs (``replog configs``) against the same one, and the controller
watches /config/topics/<t> for the changes it acts on.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from common.assignment import (
    AssignmentError,
    BrokerMetadata,
    assign_replicas,
    validate_explicit_assignment,
)
from common.dynamic_config import TOPIC_CONFIGS
from common.errors import ErrorCode, InvalidTopicError, ReplogError
from common.names import validate_topic


class TopicError(ReplogError):
    def __init__(self, error_code: ErrorCode, message: str):
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for key, value in configs.items():
        check = TOPIC_CONFIGS.get(key)
        if check is None:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
        try:
            check(value)
        except ValueError as e:
            raise TopicError(ErrorCode.INVALID_CONFIG,
                             f"Invalid value {value} for configuration {key}: {e}") from None
        out[key] = value.strip()
    return out


def unclean_election_enabled(topic_config: Mapping[str, str] | None, cluster_default: bool
                             ) -> bool:
    """The topic override wins over `unclean.leader.election.enable` of the controller."""
    if topic_config and "unclean.leader.election.enable" in topic_config:
        return topic_config["unclean.leader.election.enable"].strip().lower() == "true"
    return cluster_default


def new_topic_id(rng: random.Random) -> str:
    """A Kafka Uuid string: 16 random bytes, URL-safe base64 without padding (22 chars).
    Like Kafka's Uuid.randomUuid, never one that starts with '-' (it reads as a CLI option)."""
    while True:
        raw = rng.getrandbits(128).to_bytes(16, "big")
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if not text.startswith("-") and raw != bytes(16) and raw != bytes(15) + b"\x01":
            return text


def collides(a: str, b: str) -> bool:
    """Kafka's Topic.hasCollision: '.' and '_' map to the same metric name."""
    return a != b and a.replace(".", "_") == b.replace(".", "_")


@dataclass(frozen=True)
class TopicPlan:
    name: str
    topic_id: str
    assignment: dict[int, list[int]]
    configs: dict[str, str]

    @property
    def replication_factor(self) -> int:
        return len(next(iter(self.assignment.values())))


def plan_topic(name: str, num_partitions: int | None, replication_factor: int | None,
               explicit: Mapping[int, Sequence[int]] | None, configs: Mapping[str, str], *,
               existing: Collection[str], live_brokers: Sequence[BrokerMetadata],
               default_partitions: int, default_replication_factor: int,
               rng: random.Random) -> TopicPlan:
    """Validate one topic of a CreateTopics request and choose its assignment.
    `num_partitions` / `replication_factor` None or -1 mean "use the default"."""
    try:
        validate_topic(name)
    except InvalidTopicError as e:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
    if name in existing:
        raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    for other in existing:
        if collides(name, other):
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Topic '{name}' collides with existing topic: {other}")
    n_set = num_partitions is not None and num_partitions != -1
    rf_set = replication_factor is not None and replication_factor != -1
    try:
        if explicit:
            if n_set or rf_set:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 "Both numPartitions or replicationFactor and replicasAssignments "
                                 "were set. Both cannot be used at the same time.")
            assignment = validate_explicit_assignment(explicit,
                                                      [b.broker_id for b in live_brokers])
        else:
            n = num_partitions if n_set else default_partitions
            rf = replication_factor if rf_set else default_replication_factor
            assignment = assign_replicas(live_brokers, n, rf, rng=rng)
    except AssignmentError as e:
        raise TopicError(e.error_code, e.message) from None
    return TopicPlan(name, new_topic_id(rng), assignment, validate_topic_configs(configs))

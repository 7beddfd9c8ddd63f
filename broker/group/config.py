"""The group coordinator's settings, under Kafka's names and with Kafka's defaults
(GroupCoordinatorConfig, OffsetConfig, KafkaConfig's group.* and offsets.* properties).

They are in common/config.py's schema too (a broker's properties, parsed and checked there);
`GroupConfig.from_config` reads any mapping of these names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

JAVA_INT_MAX = 2**31 - 1

# Kafka property name -> GroupConfig field (and the multiplier from the property's unit to ms)
_PROPERTIES: Mapping[str, tuple[str, int]] = {
    "group.min.session.timeout.ms": ("min_session_timeout_ms", 1),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", 1),
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", 1),
    "group.max.size": ("max_size", 1),
    "offsets.topic.num.partitions": ("num_partitions", 1),
    "offsets.retention.minutes": ("offsets_retention_ms", 60_000),
    "offsets.retention.check.interval.ms": ("retention_check_interval_ms", 1),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", 1),
}


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6_000            # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000        # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000        # group.initial.rebalance.delay.ms
    max_size: int = JAVA_INT_MAX                   # group.max.size
    num_partitions: int = 50                       # offsets.topic.num.partitions
    offsets_retention_ms: int = 7 * 24 * 3_600_000  # offsets.retention.minutes (10080)
    retention_check_interval_ms: int = 600_000     # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4_096         # offset.metadata.max.bytes
    # GroupCoordinator.NewMemberJoinTimeoutMs (a constant in the ZooKeeper-era coordinator):
    # a new member's parked JoinGroup is dropped after this, as its client cannot heartbeat.
    new_member_join_timeout_ms: int = 300_000

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> GroupConfig:
        """The settings from Kafka's property names (missing ones keep Kafka's defaults)."""
        values: dict[str, int] = {}
        for prop, (name, unit) in _PROPERTIES.items():
            if prop in config:
                try:
                    values[name] = int(config[prop]) * unit
                except (TypeError, ValueError):
                    raise ValueError(f"{prop}: not an integer: {config[prop]!r}") from None
        cfg = cls(**values)
        for f in fields(cfg):
            if getattr(cfg, f.name) < 0:
                raise ValueError(f"{f.name} must not be negative")
        if cfg.num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be at least 1")
        return cfg

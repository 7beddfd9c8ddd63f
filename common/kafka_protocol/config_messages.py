"""Kafka APIs a broker answers itself: DescribeConfigs, IncrementalAlterConfigs,
DescribeLogDirs, AlterReplicaLogDirs. Described from Kafka's message JSON files (see
messages.py)."""

from __future__ import annotations

from common.kafka_protocol.api import Api

APIS: list[Api] = []

"""CreatePartitions (Kafka API 37), forwarded to replog's controller. Described from Kafka's
message JSON files (see messages.py)."""

from __future__ import annotations

from common.kafka_protocol.api import Api

APIS: list[Api] = []

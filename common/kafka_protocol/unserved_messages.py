"""Kafka APIs for features replog does not have (the group coordinator, InitProducerId,
transactions): each is listed in ApiVersions and answered with the exact error a Kafka broker
without the feature gives, so clients fail clearly or fall back. Described from Kafka's
message JSON files (see messages.py)."""

from __future__ import annotations

from common.kafka_protocol.api import Api

APIS: list[Api] = []

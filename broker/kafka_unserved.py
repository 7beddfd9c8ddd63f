"""Answers to the Kafka APIs for features replog does not have (group coordinator,
InitProducerId, transactions): the exact error a Kafka broker without the feature gives."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.kafka_listener import KafkaListener

Handler = Callable[[dict, int], Awaitable[dict | None]]


def handlers(listener: KafkaListener) -> dict[int, Handler]:
    """API key -> handler(request, version) -> response body."""
    return {}

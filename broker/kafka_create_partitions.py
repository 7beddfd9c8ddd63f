"""CreatePartitions on the Kafka listener, forwarded to the active controller over gRPC."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.kafka_listener import KafkaListener

Handler = Callable[[dict, int], Awaitable[dict | None]]


def handlers(listener: KafkaListener) -> dict[int, Handler]:
    """API key -> handler(request, version) -> response body."""
    return {}

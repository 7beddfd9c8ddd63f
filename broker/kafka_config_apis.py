"""The Kafka APIs a broker answers itself, through the same code as its gRPC servicer:
DescribeConfigs, IncrementalAlterConfigs (the config manager), DescribeLogDirs and
AlterReplicaLogDirs (the replica manager)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.kafka_listener import KafkaListener

Handler = Callable[[dict, int], Awaitable[dict | None]]


def handlers(listener: KafkaListener) -> dict[int, Handler]:
    """API key -> handler(request, version) -> response body."""
    return {}

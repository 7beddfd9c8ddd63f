"""The Kafka admin APIs a broker forwards to the active controller over gRPC (as a KRaft broker
forwards them, KIP-590): CreateTopics, DeleteTopics, DescribeCluster,
ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments. Translation only: every
decision is the controller's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.kafka_listener import KafkaListener

Handler = Callable[[dict, int], Awaitable[dict | None]]


def handlers(listener: KafkaListener) -> dict[int, Handler]:
    """API key -> handler(request, version) -> response body."""
    return {}

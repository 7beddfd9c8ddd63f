"""The effective min ISR (KIP-966), alone: what the broker's replication core and the
controller's ELR rules both apply. Kept apart from common.dynamic_config so the pure broker
core (broker/replica_core.py) reaches no config parsing, TLS or gRPC through it."""

from __future__ import annotations


def effective_min_isr(configured: int, replication_factor: int) -> int:
    """min(min.insync.replicas, RF) (Kafka's effectiveMinIsr, KIP-966): what the HW freeze and
    the ELR rules use; produce admission uses the configured value as is."""
    return max(1, min(configured, max(1, replication_factor)))

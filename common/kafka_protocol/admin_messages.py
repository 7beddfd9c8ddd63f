"""Kafka admin APIs a broker forwards to replog's controller over gRPC (as a KRaft broker
forwards them to its controller, KIP-590): CreateTopics, DeleteTopics,
DescribeCluster, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments.
Described from Kafka's message JSON files (see messages.py)."""

from __future__ import annotations

from common.kafka_protocol.api import Api

APIS: list[Api] = []

"""The admin APIs' checks (Kafka's KafkaApis / ControllerApis authorization) and
DescribeCluster's assembly.

The forwarded admin APIs (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments) are checked here, on the broker,
before the Kafka listener forwards them (broker/kafka_admin.py, kafka_create_partitions.py):
the broker forwards under its own principal, so the client's is checked where it arrives (a
KRaft broker sends it in an envelope instead, KIP-590). On gRPC these are the controller's
RPCs, checked by the controller servicer. DescribeCluster is answered from this broker's
metadata cache, as KafkaApis.handleDescribeCluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from broker.apis.context import ApiContext
from common.controller_requests import BrokerNode
from common.errors import ErrorCode
from common.security.acl import CLUSTER_RESOURCE, AclOperation


def cluster_refusal(ctx: ApiContext, operation: AclOperation) -> tuple[int, str] | None:
    """CLUSTER_AUTHORIZATION_FAILED unless the requester may ``operation`` the cluster
    (ElectLeaders and AlterPartitionReassignments: Alter; ListPartitionReassignments:
    Describe)."""
    if ctx.authorized_on_cluster(operation):
        return None
    return (int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
            f"{ctx.principal} is not authorized to {operation.value} on the cluster")


def create_topics_denied(ctx: ApiContext, names: Iterable[str | None]) -> frozenset[str]:
    """CreateTopics: Create on the cluster covers every topic, else Create per topic."""
    if ctx.authorized_on_cluster(AclOperation.CREATE):
        return frozenset()
    return ctx.denied_topics(AclOperation.CREATE, names)


def created_configs_hidden(ctx: ApiContext, names: Iterable[str]) -> frozenset[str]:
    """KIP-525: a created topic's configs, partition count and replication factor only with
    DescribeConfigs on it."""
    return ctx.denied_topics(AclOperation.DESCRIBE_CONFIGS, names)


def delete_topics_denied(ctx: ApiContext, names: Iterable[str | None]) -> frozenset[str]:
    """DeleteTopics: Delete per topic (TOPIC_AUTHORIZATION_FAILED, existing or not)."""
    return ctx.denied_topics(AclOperation.DELETE, names)


def create_partitions_denied(ctx: ApiContext, names: Iterable[str | None]) -> frozenset[str]:
    """CreatePartitions: Alter per topic."""
    return ctx.denied_topics(AclOperation.ALTER, names)


@dataclass
class ClusterDescription:
    cluster_id: str
    controller_id: int  # this broker (see ``describe_cluster``), or -1
    brokers: list[BrokerNode]  # each one's endpoint of the request's listener
    authorized_operations: int | None  # KIP-430; None: not asked


def describe_cluster(ctx: ApiContext, include_cluster_authorized_operations: bool
                     ) -> ClusterDescription:
    """``controller_id`` is this broker, for the reason Metadata gives: replog's controller is
    not a broker, and a client sends admin requests to the id it is given; AuthHelper answers
    a controller id missing from the broker list -1."""
    md = ctx.rm.metadata
    brokers = [e for e in (e.for_listener(ctx.listener) for _, e in sorted(md.brokers.items()))
               if e is not None]
    me = ctx.broker_id
    return ClusterDescription(
        md.cluster_id,
        me if md.controller_id >= 0 and any(b.broker_id == me for b in brokers) else -1,
        brokers,
        ctx.authorized_operations(CLUSTER_RESOURCE) if include_cluster_authorized_operations
        else None)

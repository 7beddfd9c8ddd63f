"""librdkafka's admin reads KIP-430's authorized operations from a real replog cluster (no
authorizer): ``describe_topics`` and ``describe_cluster`` with
``include_authorized_operations`` list every supported operation - 8 on a topic, 7 on the
cluster - instead of the "not provided" they had."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from client.admin_client import AdminClient as ReplogAdmin

TOPIC_OPS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
             AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
             AclOperation.ALTER_CONFIGS}
CLUSTER_OPS = {AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
               AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
               AclOperation.DESCRIBE}


@pytest.mark.integration
def test_librdkafka_describes_every_supported_operation_without_an_authorizer(cluster_factory):
    c = cluster_factory(brokers=1)

    async def create():
        async with ReplogAdmin(c.bootstrap_servers, request_timeout_ms=10000) as admin:
            await admin.create_topic("ops", 1, 1)
    asyncio.run(create())
    c.wait_for_metadata()
    admin = AdminClient({"bootstrap.servers": c.kafka_bootstrap_servers})
    [f] = admin.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True,
                                request_timeout=20).values()
    t = f.result(timeout=30)
    assert set(t.authorized_operations) == TOPIC_OPS
    cl = admin.describe_cluster(include_authorized_operations=True,
                                request_timeout=20).result(timeout=30)
    assert set(cl.authorized_operations) == CLUSTER_OPS

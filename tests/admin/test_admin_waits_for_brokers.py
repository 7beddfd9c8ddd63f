"""The admin client waits for a Metadata answer that lists brokers (issue 42 defect 5), as
Kafka's AdminClient waits for a node assignment within default.api.timeout.ms: a broker of a
cluster still starting answers with no broker yet, and ``configs --entity-default --alter``
used to fail at once with "no live broker"."""

from __future__ import annotations

import asyncio

import pytest

from client import AdminClient, KafkaError
from common.errors import ErrorCode
from tests.admin.fake_cluster import FakeCluster
from tests.polling import async_wait_until


@pytest.fixture
async def fake():
    async with FakeCluster(brokers=3, controllers=1) as fc:
        yield fc


async def test_live_brokers_waits_for_an_answer_that_lists_brokers(fake):
    brokers, bootstrap = dict(fake.state.brokers), fake.bootstrap
    fake.state.brokers.clear()  # the brokers know of no broker yet

    async def registered():
        await async_wait_until(lambda: fake.state.metadata_answers >= 3, timeout=10,
                               what="the client to ask more than once")
        fake.state.brokers.update(brokers)
    task = asyncio.create_task(registered())
    async with AdminClient(bootstrap, retry_backoff_ms=10) as admin:
        assert sorted(await admin.live_brokers()) == sorted(brokers)
    await task


async def test_no_broker_within_the_api_timeout_is_still_no_live_broker(fake):
    bootstrap = fake.bootstrap
    fake.state.brokers.clear()
    async with AdminClient(bootstrap, retry_backoff_ms=10,
                           default_api_timeout_ms=300) as admin:
        assert await admin.live_brokers() == {}
        with pytest.raises(KafkaError) as e:
            await admin.acl_call("DescribeAcls", None)
        assert e.value.error_code == ErrorCode.BROKER_NOT_AVAILABLE
        assert "no live broker" in str(e.value)
    assert fake.state.metadata_answers > 1  # asked again meanwhile

"""Fixtures of the broker tests."""

import pytest

from tests.broker.inprocess import Node


@pytest.fixture
async def nodes(tmp_path):
    ns = [Node(1, tmp_path), Node(2, tmp_path)]
    for n in ns:
        await n.start()
    yield ns
    for n in ns:
        await n.stop()

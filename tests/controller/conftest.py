"""Fixtures for the controller's shell tests against the real ZooKeeper fixture."""

from __future__ import annotations

import pytest

from controller.server import ControllerServer
from tests.controller.fakes import BrokerSessions, FakeBroker, RecordingLog, controller_config


@pytest.fixture
def broker_sessions(zk_hosts):
    s = BrokerSessions(zk_hosts)
    yield s
    s.close()


@pytest.fixture
async def controllers(zk_hosts):
    """`await controllers(id, **config)` starts an in-process controller candidate."""
    started: list[ControllerServer] = []

    async def start(controller_id: int, **overrides) -> ControllerServer:
        log = RecordingLog()
        srv = ControllerServer(controller_config(zk_hosts, controller_id, **overrides),
                               events=log, serve_metrics=False)
        srv.log = log
        await srv.start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        try:
            await srv.stop(0)
        except Exception:  # noqa: BLE001, S110 - a test may have stopped it already
            pass


@pytest.fixture
async def fake_brokers(broker_sessions):
    """`await fake_brokers(1, 2, 3, racks=...)`: fake brokers serving gRPC and registered in
    ZooKeeper (each with its own session)."""
    made: list[FakeBroker] = []

    async def start(*ids: int, racks: dict[int, str] | None = None) -> list[FakeBroker]:
        out = []
        for i in ids:
            b = await FakeBroker(i, rack=(racks or {}).get(i)).start()
            b.epoch = broker_sessions.register(b.registration())
            made.append(b)
            out.append(b)
        return out

    yield start
    for b in made:
        await b.stop()

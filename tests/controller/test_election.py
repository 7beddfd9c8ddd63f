"""Controller election and fencing against a real ZooKeeper (in-process candidates)."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from common import zk_layout as L
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.zk_layout import LeaderAndIsr, TopicAssignment
from controller.decisions import PartitionWrite
from controller.zk_store import ControllerMovedError
from tests.controller.fakes import wait_for

pytestmark = pytest.mark.integration


def epoch_in_zk(zk) -> tuple[int, int]:
    data, stat = zk.get(L.CONTROLLER_EPOCH)
    return int(data), stat.version


async def describe(srv) -> pb.DescribeClusterResponse:
    async with grpc.aio.insecure_channel(srv.address) as ch:
        return await replog_pb2_grpc.ControllerStub(ch).DescribeCluster(
            pb.DescribeClusterRequest(), timeout=5)


async def test_one_of_two_candidates_wins_and_the_epoch_increments(controllers, zk):
    a = await controllers(1)
    b = await controllers(2)
    await wait_for(lambda: a.controller.is_active or b.controller.is_active, what="a winner")
    active, standby = (a, b) if a.controller.is_active else (b, a)
    # The loser has run its election once it knows who won: from then on it stays a standby.
    await wait_for(lambda: standby.controller.active_controller is not None
                   and standby.controller.active_controller.controller_id
                   == active.controller_id, what="the loser to learn the winner")
    assert not standby.controller.is_active
    assert epoch_in_zk(zk) == (1, 1)
    assert active.controller.epoch == 1
    info = L.decode_controller(zk.get(L.CONTROLLER)[0])
    assert (info.controller_id, info.address) == (active.controller_id, active.address)
    # The standby knows who is active and says NOT_CONTROLLER (41) on every RPC.
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await describe(standby)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert ("replog-error-code", "41") in tuple(e.value.trailing_metadata())
    assert f"controller {active.controller_id}" in e.value.details()
    d = await describe(active)
    assert d.controller_id == active.controller_id and d.controller_epoch == 1
    assert d.cluster_id and d.controller.port == int(active.address.rsplit(":", 1)[1])
    assert active.log.named("controller_elected") == [
        {"controller_id": active.controller_id, "controller_epoch": 1}]
    assert active.metrics.active_controller_count._value.get() == 1
    assert standby.metrics.active_controller_count._value.get() == 0


async def test_expired_session_moves_the_controller_and_bumps_the_epoch(controllers, zk,
                                                                         zk_expire):
    a = await controllers(1)
    await wait_for(lambda: a.controller.is_active)
    b = await controllers(2)
    await wait_for(lambda: b.controller.active_controller is not None)
    old_version = a.controller.context.epoch_zk_version

    await asyncio.get_running_loop().run_in_executor(None, zk_expire, a.zk.client)

    await wait_for(lambda: b.controller.is_active, what="the standby to take over")
    assert b.controller.epoch == 2 and epoch_in_zk(zk) == (2, 2)
    await wait_for(lambda: a.controller.active_controller is not None
                   and a.controller.active_controller.controller_id == 2)
    assert not a.controller.is_active
    assert a.log.named("controller_resigned")
    # The deposed controller's conditional writes are refused whole.
    with pytest.raises(ControllerMovedError):
        await a.controller.store.write_partition_states(
            [PartitionWrite(TopicPartition("t", 0), None, LeaderAndIsr(1, 0, (1,), 1))],
            old_version)
    with pytest.raises(ControllerMovedError):
        await a.controller.store.create_topic(TopicAssignment("t", "x", {0: [1]}), {},
                                              old_version)
    assert zk.exists("/brokers/topics/t") is None


async def test_a_clean_stop_hands_over_at_once(controllers, zk):
    a = await controllers(1)
    await wait_for(lambda: a.controller.is_active)
    b = await controllers(2)
    await wait_for(lambda: b.controller.active_controller is not None)
    await a.stop()
    await wait_for(lambda: b.controller.is_active, timeout=3,
                   what="takeover without waiting for the session timeout")
    assert b.controller.epoch == 2


async def test_a_reconnect_on_the_same_session_keeps_the_controller_and_its_epoch(
        controllers, zk):
    """SUSPENDED then CONNECTED on the same session (an ensemble member died; kazoo moved the
    session): nothing the session owns changed, so the controller stays active in its epoch,
    as Kafka's KafkaController, which acts only on an expired session."""
    a = await controllers(1)
    await wait_for(lambda: a.controller.is_active)
    owner = zk.exists(L.CONTROLLER).ephemeralOwner
    a.controller._on_zk_state("SUSPENDED")
    assert a.controller.is_active
    a.controller._on_zk_state("CONNECTED")
    await asyncio.sleep(0.5)  # the Elect it posts finds itself active and does nothing
    assert a.controller.is_active and a.controller.epoch == 1 and epoch_in_zk(zk)[0] == 1
    assert zk.exists(L.CONTROLLER).ephemeralOwner == owner


async def test_an_elect_on_the_same_session_reclaims_its_own_znode(controllers, zk):
    """Resigned while /controller is still its own (a failover that failed, or an Elect racing
    the same session): the controller takes a new epoch without giving /controller away."""
    a = await controllers(1)
    await wait_for(lambda: a.controller.is_active)
    owner = zk.exists(L.CONTROLLER).ephemeralOwner
    a.controller._resign("test: failover failed")
    assert not a.controller.is_active
    a.controller._on_zk_state("CONNECTED")
    await wait_for(lambda: a.controller.is_active)
    assert a.controller.epoch == 2 and epoch_in_zk(zk)[0] == 2
    assert zk.exists(L.CONTROLLER).ephemeralOwner == owner
    assert json.loads(zk.get(L.CONTROLLER)[0])["brokerid"] == 1


async def test_a_resigned_controller_does_not_name_itself_as_active(controllers, zk):
    """Chaos sweep finding: a controller cut from ZooKeeper answered NOT_CONTROLLER with
    "controller 100 at ... is active", itself, until it read /controller again."""
    a = await controllers(1)
    await wait_for(lambda: a.controller.is_active)
    a.controller._resign("test: as on a lost session")
    assert a.controller._not_controller_message() == \
        "This is not the active controller (no controller is active)"

"""A fault's stop must run, whatever the operations inside its window wait on.

Seed 44 x 60 s killed ZooKeeper at 57.1 s and drew a controlled shutdown of broker-1 inside
that window (58.95 s). The shutdown's restart read the broker's registration from ZooKeeper
with kazoo's synchronous call, which waits for a reconnect without end; ZooKeeper's restart
was the schedule's next event, which the runner starts only once the shutdown returns. The
run never healed and never checked.

These tests run the real runner (``_run_schedule``, ``_heal_all``) and the real nemeses
against a fake cluster whose ZooKeeper can be down. The fake's synchronous ZooKeeper calls
raise where the real ones would wait forever, so the old code fails here instead of hanging;
its bounded calls (``*_async(...).get(timeout=...)``) time out at once. No test sleeps: the
history's clock says every event is due.
"""

from __future__ import annotations

import asyncio

import pytest
from kazoo.handlers.threading import KazooTimeoutError

from chaos import runner
from chaos.history import History
from chaos.nemesis import ClusterProcesses, KillNemesis, Nemesis, ShutdownNemesis
from chaos.schedule import NEMESES, Schedule, make_schedule


class WouldWaitForever(AssertionError):
    pass


class FakeZooKeeperServer:
    def __init__(self):
        self.running = True

    def is_running(self) -> bool:
        return self.running


class _Pending:
    def __init__(self, zk: FakeZooKeeperServer, value):
        self.zk, self.value = zk, value

    def get(self, timeout=None):
        if not self.zk.running:
            if timeout is None:
                raise WouldWaitForever("a ZooKeeper read without a timeout while it is down")
            raise KazooTimeoutError()
        return self.value


class FakeKazoo:
    """Only /brokers/ids/<id> reads matter here: every broker is registered."""

    def __init__(self, zk: FakeZooKeeperServer):
        self.zk = zk

    def exists_async(self, path):
        return _Pending(self.zk, object())

    def get_async(self, path):
        return _Pending(self.zk, (b"", None))

    def exists(self, path):  # kazoo's synchronous call: waits for a reconnect
        return self.exists_async(path).get()

    def get(self, path):
        return self.get_async(path).get()


class FakeHandle:
    def __init__(self, cluster: FakeCluster, name: str):
        self.cluster, self.name = cluster, name
        self.running, self.paused, self.pid = True, False, 4242
        self.events: list[str] = []

    def is_running(self) -> bool:
        return self.running

    async def astop(self, timeout: float = 60.0):
        self.events.append("stop")
        self.running = False

    async def akill(self, sig):
        self.events.append("kill")
        self.running = False

    async def astart(self, wait: bool = True, timeout: float | None = None):
        # LocalCluster.start reads the broker's registration before it spawns the process.
        self.cluster.zk_client().exists(f"/brokers/ids/{self.name}")
        self.events.append("start")
        self.running = True
        return self

    async def arestart(self, wait: bool = True, timeout: float | None = None):
        await self.astop()
        return await self.astart()


class FakeCluster:
    def __init__(self):
        self.zookeeper_server = FakeZooKeeperServer()
        self._zk = FakeKazoo(self.zookeeper_server)
        self.brokers = {b: FakeHandle(self, f"broker-{b}") for b in (1, 2, 3)}
        self.controllers = {100: FakeHandle(self, "controller-100")}

    def zk_client(self):
        return self._zk

    def broker(self, b: int) -> FakeHandle:
        return self.brokers[b]


class FakeProcesses(ClusterProcesses):
    """The real lookups; ZooKeeper's kill and restart flip the fake server."""

    def restart_unavailable(self):
        return None

    def kill_zookeeper(self):
        # chaos.nemesis.Processes: what was killed, handed back to start_zookeeper (the
        # standalone server here; an ensemble's leader is "zookeeper-<myid>")
        self.cluster.zookeeper_server.running = False
        return "zookeeper"

    def start_zookeeper(self, name="zookeeper"):
        assert name == "zookeeper", name
        self.cluster.zookeeper_server.running = True


class DueHistory(History):
    """Every scheduled event is due at once: the test follows the schedule's order, not its
    clock."""

    def now(self) -> float:
        return 1e9


def _nemesis_ops(history: History, f: str | None = None) -> list[dict]:
    return [op for op in history.ops if op["process"] == "nemesis"
            and (f is None or op["f"] == f)]


# "all" as it was when seed 44 was found (the clock nemesis came later and moves the draws).
ALL = tuple(n for n in NEMESES if n != "clock")


@pytest.mark.parametrize(("seed", "duration", "nemeses"), [
    (44, 60, ALL),  # the run that hung: shutdown broker-1 inside ZooKeeper's kill
    (44, 23, ("kill", "shutdown")),  # its regression_seeds.txt line: shutdown of the leader
])
async def test_a_shutdown_inside_a_zookeeper_kill_lets_zookeeper_come_back(seed, duration,
                                                                           nemeses):
    kill_zk, shutdown = make_schedule(seed, duration, nemeses).faults[-2:]
    assert (kill_zk.nemesis, kill_zk.target, shutdown.nemesis) == \
        ("kill", ("zookeeper",), "shutdown")
    assert kill_zk.at_s <= shutdown.at_s <= kill_zk.end_s <= duration
    cluster = FakeCluster()
    procs = FakeProcesses(cluster, "chaos")
    nemeses_ = {"kill": KillNemesis(procs, {}), "shutdown": ShutdownNemesis(procs, {})}
    history = DueHistory()

    await runner._run_schedule(Schedule(seed, duration, ("kill", "shutdown"),
                                        (kill_zk, shutdown)),
                               nemeses_, {}, history, log=lambda line: None)

    errors = [op for op in _nemesis_ops(history) if "error" in op["value"]]
    assert errors == []
    done = {(op["f"], op["value"]["fault"]["nemesis"]): op["value"]["result"]
            for op in _nemesis_ops(history) if op["type"] == "ok"}
    assert done[("start", "shutdown")] == {"skipped": "ZooKeeper is down (the fault in "
                                                      "progress)"}
    assert done[("stop", "kill")] == {"started": ["zookeeper"]}
    assert cluster.zookeeper_server.running
    assert all(h.events == [] for h in cluster.brokers.values()), \
        "no broker was stopped while nobody could start it again"


async def test_a_shutdown_with_zookeeper_up_still_restarts_its_broker():
    # The skip is for ZooKeeper down only: the admin operation still happens otherwise.
    cluster = FakeCluster()
    nem = ShutdownNemesis(FakeProcesses(cluster, "chaos"), {})
    fault = next(f for f in make_schedule(44, 60, ALL).faults if f.nemesis == "shutdown")
    result = await nem.start(fault)
    assert result == {"restarted": fault.target[0], "registered": True}
    assert cluster.brokers[int(fault.target[0].removeprefix("broker-"))].events == \
        ["stop", "start"]


async def test_the_kill_nemesis_restarts_zookeeper_before_the_brokers():
    # A failed stop leaves a broker down; if ZooKeeper's kill follows, both are down at the
    # heal, and "broker-1" sorts before "zookeeper".
    cluster = FakeCluster()
    nem = KillNemesis(FakeProcesses(cluster, "chaos"), {})
    cluster.brokers[1].running = False
    cluster.zookeeper_server.running = False
    nem.down |= {"broker-1", "zookeeper"}

    assert await nem.undo() == ["zookeeper", "broker-1"]
    assert cluster.zookeeper_server.running and cluster.brokers[1].running


class RestartsBroker1(Nemesis):
    """Any nemesis whose heal restarts a broker (eio's, the loop-mounted disks')."""

    name = "eio"

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.active = True

    async def undo(self):
        if self.active:
            await self.procs.cluster.broker(1).arestart()
            self.active = False
        return [1]


async def test_the_heal_brings_zookeeper_back_before_the_other_nemeses_heal():
    # --nemesis eio,kill: the eio nemesis comes first in the run's nemeses, but its heal (a
    # broker restart) needs ZooKeeper, which the kill nemesis holds.
    cluster = FakeCluster()
    procs = FakeProcesses(cluster, "chaos")
    kill = KillNemesis(procs, {})
    await kill.start(make_schedule(44, 60, ALL).faults[-2])  # ZooKeeper's kill
    eio = RestartsBroker1(procs, {})
    history = DueHistory()

    await runner._heal_all({"eio": eio, "kill": kill}, history)

    assert _nemesis_ops(history) == []  # no heal failed
    assert not eio.active and cluster.brokers[1].events == ["stop", "start"]
    assert cluster.zookeeper_server.running


class WaitsForTheNextEvent(Nemesis):
    """A start that waits for what only the schedule's next event brings back: the shape of
    seed 44's hang, for any nemesis that has it."""

    name = "shutdown"

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.back = asyncio.Event()
        self.cancelled = False

    async def start(self, fault):
        try:
            await self.back.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return {"waited": True}


class BringsItBack(Nemesis):
    name = "kill"

    def __init__(self, procs, shared, other: WaitsForTheNextEvent):
        super().__init__(procs, shared)
        self.other = other

    async def start(self, fault):
        return {"took": "it"}

    async def undo(self):
        self.other.back.set()
        return True


async def _run_bounded(schedule: Schedule, nemeses: dict) -> DueHistory:
    """Run ``schedule`` through the real runner and return its history. The 30 s bound is a
    guard, not a timing assertion: without it a stalled schedule would never end."""
    history = DueHistory()
    await asyncio.wait_for(runner._run_schedule(schedule, nemeses, {}, history,
                                                log=lambda line: None), 30)
    return history


async def test_a_stalled_operation_does_not_hold_up_the_schedule(monkeypatch):
    monkeypatch.setattr(runner, "OP_TIMEOUT_S", 0.01)
    kill_zk, shutdown = make_schedule(44, 60, ALL).faults[-2:]
    waits = WaitsForTheNextEvent(None, {})
    brings = BringsItBack(None, {}, waits)
    history = await _run_bounded(Schedule(44, 60, ("kill", "shutdown"), (kill_zk, shutdown)),
                                 {"kill": brings, "shutdown": waits})

    stalled = [op for op in _nemesis_ops(history, "start") if "error" in op["value"]]
    assert [op["value"]["fault"]["nemesis"] for op in stalled] == ["shutdown"]
    assert stalled[0]["value"]["error"].startswith("StalledError")
    assert waits.cancelled
    stops = [op for op in _nemesis_ops(history, "stop") if op["type"] == "ok"]
    assert [op["value"]["result"] for op in stops] == [{"undone": True}]


class AdminWaitsForTheFaultsStop(WaitsForTheNextEvent):
    """An admin operation that can only finish once the fault in progress ends: the shape of
    a preferred election (AdminClient retries) inside ZooKeeper's kill (seed 85)."""

    name = "elect"
    admin = True


async def test_an_admin_operation_mid_fault_does_not_hold_up_the_faults_stop(monkeypatch):
    # Seeds 54, 58 and 85: an admin operation awaited in the schedule held up the stop of the
    # fault it was drawn into, and so stretched that fault (ZooKeeper down 18.3 s instead of
    # the scheduled 1.9 s). In a lane of its own it lets the stop run on time, and completes
    # once the fault is over. The old runner stalls it instead (bound cut short here).
    monkeypatch.setattr(runner, "OP_TIMEOUT_S", 5.0)
    from chaos.schedule import Fault
    kill_zk = Fault(0, 1.0, "kill", ("zookeeper",), 1.9)
    elect = Fault(1, 1.5, "elect", ("all",), 0.0)
    waits = AdminWaitsForTheFaultsStop(None, {})
    brings = BringsItBack(None, {}, waits)
    history = await _run_bounded(Schedule(85, 60, ("kill", "elect"), (kill_zk, elect)),
                                 {"kill": brings, "elect": waits})

    done = [(op["f"], op["value"]["fault"]["nemesis"], op["value"].get("result"))
            for op in _nemesis_ops(history) if op["type"] in ("ok", "info")]
    assert done == [("start", "kill", {"took": "it"}),
                    ("stop", "kill", {"undone": True}),
                    ("start", "elect", {"waited": True})]
    assert not waits.cancelled


class _NoAdmin:
    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


@pytest.mark.parametrize(("answer", "kept"), [
    (TimeoutError("no answer"), True),  # unknown outcome: the heal must move it back
    ("NONE", True),
    ("ReassignmentInProgressError(60)", False),  # refused: nothing moved, nothing to undo
])
async def test_a_reassignment_records_its_intent_before_it_is_sent(answer, kept):
    from chaos.nemesis import ReassignNemesis
    from chaos.schedule import Fault
    nem = ReassignNemesis(None, {"topic": "chaos"})
    nem._admin = _NoAdmin

    async def replicas(admin, p):
        return [1, 2, 3]

    async def alter(admin, p, to):
        assert nem.moved == {3: [1, 2, 3]}  # recorded before the request goes out
        if isinstance(answer, Exception):
            raise answer
        return answer
    nem._replicas, nem._alter = replicas, alter
    fault = Fault(0, 1.0, "reassign", ("partition-3",), 0.0)
    if isinstance(answer, Exception):
        with pytest.raises(TimeoutError):
            await nem.start(fault)
    else:
        assert (await nem.start(fault))["result"] == answer
    assert (nem.moved == {3: [1, 2, 3]}) is kept

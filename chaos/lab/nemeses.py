"""The lab's own nemeses (chaos/nemesis.py's interface): one process stopped or killed for
a fault window, one partition's log failing on one broker, a reassignment under load and the
controller killed mid-move."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from pathlib import Path

from chaos.lab.figures import _bytes_in, copy_figures
from chaos.nemesis import NEMESIS_CLASSES, Nemesis
from chaos.schedule import Fault
from client import reassignment


class _OneProcessFault(Nemesis):
    """Stops one broker at the fault's start and starts that same broker at the fault's end.
    The chaos runner's kill and bounce restart every process they hold at any stop, which
    cannot express "bring back the stale replica first, the last leader later"."""

    clean = False

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.down: dict[int, str] = {}  # fault index -> process name

    def unavailable(self):
        return self.procs.restart_unavailable()

    async def start(self, fault: Fault) -> dict:
        name = self.procs.resolve(fault.target[0])
        h = self.procs.handle(name)
        if self.clean:
            await h.astop()  # SIGTERM: a broker's controlled shutdown
        else:
            await h.akill(signal.SIGKILL)
        self.down[fault.index] = name
        return {"stopped" if self.clean else "killed": name}

    async def stop(self, fault: Fault) -> dict:
        name = self.down.pop(fault.index, None)
        if name is not None and not self.procs.handle(name).is_running():
            await self.procs.handle(name).astart()
        return {"started": name}

    async def heal(self) -> None:
        for index in sorted(self.down):
            name = self.down.pop(index)
            if not self.procs.handle(name).is_running():
                await self.procs.handle(name).astart()


class LabStopNemesis(_OneProcessFault):
    name = "lab-stop"
    clean = True


class LabKillNemesis(_OneProcessFault):
    name = "lab-kill"


class LabPartitionEioNemesis(Nemesis):
    """EIO on writes under one partition's log on one of its followers (the fault-injection
    file's rule names the partition dir, as tests/cluster/test_fetcher_isolation.py does): the
    follower's append fails, which is a partition failure for its fetcher (design.md#kip-461)
    and, the dir passing the availability probe, that one log goes offline (design.md#jbod). The
    fault ends with the rule cleared and a clean bounce of the follower, for every arm alike:
    the pre-KIP-461 fetcher stays stopped until its broker restarts."""

    name = "lab-eio-partition"

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.active: dict[int, int] = {}  # fault index -> broker

    def unavailable(self):
        if any(self.procs.fault_file(b) is None for b in self.procs.cluster.brokers):
            return "the brokers were started without fault.injection.file"
        return self.procs.restart_unavailable()

    def _rules(self, broker: int, rules: list[dict]) -> None:
        path = self.procs.fault_file(broker)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rules))
        tmp.replace(path)

    async def start(self, fault: Fault) -> dict:
        p = int(fault.target[0].removeprefix("partition-"))
        state = await asyncio.to_thread(self.procs.partition_state, self.procs.topic, p)
        # the first in-sync follower in broker id order: the same broker for every arm
        follower = min(b for b in state.isr if b != state.leader)
        h = self.procs.cluster.broker(follower)
        path = next(str(Path(d) / f"{self.procs.topic}-{p}") for d in h.log_dirs
                    if (Path(d) / f"{self.procs.topic}-{p}").is_dir())
        self._rules(follower, [{"path": path, "errno": "EIO", "ops": ["write"]}])
        self.active[fault.index] = follower
        return {"broker": follower, "partition_dir": path}

    async def stop(self, fault: Fault) -> dict:
        b = self.active.pop(fault.index, None)
        if b is not None:
            self._rules(b, [])
            await self.procs.cluster.broker(b).arestart()
        return {"restarted": b}

    async def heal(self) -> None:
        for index in sorted(self.active):
            b = self.active.pop(index)
            self._rules(b, [])
            await self.procs.cluster.broker(b).arestart()


# The reassignment experiment: a fourth broker to move replicas to, a second controller to take
# over, and a bulk topic whose data the move has to copy.
BULK_TOPIC = "lab-bulk"
BULK_ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1]}
WORKLOAD_ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
NEW_BROKER = 4
PRELOAD_BYTES = 40_000_000  # per bulk partition, before the workload starts
PRELOAD_RECORD = 250_000
MOVE_TIMEOUT_S = 240.0  # below the runner's OP_TIMEOUT_S
MOVE_POLL_S = 0.1


def reassignment_targets(current: dict[tuple[str, int], list[int]], leaving: int,
                         joining: int = NEW_BROKER) -> dict[tuple[str, int], list[int]]:
    """Each partition's replicas with ``leaving`` replaced by ``joining`` in its place (the
    preferred leader stays first unless it is the one leaving); partitions without
    ``leaving`` are not moved."""
    return {tp: [joining if b == leaving else b for b in r]
            for tp, r in sorted(current.items()) if leaving in r}


class LabReassignNemesis(Nemesis):
    """KAFKA-42 under load: the seed names a workload partition and a broker (1-3); that
    broker's replicas of the partition and of both bulk partitions move to broker 4 through
    ``replog reassign --execute`` (admin/reassign/, Kafka's ReassignPartitionsCommand),
    with ``--throttle RATE`` when the arm has one (KIP-73: the rate on every reassigning
    broker, the moving replicas named in the topics' throttled-replicas lists), without any
    throttle config otherwise. It then polls (every MOVE_POLL_S, through a controller
    failover) until every target replica is in its ISR (``caught_up_s``) and the
    reassignment is complete (none listed, replicas = target: ``move_s``), and clears the
    throttles, as ``--verify`` does once the moves are done. Broker 4's reassignment bytes in,
    sampled as it polls, give the copy's own time and the rate the throttle let through
    (``copy_figures``). Runs in the runner's admin lane: the schedule's faults go on meanwhile."""

    name = "lab-reassign"
    admin = True

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.throttled: dict[tuple[str, int], list[int]] = {}  # throttles still set

    def _admin(self):
        from client.admin_client import AdminClient
        return AdminClient(self.shared["bootstrap"], request_timeout_ms=5000,
                           default_api_timeout_ms=15000)

    def _caught_up(self, targets) -> bool:
        """Every target replica in its partition's ISR, as the leaders wrote it to ZooKeeper
        (the brokers' metadata would show it only once a controller sent it)."""
        for (t, p), r in targets.items():
            if not set(r) <= set(self.procs.partition_state(t, p).isr):
                return False
        return True

    @staticmethod
    async def _complete(admin, targets) -> bool:
        """No reassignment of the targets listed, and their replicas the targets; raises while
        the controller is failing over."""
        if await admin.list_partition_reassignments(list(targets)):
            return False
        infos = await admin.describe_topics(sorted({t for t, _ in targets}))
        return all(infos[t].partition(p) is not None
                   and list(infos[t].partition(p).replicas) == r
                   for (t, p), r in targets.items())

    async def start(self, fault):
        p = int(fault.target[0].removeprefix("partition-"))
        leaving = int(fault.target[1].removeprefix("broker-"))
        throttle = self.shared.get("lab_throttle")
        tps = [(BULK_TOPIC, q) for q in sorted(BULK_ASSIGNMENT)] + [(self.shared["topic"], p)]
        async with self._admin() as admin:
            current = await reassignment.current_replicas(admin, tps)
            targets = reassignment_targets(current, leaving)
            url = self.procs.cluster.broker(NEW_BROKER).metrics_url
            before = await _bytes_in(url)
            if throttle:
                self.throttled = targets
            t0 = time.monotonic()
            try:
                # as `replog reassign --execute --throttle` makes it, without its messages
                _, results = await reassignment.execute(admin, targets, throttle)
            finally:
                submitted(self.shared).set()  # the failover's cue, moved or not
            if any(e is not None for e in results.values()):
                self.throttled = {}
                return {"moved": False, "rc": 1}
            caught_up_s = None
            received: list[tuple[float, float]] = []  # (s since the request, bytes in)
            while True:
                got = await _bytes_in(url)
                if got is not None and before is not None:
                    received.append((time.monotonic() - t0, got - before))
                # Errors: ZooKeeper slow, a controller failing over - ask again.
                if caught_up_s is None:
                    with contextlib.suppress(Exception):
                        if await asyncio.to_thread(self._caught_up, targets):
                            caught_up_s = time.monotonic() - t0
                complete = False
                if caught_up_s is not None:
                    with contextlib.suppress(Exception):
                        complete = await self._complete(admin, targets)
                if complete:
                    break
                if time.monotonic() - t0 > MOVE_TIMEOUT_S:
                    raise RuntimeError(f"the reassignment was not complete after "
                                       f"{MOVE_TIMEOUT_S:.0f}s")
                await asyncio.sleep(MOVE_POLL_S)
        move_s = time.monotonic() - t0
        await self.undo()
        return {"moved": {f"{t}-{q}": r for (t, q), r in targets.items()},
                "from": {f"{t}-{q}": r for (t, q), r in current.items()},
                "throttle": throttle, "move_s": round(move_s, 3),
                "caught_up_s": round(caught_up_s if caught_up_s is not None else move_s, 3),
                **copy_figures(received)}

    undone = "throttles_cleared"

    async def undo(self) -> list[str]:
        if not self.throttled:
            return []
        async with self._admin() as admin:
            await reassignment.clear_all_throttles(admin, self.throttled)
        done = sorted(f"{t}-{p}" for t, p in self.throttled)
        self.throttled = {}
        return done


def submitted(shared: dict) -> asyncio.Event:
    """Set once the run's reassignment request has been answered (accepted or not)."""
    return shared.setdefault("lab_move_submitted", asyncio.Event())


class LabFailoverNemesis(LabKillNemesis):
    """The active controller SIGKILLed mid-move: the fault's second target seconds after the
    reassignment request was accepted (a kill at a fixed time would find the unthrottled
    move, well under a second, done); started again (as the standby) at the fault's end.
    The other controller takes over once the killed one's session expires, and resumes the
    reassignment in progress (design.md#reassignment's failover cases). An arm without failover
    keeps the slot, recorded as skipped, so every arm has the same timeline."""

    name = "lab-failover"
    WAIT_S = 60.0

    def unavailable(self):
        if not self.shared.get("lab_failover"):
            return "this arm has no controller failover"
        return super().unavailable()

    async def start(self, fault: Fault) -> dict:
        await asyncio.wait_for(submitted(self.shared).wait(), self.WAIT_S)
        await asyncio.sleep(float(fault.target[1]))
        return {**await super().start(fault), "after_submit_s": float(fault.target[1])}


# The chaos runner builds a schedule's nemeses from NEMESIS_CLASSES by name.
for _cls in (LabStopNemesis, LabKillNemesis, LabPartitionEioNemesis, LabReassignNemesis,
             LabFailoverNemesis):
    NEMESIS_CLASSES.setdefault(_cls.name, _cls)

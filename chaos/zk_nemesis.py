"""Nemeses of the run's own ZooKeeper ensemble (``replog chaos --zookeeper-nodes 3|5``):
``zk-leader-kill`` (its leader), ``zk-minority`` and ``zk-majority`` (that many members),
SIGKILLed and started again together on their ports when the fault ends. Registered into
chaos.nemesis.NEMESIS_CLASSES on import, as chaos/host_nemesis.py's are.
"""

from __future__ import annotations

import asyncio

from chaos.nemesis import NEMESIS_CLASSES, Nemesis
from chaos.schedule import Fault
from harness.cluster_view import ZK_READ_TIMEOUT_S as ZK_READ_TIMEOUT_S


class _EnsembleNemesis(Nemesis):
    """Members of the run's own ZooKeeper ensemble SIGKILLed (a host crash for ZooKeeper: no
    clean shutdown) and started again together, on their ports, when the fault ends.

    Each start and stop records ``/controller_epoch`` (None when ZooKeeper does not answer):
    the checker holds a leader change and a minority loss to no controller election, as
    Kafka's KafkaController acts only on a new session (its Expire), never on a Disconnected.
    The start also records whether a running controller holds ``/controller``
    (``controller_live``): when none does, an election was already owed to an earlier fault.
    """

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.down: list[int] = []  # myids killed and not started again

    def unavailable(self):
        # Asked before the run's cluster starts, when its ensemble is not made yet: a
        # LocalCluster's zookeeper_nodes says whether it will be (an attached cluster has none).
        if getattr(self.procs.cluster, "zookeeper_nodes", 1) < 3:
            return "needs the run's own ZooKeeper ensemble (replog chaos --zookeeper-nodes 3|5)"
        return self.procs.restart_unavailable()

    def targets(self, fault: Fault) -> list[int]:
        ens = self.procs.ensemble()
        myids = [int(t.removeprefix("zookeeper-")) for t in fault.target]
        missing = [i for i in myids if i not in ens.members]
        if missing:
            raise RuntimeError(f"the ensemble has members {sorted(ens.members)}, not {missing}")
        return myids

    async def start(self, fault):
        myids = await asyncio.to_thread(self.targets, fault)
        leader = await asyncio.to_thread(self.procs.ensemble().leader)
        epoch, live = await asyncio.to_thread(self.procs.controller_state)  # before the kill
        for myid in myids:
            await asyncio.to_thread(self.procs.cluster.kill_zookeeper, myid)
            self.down.append(myid)
        ens = self.procs.ensemble()
        return {"killed": [f"zookeeper-{i}" for i in myids], "leader_before": leader,
                "quorum_lost": len(ens.members) - len(myids) < ens.quorum,
                "controller_epoch": epoch, "controller_live": live}

    undone = "started"

    def holds_zookeeper(self) -> bool:
        return bool(self.down)

    async def undo(self) -> list[str]:
        myids = sorted(self.down)
        if myids:
            # Together: a lost majority serves only once enough of its members run.
            await asyncio.to_thread(self.procs.cluster.restart_zookeeper, *myids)
            self.down.clear()
        return [f"zookeeper-{i}" for i in myids]

    async def stop(self, fault):
        started = await self.undo()
        return {self.undone: started,
                "leader_after": await asyncio.to_thread(self.procs.ensemble().leader),
                "controller_epoch": await asyncio.to_thread(self.procs.controller_epoch, True)}


class ZkLeaderKillNemesis(_EnsembleNemesis):
    """The ensemble's leader, resolved when the fault starts (the target ``zookeeper``)."""

    name = "zk-leader-kill"

    def targets(self, fault):
        return [self.procs.zookeeper_leader()]


class ZkMinorityNemesis(_EnsembleNemesis):
    name = "zk-minority"


class ZkMajorityNemesis(_EnsembleNemesis):
    name = "zk-majority"


ZK_NEMESIS_CLASSES: dict[str, type[Nemesis]] = {
    c.name: c for c in (ZkLeaderKillNemesis, ZkMinorityNemesis, ZkMajorityNemesis)}
for _name, _cls in ZK_NEMESIS_CLASSES.items():
    NEMESIS_CLASSES.setdefault(_name, _cls)

"""Nemeses: one small class per fault, each with ``start``, ``stop`` and ``heal``.

A nemesis acts on the real processes of a running cluster. Facts (pids, ports, log dirs,
fault-injection files) are read from the cluster's ``cluster.json`` each time, because a
restart changes the pid; starting a process again goes through the :class:`LocalCluster` that
runs it, so its ``cluster.json`` stays right. ``start`` breaks something and returns what it
did (the resolved target: ``controller`` becomes ``controller-100``); ``stop`` ends that one
fault; ``heal`` undoes whatever is still broken and is safe to call at any time, any number of
times (the runner calls every nemesis's heal before checking).

``unavailable()`` says why a nemesis cannot run here (no root, no nft, no loop devices), and
the runner then records its faults as skipped, keeping their slots in the schedule.

The ducktape matrix's failures (``clean-bounce``, ``hard-bounce``, ``clean-kill``,
``hard-kill``: chaos.schedule.FAILURES) are :class:`MatrixNemesis` subclasses, run from
explicit schedules (``matrix_schedule``) rather than drawn from a seed.

Admin operations mid-fault: ``elect`` (preferred election), ``reassign``
(AlterPartitionReassignments) and ``shutdown`` (a controlled shutdown and restart). The
first two (``admin = True``) run in the runner's admin lane, beside the faults.

Not here yet, and why: intra-broker log-dir moves (AlterReplicaLogDirs) mid-fault, which
exist since design.md#reassignment but have no nemesis yet.
"""

from __future__ import annotations

import asyncio
import errno as errno_mod
import json
import os
import signal

from chaos import disk, netfilter
from chaos.schedule import Fault, parse_log_dir
from harness import cluster_hosts
from harness.cluster_view import ZK_READ_TIMEOUT_S as ZK_READ_TIMEOUT_S
from harness.cluster_view import ClusterView

# design.md#kip-501's slow leader: reads slower than replica.lag.time.max.ms
SLOW_READ_DELAY_MS = 1500
# The name the chaos modules and tests know the view (harness/cluster_view.py) by.
ClusterProcesses = ClusterView


class Nemesis:
    name = ""
    admin = False  # an admin operation: healed after the process, network and disk faults

    def __init__(self, procs: ClusterProcesses, shared: dict):
        self.procs = procs
        self.shared = shared  # what nemeses share: the Netfilter, the loop mounts, bootstrap

    def unavailable(self) -> str | None:
        return None

    async def start(self, fault: Fault) -> dict:
        raise NotImplementedError

    # A nemesis implements undo(): what stop() does (its result is recorded under the name
    # ``undone``) and what heal() does, since a stop ends the one fault that is in effect.
    undone = "undone"

    async def undo(self) -> list | bool:
        return []

    async def stop(self, fault: Fault) -> dict:
        return {self.undone: await self.undo()}

    async def heal(self) -> None:
        await self.undo()

    def holds_zookeeper(self) -> bool:
        """Whether this nemesis has ZooKeeper down: the runner heals it before the others,
        whose heals (a broker's restart) wait for ZooKeeper."""
        return False


class KillNemesis(Nemesis):
    """kill -9, then start again: a broker (crash recovery of its logs), the active
    controller (failover through ZooKeeper), or ZooKeeper itself."""

    name = "kill"

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.down: set[str] = set()

    def unavailable(self):
        return self.procs.restart_unavailable()

    async def start(self, fault):
        name = self.procs.resolve(fault.target[0])
        if name == "zookeeper":
            name = await asyncio.to_thread(self.procs.kill_zookeeper)
        else:
            await self.procs.handle(name).akill(signal.SIGKILL)
        self.down.add(name)
        return {"killed": name}

    undone = "started"

    def holds_zookeeper(self) -> bool:
        return any(n.startswith("zookeeper") for n in self.down)

    async def undo(self) -> list[str]:
        started = []
        # ZooKeeper first: a broker's start waits for its registration in ZooKeeper.
        for name in sorted(self.down, key=lambda n: (not n.startswith("zookeeper"), n)):
            if name.startswith("zookeeper"):
                await asyncio.to_thread(self.procs.start_zookeeper, name)
            else:
                h = self.procs.handle(name)
                if not h.is_running():
                    await h.astart()
            started.append(name)
            self.down.discard(name)
        return started


class BounceNemesis(KillNemesis):
    """A clean bounce: SIGTERM (a broker moves its leaderships away first, a controller
    resigns), then start again after a while."""

    name = "bounce"

    async def start(self, fault):
        name = self.procs.resolve(fault.target[0])
        await self.procs.handle(name).astop()
        self.down.add(name)
        return {"stopped": name}


class PauseNemesis(Nemesis):
    """SIGSTOP past the session timeout: the process keeps its sockets but its ZooKeeper
    session expires and its followers fall out of the ISR; SIGCONT wakes a zombie leader."""

    name = "pause"

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.paused: set[str] = set()

    async def start(self, fault):
        name = self.procs.resolve(fault.target[0])
        self.procs.handle(name).pause()
        self.paused.add(name)
        return {"paused": name}

    undone = "resumed"

    async def undo(self) -> list[str]:
        done = sorted(self.paused)
        for name in done:
            self.procs.handle(name).resume()
        self.paused.clear()
        return done


class PartitionNemesis(Nemesis):
    """Cut the network between two processes (chaos/netfilter.py)."""

    name = "partition"

    def unavailable(self):
        if cluster_hosts.on_hosts(self.procs.cluster):
            # Its rules match loopback, which processes on hosts of their own do not use to
            # reach each other: host-cut and rack-cut (chaos/host_nemesis.py) cut them.
            return "the cluster runs on hosts of its own: use host-cut or rack-cut"
        return netfilter.unavailable()

    @property
    def net(self) -> netfilter.Netfilter:
        return self.shared["netfilter"]

    async def start(self, fault):
        a, b = (self.procs.resolve(t) for t in fault.target)
        for src, dst in ((a, b), (b, a)):
            pid = self.procs.pid(src)
            if pid is not None:
                self.net.block(src, pid, self.procs.ports(dst))
        return {"between": [a, b]}

    undone = "healed"

    async def undo(self) -> bool:
        self.net.heal()
        return True


class ExpireNemesis(PartitionNemesis):
    """A real ZooKeeper session expiry of a broker or controller in another process: its
    link to ZooKeeper is cut past the session timeout, so the *server* expires the session
    (ephemeral znodes deleted, the controller told); on heal the client reconnects, learns
    of the expiry and builds a new session. harness.zk_sessions.expire_session would do it
    without root, but needs the session's password, which only the process itself has."""

    name = "expire"

    async def start(self, fault):
        name = self.procs.resolve(fault.target[0])
        pid = self.procs.pid(name)
        if pid is None:
            return {"skipped": f"{name} not running"}
        self.net.block(name, pid, self.procs.ports("zookeeper"))
        return {"cut_from_zookeeper": name}


class _FaultFileNemesis(Nemesis):
    """Rules in a broker's ``fault.injection.file`` (broker/fault_injection.py)."""

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.active: set[int] = set()

    def unavailable(self):
        if any(self.procs.fault_file(b) is None for b in self.procs.cluster.brokers):
            return "the brokers were started without fault.injection.file"
        return None

    def _write(self, broker_id: int, rules: list[dict]) -> None:
        path = self.procs.fault_file(broker_id)
        assert path is not None
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rules))
        os.replace(tmp, path)  # the broker never reads half a file

    undone = "cleared"

    async def undo(self) -> list[int]:
        """Clear the rules this nemesis wrote (EioNemesis also restarts the broker)."""
        done = sorted(self.active)
        for b in done:
            self._write(b, [])
        self.active.clear()
        return done


class EioNemesis(_FaultFileNemesis):
    """EIO on every write and fsync under one log dir: the broker takes the dir offline.
    An offline log dir stays offline until the broker restarts (Kafka's rule too), so the
    fault ends with the rule cleared and a clean bounce of that broker."""

    name = "eio"

    def unavailable(self):  # its undo restarts the broker
        return super().unavailable() or self.procs.restart_unavailable()

    async def start(self, fault):
        b, d = parse_log_dir(fault.target[0])
        path = self.procs.log_dir(b, d)
        self._write(b, [{"path": path, "errno": errno_mod.errorcode[errno_mod.EIO],
                         "ops": ["write", "fsync"]}])
        self.active.add(b)
        return {"log_dir": path}

    undone = "restarted"

    async def undo(self) -> list[int]:
        done = sorted(self.active)
        for b in done:
            self._write(b, [])
            await self.procs.cluster.broker(b).arestart()
        self.active.clear()
        return done


class SlowDiskNemesis(_FaultFileNemesis):
    """Every read of one broker's log dirs takes SLOW_READ_DELAY_MS: design.md#kip-501's slow leader
    (KIP-501: its followers must not be thrown out of the ISR for the leader's slowness)."""

    name = "slow"

    async def start(self, fault):
        b = int(fault.target[0].removeprefix("broker-"))
        dirs = [self.procs.log_dir(b, i) for i in range(len(self.procs.cluster.broker(b).log_dirs))]
        self._write(b, [{"path": d, "delay_ms": SLOW_READ_DELAY_MS, "ops": ["pread"]}
                        for d in dirs])
        self.active.add(b)
        return {"slow_reads": dirs, "delay_ms": SLOW_READ_DELAY_MS}


class ClockNemesis(_FaultFileNemesis):
    """Moves one broker's clock by the schedule's offset (the fault file's clock rule,
    broker/fault_injection.InjectedClock): a leader whose clock jumps forward past
    replica.lag.time.max.ms sees every follower out of date and shrinks its ISR, then lets
    them back on their next fetch; a jump back delays that. Jepsen's clock nemesis, limited to
    the clock replog reads through an injection point."""

    name = "clock"

    async def start(self, fault):
        name = await asyncio.to_thread(self.procs.resolve, fault.target[0])  # "leader": now's
        b = int(name.removeprefix("broker-"))
        offset_ms = int(fault.target[1])
        self._write(b, [{"clock_offset_ms": offset_ms}])
        self.active.add(b)
        return {"broker": b, "clock_offset_ms": offset_ms}


class _LoopDiskNemesis(Nemesis):
    """A fault on a loop-mounted log dir (chaos/disk.py), mounted by the runner before the
    broker started; the fault ends with the broker stopped, the dir repaired and the broker
    started again (an offline log dir comes back only with a restart)."""

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.broken: set[tuple[int, int]] = set()

    def unavailable(self):
        return disk.unavailable()

    def breaks(self, m: disk.LoopMountedLogDir) -> None:
        raise NotImplementedError

    async def start(self, fault):
        key = parse_log_dir(fault.target[0])
        m = self.shared["mounts"][key]
        await asyncio.to_thread(self.breaks, m)
        self.broken.add(key)
        return {"log_dir": str(m.log_dir), "device": m.device()}

    undone = "repaired"

    async def undo(self) -> list[str]:
        done = []
        for b, d in sorted(self.broken):
            h = self.procs.cluster.broker(b)
            await h.astop()
            m = self.shared["mounts"][(b, d)]
            await asyncio.to_thread(self._repair, m)
            await h.astart()
            done.append(f"broker-{b}:logdir-{d}")
        self.broken.clear()
        return done

    def _repair(self, m: disk.LoopMountedLogDir) -> None:
        m.unfill()
        m.repair()


class Ext4ErrorNemesis(_LoopDiskNemesis):
    """A real ext4 error: the kernel remounts the log dir read-only, writes fail (EROFS)."""

    name = "ext4"

    def breaks(self, m):
        m.trigger_error()


class DiskFullNemesis(_LoopDiskNemesis):
    """The log dir's file system fills up: appends fail with ENOSPC."""

    name = "enospc"

    def breaks(self, m):
        m.fill()


class PreferredElectionNemesis(Nemesis):
    """An admin operation mid-fault: a preferred leader election of every partition through
    the AdminClient (Kafka's kafka-leader-election.sh). Errors (ELECTION_NOT_NEEDED,
    PREFERRED_LEADER_NOT_AVAILABLE while a broker is down) are recorded, not raised."""

    name = "elect"
    admin = True

    async def start(self, fault):
        from client.admin_client import AdminClient
        async with AdminClient(self.shared["bootstrap"], request_timeout_ms=5000,
                               default_api_timeout_ms=15000) as admin:
            results = await admin.elect_leaders("preferred", None, timeout_ms=10000)
        errors: dict[str, int] = {}
        for err in results.values():
            key = "NONE" if err is None else type(err).__name__ + f"({err.error_code})"
            errors[key] = errors.get(key, 0) + 1
        return {"partitions": len(results), "results": errors}


class ReassignNemesis(Nemesis):
    """An admin operation mid-fault: AlterPartitionReassignments of one partition of the
    workload's topic (KIP-455, kafka-reassign-partitions.sh) to its replicas without the
    preferred one (RF 3 -> 2; the leader usually moves, the dropped replica is deleted), and
    back to the original replicas (RF 2 -> 3: a new replica copies the log) at the next
    reassign of that partition or at the heal. The heal waits until no reassignment of the
    topic is in progress and the original replicas are back (bounded)."""

    name = "reassign"
    admin = True
    HEAL_TIMEOUT_S = 90.0

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.moved: dict[int, list[int]] = {}  # partition -> its replicas before the move

    def _admin(self):
        from client.admin_client import AdminClient
        return AdminClient(self.shared["bootstrap"], request_timeout_ms=5000,
                           default_api_timeout_ms=15000)

    async def _replicas(self, admin, p: int) -> list[int]:
        topic = self.shared["topic"]
        info = (await admin.describe_topics([topic]))[topic]
        return next(list(x.replicas) for x in info.partitions if x.partition == p)

    async def _alter(self, admin, p: int, replicas: list[int]) -> str:
        topic = self.shared["topic"]
        err = (await admin.alter_partition_reassignments({(topic, p): replicas},
                                                         timeout_ms=10000))[(topic, p)]
        return "NONE" if err is None else f"{type(err).__name__}({err.error_code})"

    async def start(self, fault):
        p = int(fault.target[0].removeprefix("partition-"))
        async with self._admin() as admin:
            if p in self.moved:
                to = self.moved[p]
                result = await self._alter(admin, p, to)
                if result == "NONE":
                    del self.moved[p]
                return {"partition": p, "back_to": to, "result": result}
            before = await self._replicas(admin, p)
            to = before[1:]
            # The intent first: if the answer never comes (a timeout, or the run ending while
            # the operation waits in its lane), the heal still moves the partition back.
            self.moved[p] = before
            result = await self._alter(admin, p, to)
            if result != "NONE":
                del self.moved[p]  # refused: nothing moved
            return {"partition": p, "from": before, "to": to, "result": result}

    undone = "moved_back"

    async def undo(self) -> list[int]:
        if not self.moved:
            return []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.HEAL_TIMEOUT_S
        topic = self.shared["topic"]
        done = sorted(self.moved)
        while True:
            try:
                async with self._admin() as admin:
                    for p, replicas in sorted(self.moved.items()):
                        if await self._replicas(admin, p) != replicas:
                            await self._alter(admin, p, replicas)
                    pending = [tp for tp in await admin.list_partition_reassignments()
                               if tp[0] == topic]
                    if not pending and all([await self._replicas(admin, p) == r
                                            for p, r in self.moved.items()]):
                        self.moved.clear()
                        return done
            except Exception:  # noqa: BLE001, S110 - a controller failover: ask again
                pass
            if loop.time() >= deadline:
                raise RuntimeError(f"partitions {sorted(self.moved)} of {topic} not back on "
                                   f"their replicas after {self.HEAL_TIMEOUT_S:.0f}s")
            await asyncio.sleep(0.5)


class ShutdownNemesis(Nemesis):
    """An admin operation mid-fault: a broker's controlled shutdown (SIGTERM: its
    leaderships move away first) and its restart, while another fault is in effect. A broker
    the fault in progress has already taken (down, paused, or cut off by nftables, where a
    controlled shutdown would only wait for the controller) is left alone, and recorded so.

    The restart waits only until the broker has registered in ZooKeeper, not for an active
    controller in its metadata: the fault in progress may be the controller's kill, whose
    restart is the schedule's next event, so waiting for a controller would stall the run. For
    the same reason nothing is done while ZooKeeper is down: the fault in progress is its kill,
    whose restart is the next event, and a broker's start waits for ZooKeeper without end.
    The rule - an operation inside a fault's window never waits on what only that fault's
    end undoes - is pinned by tests/chaos/test_late_faults.py::
    test_a_shutdown_inside_a_zookeeper_kill_lets_zookeeper_come_back and
    test_a_shutdown_with_zookeeper_up_still_restarts_its_broker."""

    name = "shutdown"
    READY_TIMEOUT_S = 60.0

    def unavailable(self):
        return self.procs.restart_unavailable()

    async def start(self, fault):
        if self.procs.zookeeper_down():
            return {"skipped": "ZooKeeper is down (the fault in progress)"}
        name = self.procs.resolve(fault.target[0])
        h = self.procs.handle(name)
        net = self.shared.get("netfilter")
        why = ("down" if not h.is_running() else "paused" if h.paused
               else "cut off" if net is not None and net.cuts(h.pid) else None)
        if why is not None:
            return {"skipped": f"{name} is {why} (the fault in progress)"}
        await h.astop()
        await h.astart(wait=False)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.READY_TIMEOUT_S
        bid = int(name.removeprefix("broker-"))
        while not (registered := await asyncio.to_thread(self.procs.registered, bid)):
            if not h.is_running() or loop.time() >= deadline:
                break
            await asyncio.sleep(0.1)
        return {"restarted": name, "registered": registered}


class MatrixNemesis(KillNemesis):
    """One failure of the ducktape matrix (chaos.schedule.FAILURES) against ``leader`` or
    ``controller``, resolved when the fault starts to the process holding the role then.

    - ``hard``: SIGKILL (no controlled shutdown, the ZooKeeper session lingers until it
      expires); otherwise SIGTERM (a broker's controlled shutdown moves its leaderships
      away, a controller resigns) and wait for the exit;
    - ``bounce``: the end of the fault starts the process again - after a hard kill only
      once ZooKeeper registered the loss (ducktape's hard_bounce waits for that too, so the
      restart is a new registration and a real failover, not a reconnect);
    - otherwise (a kill) the process stays down for the rest of the run's faults and the
      heal starts it.
    """

    hard = False
    bounce = False
    LOSS_TIMEOUT_S = 60.0

    async def start(self, fault):
        name = await self.procs.resolve_live(fault.target[0])
        h = self.procs.handle(name)
        if self.hard:
            await h.akill(signal.SIGKILL)
        else:
            await h.astop()
        self.down.add(name)
        return {"killed" if self.hard else "stopped": name}

    async def stop(self, fault):
        if not self.bounce:
            return {"still_down": sorted(self.down)}
        waited = {}
        if self.hard:
            for name in sorted(self.down):
                waited[name] = await self._wait_loss(name)
        started = await self.undo()
        return {"started": started, **({"loss_registered": waited} if waited else {})}

    async def _wait_loss(self, name: str) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.LOSS_TIMEOUT_S
        while not await asyncio.to_thread(self.procs.loss_registered, name):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.2)
        return True


class CleanBounceNemesis(MatrixNemesis):
    name = "clean-bounce"
    bounce = True


class HardBounceNemesis(MatrixNemesis):
    name = "hard-bounce"
    hard = True
    bounce = True


class CleanKillNemesis(MatrixNemesis):
    name = "clean-kill"


class HardKillNemesis(MatrixNemesis):
    name = "hard-kill"
    hard = True


NEMESIS_CLASSES: dict[str, type[Nemesis]] = {
    c.name: c for c in (KillNemesis, BounceNemesis, PauseNemesis, PartitionNemesis,
                        ExpireNemesis, EioNemesis, SlowDiskNemesis, ClockNemesis,
                        Ext4ErrorNemesis,
                        DiskFullNemesis, PreferredElectionNemesis, ReassignNemesis,
                        ShutdownNemesis, CleanBounceNemesis,
                        HardBounceNemesis, CleanKillNemesis, HardKillNemesis)}
# chaos/host_nemesis.py and chaos/zk_nemesis.py add theirs (chaos/runner.py imports both).

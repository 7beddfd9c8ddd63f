"""One chaos run: start a cluster, run the seeded schedule under the workload, heal, read
everything back, snapshot every replica's log, check the history.

Timing: the schedule's offsets are kept against the run's clock (each fault starts at its
``at_s`` after the workload started, and stops at its end); a fault whose start or stop takes
longer (a restart waits until the process is ready) delays the ones after it, and the history
records when each really happened, so a replay can be compared line by line.

Files in the data dir: the cluster's own (``cluster.json``, ``logs/``, log dirs),
``schedule.json``, ``history.jsonl`` (the artefact to keep) and ``verdict.json``.

A run may also be given a running :class:`LocalCluster` (``RunConfig.cluster``: the matrix
tests share one across their cells) and a topic of its own; it then neither starts nor stops
the cluster, and the loop-mounted disk nemeses (whose dirs must be mounted before the brokers
start) are skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import hashlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

# host_nemesis and zk_nemesis register their nemeses into NEMESIS_CLASSES on import
from chaos import checker, host_nemesis, zk_nemesis  # noqa: F401
from chaos.attached import AttachedCluster
from chaos.disk import LoopMountedLogDir
from chaos.history import History
from chaos.nemesis import NEMESIS_CLASSES, ClusterProcesses, Nemesis
from chaos.netfilter import Netfilter
from chaos.schedule import Schedule, Timeouts, Topology, make_schedule
from chaos.workload import final_read, run_workload
from client.admin_client import AdminClient
from client.consumer import Consumer
from common.records import iter_batches
from harness.cluster_hosts import HostsOptions
from harness.local_cluster import LocalCluster

TOPIC = "chaos"
# No nemesis operation may hold the schedule up for good: what it waits on may be undone only
# by the schedule's next event (a controlled shutdown waiting for ZooKeeper, whose restart is
# the next event, would keep the run from ever healing). Past this bound - above the slowest
# legitimate operation: a stop's 60 s grace before SIGKILL, then a start's 60 s wait for
# readiness - the operation is recorded as stalled and the schedule goes on
# (tests/chaos/test_late_faults.py::test_a_stalled_operation_does_not_hold_up_the_schedule).
OP_TIMEOUT_S = 300.0


@dataclass
class RunConfig:
    seed: int
    duration_s: float
    nemeses: tuple[str, ...]
    data_dir: Path
    brokers: int = 3
    controllers: int = 1
    log_dirs_per_broker: int = 2
    partitions: int = 6
    timeouts: Timeouts = field(default_factory=Timeouts)
    heal_timeout_s: float = 90.0
    fixed_schedule: Schedule | None = None  # explicit (the matrix), instead of the seed's
    writers: tuple[str, ...] = ("all", "all", "1")  # one writer per entry: its acks
    topic: str = TOPIC
    settle_s: float = 3.0  # writes after the heal, before the final read
    # A running cluster, neither started nor stopped here: a LocalCluster shared by tests, or
    # an AttachedCluster (replog chaos --cluster DATA_DIR, chaos/attached.py).
    cluster: LocalCluster | AttachedCluster | None = None
    # The run's own cluster on hosts of its own (replog chaos --hosts --racks N): host nemeses
    hosts: HostsOptions | None = None
    # The run's own cluster's ZooKeeper: 1 standalone server, or a 3|5-member ensemble
    # (replog chaos --zookeeper-nodes N): the zk-* nemeses
    zookeeper_nodes: int = 1
    # The topic's replicas, partition -> brokers (replog lab's reassignment: the workload on
    # brokers 1-3 of 4); None: the controller's assignment at replication factor 3
    replica_assignment: dict[int, list[int]] | None = None
    # Awaited with the bootstrap servers once the topic is up, before the workload starts (the
    # lab's preload of the data a reassignment moves)
    prepare: Callable[[str], Awaitable[None]] | None = None
    # Handed to every nemesis in its ``shared`` dict (a lab arm's throttle, its failover)
    nemesis_options: dict = field(default_factory=dict)

    def topology(self) -> Topology:
        c = self.cluster
        if c is not None:
            return Topology(tuple(sorted(c.brokers)),
                            min(max(1, len(h.log_dirs)) for h in c.brokers.values()),
                            c.zookeeper_server is not None, self.partitions,
                            host_nemesis.racks_of(c), getattr(c, "zookeeper_nodes", 1))
        return Topology(tuple(range(1, self.brokers + 1)), self.log_dirs_per_broker, True,
                        self.partitions, self.hosts.racks if self.hosts else 1,
                        self.zookeeper_nodes)

    def schedule(self) -> Schedule:
        if self.fixed_schedule is not None:
            return self.fixed_schedule
        return make_schedule(self.seed, self.duration_s, self.nemeses, self.topology(),
                             self.timeouts)


@dataclass
class RunResult:
    schedule: Schedule
    history_path: Path
    verdict: checker.Verdict
    skipped: dict[str, str]


def cluster_overrides(t: Timeouts) -> dict[str, object]:
    return {"zookeeper.session.timeout.ms": int(t.session_timeout_s * 1000),
            "replica.lag.time.max.ms": int(t.lag_time_max_s * 1000),
            "replica.fetch.wait.max.ms": 200,
            "unclean.leader.election.enable": "false"}


def run(cfg: RunConfig, log=print) -> RunResult:
    return asyncio.run(_run(cfg, log))


async def _run(cfg: RunConfig, log) -> RunResult:
    # kazoo logs every dropped connection of the cluster's own client at WARNING: under a
    # ZooKeeper kill that is expected, and the history records the fault already.
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    schedule = cfg.schedule()
    data = cfg.data_dir.resolve()
    data.mkdir(parents=True, exist_ok=True)
    (data / "schedule.json").write_text(schedule.to_json() + "\n")
    owned = cfg.cluster is None
    if owned:
        faults_dir = data / "faults"
        faults_dir.mkdir(exist_ok=True)
        cluster = LocalCluster(
            data, brokers=cfg.brokers, controllers=cfg.controllers,
            log_dirs_per_broker=cfg.log_dirs_per_broker,
            overrides=cluster_overrides(cfg.timeouts),
            per_broker_overrides={
                b: {"fault.injection.file": str(faults_dir / f"broker-{b}.json")}
                for b in range(1, cfg.brokers + 1)}, hosts=cfg.hosts,
            zookeeper_nodes=cfg.zookeeper_nodes)
    else:
        cluster = cfg.cluster
    shared: dict = {"netfilter": Netfilter(), "mounts": {}, **cfg.nemesis_options}
    procs = ClusterProcesses(cluster, cfg.topic)
    nemeses = {n: NEMESIS_CLASSES[n](procs, shared) for n in schedule.nemeses}
    skipped = {n: why for n, nem in nemeses.items() if (why := nem.unavailable())}
    if not owned:
        for n in {"ext4", "enospc"} & set(nemeses) - set(skipped):
            skipped[n] = "needs log dirs loop-mounted before the brokers start (a cluster " \
                         "the run starts itself)"
    history: History | None = None
    try:
        if owned and not ({"ext4", "enospc"} & set(skipped)):
            for b, d in schedule.log_dirs_to_mount():
                m = LoopMountedLogDir(data / f"broker-{b}" / f"logdir-{d}",
                                      data / "disks" / f"broker-{b}-logdir-{d}.img")
                await asyncio.to_thread(m.create_and_mount)
                shared["mounts"][(b, d)] = m
        if owned:
            await asyncio.to_thread(cluster.start)
        shared["bootstrap"] = cluster.bootstrap_servers
        shared["topic"] = cfg.topic
        log(f"Cluster up in {cluster.data_dir}: bootstrap {cluster.bootstrap_servers}")
        await _create_topic(cluster.bootstrap_servers, cfg)
        if cfg.prepare is not None:
            await cfg.prepare(cluster.bootstrap_servers)
        history = History(data / "history.jsonl")  # time 0 = the workload's start
        stop = asyncio.Event()
        workload = asyncio.create_task(run_workload(cluster.bootstrap_servers, cfg.topic,
                                                    cfg.partitions, history, stop,
                                                    cfg.writers))
        try:
            await _run_schedule(schedule, nemeses, skipped, history, log)
            await _heal_all(nemeses, history)
            healed = await _wait_healed(cluster.bootstrap_servers, cfg, cfg.heal_timeout_s)
            history.record("nemesis", "ok" if healed else "info", "healed",
                           {"isr_full": healed})
            await asyncio.sleep(cfg.settle_s)  # writes go on after the heal
        finally:
            stop.set()
            await workload
        await final_read(cluster.bootstrap_servers, cfg.topic, cfg.partitions, history)
        await _snapshot_replicas(cluster, cfg, history)
    finally:
        with contextlib.suppress(Exception):
            await _heal_all(nemeses, None)
        if history is not None:
            history.close()
        if owned:
            await asyncio.to_thread(cluster.stop, False)
        shared["netfilter"].heal()
        for m in shared["mounts"].values():
            with contextlib.suppress(Exception):
                m.unmount()
    ops = history.ops
    verdict = checker.check(ops, cfg.timeouts.session_timeout_s, cfg.timeouts.lag_time_max_s)
    (data / "verdict.json").write_text(json.dumps(verdict.to_json(), indent=2) + "\n")
    return RunResult(schedule, data / "history.jsonl", verdict, skipped)


async def _create_topic(bootstrap: str, cfg: RunConfig) -> None:
    async with AdminClient(bootstrap) as admin:
        if cfg.replica_assignment is not None:
            await admin.create_topic(cfg.topic, replica_assignment=cfg.replica_assignment,
                                     configs={"min.insync.replicas": "2"})
        else:
            await admin.create_topic(cfg.topic, num_partitions=cfg.partitions,
                                     replication_factor=min(3, len(cfg.topology().brokers)),
                                     configs={"min.insync.replicas": "2"})
    if not await _wait_healed(bootstrap, cfg, 60.0):
        raise RuntimeError("the chaos topic's ISRs were not full within 60 s of creation")


async def _run_schedule(schedule: Schedule, nemeses: dict[str, Nemesis],
                        skipped: dict[str, str], history: History, log) -> None:
    # Starts and stops in time order; a stop sorts before a start at the same instant.
    events = sorted([(f.at_s, 1, f) for f in schedule.faults]
                    + [(f.end_s, 0, f) for f in schedule.faults if f.duration_s > 0],
                    key=lambda e: (e[0], e[1], e[2].index))
    # Admin operations (a preferred election, a reassignment) go through the AdminClient,
    # which retries for up to its API timeout (15 s) while the fault in progress has taken
    # the controller or ZooKeeper. Awaited here, they would hold up that fault's scheduled
    # stop and stretch the fault. They run in a lane of their own instead, one after another
    # in schedule order, beside the faults (tests/chaos/test_late_faults.py::
    # test_an_admin_operation_mid_fault_does_not_hold_up_the_faults_stop).
    admin_lane: asyncio.Future | None = None
    for at, kind, fault in events:
        delay = at - history.now()
        if delay > 0:
            await asyncio.sleep(delay)
        what = "start" if kind else "stop"
        value = {"fault": fault.to_json()}
        if fault.nemesis in skipped:
            if kind:
                history.record("nemesis", "info", what, {**value, "skipped":
                                                         skipped[fault.nemesis]})
                log(f"  {history.now():7.2f}s skip  {fault.describe()}: "
                    f"{skipped[fault.nemesis]}")
            continue
        nem = nemeses[fault.nemesis]
        history.record("nemesis", "invoke", what, value)
        if nem.admin and kind and fault.duration_s == 0:
            admin_lane = asyncio.ensure_future(
                _after(admin_lane, _apply(nem, fault, kind, value, history, log)))
            continue
        await _apply(nem, fault, kind, value, history, log)
    if admin_lane is not None:
        await admin_lane  # each operation is bounded (OP_TIMEOUT_S); then the heal


async def _after(previous: asyncio.Future | None, op) -> None:
    if previous is not None:
        await previous
    await op


async def _apply(nem: Nemesis, fault, kind: int, value: dict, history: History, log) -> None:
    """One nemesis start or stop, invoked: records ok, or info with the error."""
    what = "start" if kind else "stop"
    try:
        result = await _bounded(nem.start(fault) if kind else nem.stop(fault))
    except Exception as e:  # noqa: BLE001 - a nemesis that fails is recorded, then healed
        history.record("nemesis", "info", what, {**value, "error": f"{type(e).__name__}: "
                                                                  f"{e}"[:300]})
        log(f"  {history.now():7.2f}s {what:<5} {fault.describe()}: FAILED {e}")
        return
    history.record("nemesis", "ok", what, {**value, "result": result})
    log(f"  {history.now():7.2f}s {what:<5} #{fault.index} {fault.nemesis} {result}")


class StalledError(Exception):
    """A nemesis operation still running after OP_TIMEOUT_S."""


async def _bounded(op) -> dict:
    """``op``'s result, or StalledError after OP_TIMEOUT_S (``op`` is cancelled; a worker
    thread it waits on may still finish later, as the event it waited for comes)."""
    task = asyncio.ensure_future(op)
    done, _ = await asyncio.wait({task}, timeout=OP_TIMEOUT_S)
    if not done:
        task.cancel()
        raise StalledError(f"still running after {OP_TIMEOUT_S:g}s; the schedule goes on")
    return task.result()


async def _heal_all(nemeses: dict[str, Nemesis], history: History | None) -> None:
    # ZooKeeper first, whichever nemesis holds it: a broker's restart (another nemesis's
    # heal) waits for its registration in ZooKeeper. Then processes, network and disks: an
    # admin operation's heal (a reassignment moved back) completes only once every broker
    # is back.
    for name, nem in sorted(nemeses.items(),
                            key=lambda item: (not item[1].holds_zookeeper(), item[1].admin)):
        try:
            await nem.heal()
        except Exception as e:  # noqa: BLE001 - heal the others anyway
            if history is not None:
                history.record("nemesis", "info", "heal", {"nemesis": name, "error": str(e)})


async def _partition_states(bootstrap: str, topic: str
                            ) -> dict[int, tuple[list[int], list[int], int]]:
    async with AdminClient(bootstrap, request_timeout_ms=5000) as admin:
        info = (await admin.describe_topics([topic]))[topic]
    return {p.partition: (list(p.replicas), list(p.isr), p.leader) for p in info.partitions}


async def _wait_healed(bootstrap: str, cfg: RunConfig, timeout_s: float) -> bool:
    """Every replica back in its ISR, polled until ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        with contextlib.suppress(Exception):
            states = await _partition_states(bootstrap, cfg.topic)
            if len(states) == cfg.partitions and all(
                    sorted(r) == sorted(i) for r, i, _ in states.values()):
                return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.5)


def replica_log(log_dirs: list[str], partition: int, topic: str = TOPIC
                ) -> tuple[list[list], dict]:
    """Every batch of a replica's segment files: [base, last, sha256 of the bytes after the
    offset field (leader epoch and CRC included)], plus kafka-python's reading of the same
    files (CRCs valid, same records as replog's parser) when kafka-python is installed."""
    batches: list[list] = []
    raw_all = b""
    for d in log_dirs:
        for seg in sorted(glob.glob(os.path.join(glob.escape(d), f"{topic}-{partition}",
                                                 "*.log"))):
            with open(seg, "rb") as f:
                raw = f.read()
            raw_all += raw
            for b in iter_batches(raw, validate=False, allow_partial_tail=True):
                batches.append([b.header.base_offset, b.header.last_offset,
                                hashlib.sha256(bytes(b.data[8:])).hexdigest()[:16]])
    return batches, _kafka_python_view(raw_all)


def _kafka_python_view(raw: bytes) -> dict:
    try:
        from kafka.record.default_records import DefaultRecordBatch
    except ImportError:
        return {}
    from common.records import decode_all
    theirs, crc_ok, pos = [], True, 0
    while pos + 12 <= len(raw):
        length = int.from_bytes(raw[pos + 8:pos + 12], "big")
        if pos + 12 + length > len(raw):
            break  # a partial tail, as replog's parser allows
        kb = DefaultRecordBatch(bytearray(raw[pos:pos + 12 + length]))
        crc_ok = crc_ok and kb.validate_crc()
        theirs += [(r.offset, r.value) for r in kb]
        pos += 12 + length
    ours = [(r.offset, r.value) for r in decode_all(raw)]
    return {"crc_ok": crc_ok, "agrees": theirs == ours, "records": len(theirs)}


async def _snapshot_replicas(cluster: LocalCluster, cfg: RunConfig, history: History) -> None:
    """Once every replica has the leader's log end (bounded wait), record each replica's
    batches below the HW and the ISR (``replicas``)."""
    bootstrap = cluster.bootstrap_servers
    history.record("checker", "invoke", "replicas", {})
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60.0
    while True:
        states = await _partition_states(bootstrap, cfg.topic)
        async with Consumer(bootstrap, request_timeout_ms=5000) as c:
            ends = await c.end_offsets([(cfg.topic, p) for p in range(cfg.partitions)])
        hw = {tp[1]: o for tp, o in ends.items()}
        parts = []
        for p, (replicas, isr, leader) in sorted(states.items()):
            logs, kp = {}, {}
            for b in replicas:
                dirs = [str(d) for d in cluster.broker(b).log_dirs]
                logs[str(b)], view = await asyncio.to_thread(replica_log, dirs, p, cfg.topic)
                if view:
                    kp[str(b)] = view
            parts.append({"partition": p, "hw": hw[p], "replicas": replicas, "isr": isr,
                          "leader": leader, "logs": logs, "kafka_python": kp})
        level = all(len({(x[-1][1] if x else -1) for x in part["logs"].values()}) == 1
                    for part in parts)
        if level or loop.time() >= deadline:
            break
        await asyncio.sleep(0.5)
    history.record("checker", "ok", "replicas", {"partitions": parts, "level": level})

"""One run of one arm on one seed: a fresh local cluster, the chaos runner, the partition
states sampled from ZooKeeper, the metrics export, ``result.json`` written last."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos import runner
from chaos.lab.experiments import Arm, Experiment
from chaos.lab.figures import _events, event_counts
from chaos.schedule import Timeouts
from harness.cluster_view import ClusterView
from harness.local_cluster import LocalCluster

STATE_INTERVAL_S = 0.25
EXPORT_INTERVAL_MS = 500
RESULT = "result.json"
STATES = "states.jsonl"


@dataclass
class LabRun:
    experiment: Experiment
    arm: Arm
    seed: int
    dir: Path
    timeouts: Timeouts = field(default_factory=Timeouts)

    @property
    def run_id(self) -> str:
        return f"{self.arm.name}/seed-{self.seed}"

    def finished(self) -> bool:
        return (self.dir / RESULT).is_file()


def run_dir(out: Path, arm: str, seed: int) -> Path:
    return out / "runs" / arm / f"seed-{seed}"


async def _sample_states(cluster: LocalCluster, topic: str, partitions: int, path: Path,
                         run_id: str, stop: asyncio.Event) -> None:
    """The topic's partition states from ZooKeeper every STATE_INTERVAL_S, one line each:
    {run, wall, partition, leader, isr, elr, replicas, adding} (the last two from the topic's
    znode: its assignment, and the replicas a reassignment is adding); a read that fails
    (ZooKeeper busy) is skipped."""
    view = ClusterView(cluster, topic)
    with path.open("a", encoding="utf-8") as f:
        while not stop.is_set():
            wall = time.time()
            lines = []
            try:
                assignment = await asyncio.to_thread(view.topic_assignment, topic, 2.0)
            except Exception:  # noqa: BLE001 - ZooKeeper slow: the states without it
                assignment = None
            for p in range(partitions):
                try:
                    s = await asyncio.to_thread(view.partition_state, topic, p, 2.0)
                except Exception:  # noqa: BLE001, S112 - no state yet, or ZooKeeper slow: skip
                    continue
                line = {"run": run_id, "wall": round(wall, 4), "partition": p,
                        "leader": s.leader, "isr": list(s.isr), "elr": list(s.elr)}
                if assignment is not None and p in assignment.partitions:
                    line["replicas"] = assignment.partitions[p]
                    line["adding"] = assignment.adding_replicas.get(p, [])
                lines.append(json.dumps(line, separators=(",", ":")))
            if lines:
                f.write("\n".join(lines) + "\n")
                f.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), STATE_INTERVAL_S)


async def run_one(r: LabRun, log=print) -> dict:
    """One run of one arm on one seed, on a fresh cluster in ``r.dir/cluster``; returns (and
    writes last) its result."""
    from analytics.export import Exporter
    exp = r.experiment
    if r.dir.exists():
        shutil.rmtree(r.dir)  # an interrupted run: its files would mix into the new one
    r.dir.mkdir(parents=True)
    cluster_dir = r.dir / "cluster"
    faults_dir = r.dir / "faults"
    faults_dir.mkdir()
    started = time.monotonic()
    # Started here and handed to the runner (its ``cluster``), not started by the runner: the
    # runner's own cluster has fixed overrides, and an arm is its config.
    cluster = LocalCluster(
        cluster_dir, brokers=exp.brokers, controllers=exp.controllers,
        log_dirs_per_broker=exp.log_dirs_per_broker,
        overrides={**runner.cluster_overrides(r.timeouts), **r.arm.overrides},
        per_broker_overrides={b: {"fault.injection.file": str(faults_dir / f"broker-{b}.json")}
                              for b in range(1, exp.brokers + 1)})
    cfg = runner.RunConfig(seed=r.seed, duration_s=0.0, nemeses=(), data_dir=r.dir,
                           partitions=exp.partitions, timeouts=r.timeouts,
                           fixed_schedule=exp.schedule(r.seed, r.timeouts), writers=exp.writers,
                           topic="lab", settle_s=exp.settle_s, cluster=cluster,
                           replica_assignment=exp.assignment, prepare=exp.prepare,
                           nemesis_options=r.arm.options)
    stop = asyncio.Event()
    tasks: list[asyncio.Task] = []
    try:
        await asyncio.to_thread(cluster.start)
        exporter = Exporter(cluster_dir, r.dir / "export", EXPORT_INTERVAL_MS)
        tasks = [asyncio.create_task(exporter.run(stop)),
                 asyncio.create_task(_sample_states(cluster, cfg.topic, cfg.partitions,
                                                    r.dir / STATES, r.run_id, stop))]
        result = await runner._run(cfg, lambda line: log(f"    {line}"))
    finally:
        stop.set()
        for t in tasks:
            with contextlib.suppress(Exception):
                await t
        await asyncio.to_thread(cluster.stop, False)
    verdict = result.verdict
    lost = next((v.count for v in verdict.violations if v.property == "acked-write-lost"), 0)
    out = {"experiment": exp.name, "arm": r.arm.name, "seed": r.seed, "run": r.run_id,
           "valid": verdict.valid,
           "violations": sorted({v.property for v in verdict.violations}),
           "acked_lost": lost, "acked_all": verdict.stats.get("acked_all", 0),
           "max_unavailable_s": verdict.stats.get("max_unavailable_s", 0.0),
           **event_counts(_events(cluster_dir), cfg.topic),
           "skipped": result.skipped, "wall_s": round(time.monotonic() - started, 1)}
    # The brokers' segment files are what the checker already read; the history keeps it.
    for d in cluster_dir.glob("broker-*"):
        shutil.rmtree(d, ignore_errors=True)
    tmp = r.dir / (RESULT + ".tmp")
    tmp.write_text(json.dumps(out, indent=2) + "\n")
    tmp.replace(r.dir / RESULT)
    return out

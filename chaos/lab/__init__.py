"""``replog lab``: each design's claim measured against the behaviour it replaced, A/B over seeds.

An *experiment* (``EXPERIMENTS``) is a fault scenario and a set of *arms*: cluster configs, one
of them the pre-design behaviour ("baseline"). ``run_lab`` runs every arm on every seed, each
run on a fresh local cluster, through the chaos runner (chaos/runner.py): the same seed gives
every arm the same schedule (the faults, their targets and times, drawn from the seed only) and
the same workload, so arms differ by their config alone. Per run it keeps, under
``OUT/runs/<arm>/seed-<n>/``:

- ``schedule.json``, ``history.jsonl`` and ``verdict.json`` (the chaos runner's files);
- ``states.jsonl``: the workload topic's partition states (leader, ISR, ELR) read from
  ZooKeeper every ``STATE_INTERVAL_S``, the source of the leaderless / under-replicated /
  ISR-shrink figures (the controller's own record: a dead leader is not there to report it);
- ``export/``: ``replog metrics export``'s files for the run (``replog analyze --input``
  reads them);
- ``result.json``: written last, so a run with it is finished (``--resume`` skips it) and a
  run dir without it was interrupted (removed and run again).

Runs go seed by seed (every arm of seed 1, then of seed 2, ...), so a stopped lab still holds
comparable pairs. The analysis (analytics/lab.py, PySpark) then writes ``summary.json``,
``tables/`` and ``report.html``.

The package: ``nemeses`` (the lab's faults), ``experiments`` (the catalogue), ``runner`` (one
run), ``figures`` (what a run measures beyond the verdict), and here the lab itself (the plan,
seed by seed, and resuming); every name is importable from ``chaos.lab``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path

# The package's names, importable from chaos.lab as before it was a package; run_lab looks
# run_one up here (a test replaces it on this module).
from chaos.lab.experiments import _DEFAULT_TIMEOUTS as _DEFAULT_TIMEOUTS
from chaos.lab.experiments import _NO_ELR as _NO_ELR
from chaos.lab.experiments import EXPERIMENTS as EXPERIMENTS
from chaos.lab.experiments import THROTTLE_HIGH as THROTTLE_HIGH
from chaos.lab.experiments import THROTTLE_LOW as THROTTLE_LOW
from chaos.lab.experiments import Arm as Arm
from chaos.lab.experiments import Experiment as Experiment
from chaos.lab.experiments import _elr as _elr
from chaos.lab.experiments import _f as _f
from chaos.lab.experiments import _reassignment_arms as _reassignment_arms
from chaos.lab.experiments import _throttle as _throttle
from chaos.lab.experiments import experiment as experiment
from chaos.lab.experiments import last_replica_standing as last_replica_standing
from chaos.lab.experiments import one_bad_partition as one_bad_partition
from chaos.lab.experiments import one_failed_disk as one_failed_disk
from chaos.lab.experiments import parse_arms as parse_arms
from chaos.lab.experiments import preload as preload
from chaos.lab.experiments import reassignment_under_load as reassignment_under_load
from chaos.lab.experiments import slow_leader as slow_leader
from chaos.lab.figures import REASSIGN_BYTES_IN as REASSIGN_BYTES_IN
from chaos.lab.figures import _bytes_in as _bytes_in
from chaos.lab.figures import _events as _events
from chaos.lab.figures import copy_figures as copy_figures
from chaos.lab.figures import event_counts as event_counts
from chaos.lab.nemeses import BULK_ASSIGNMENT as BULK_ASSIGNMENT
from chaos.lab.nemeses import BULK_TOPIC as BULK_TOPIC
from chaos.lab.nemeses import MOVE_POLL_S as MOVE_POLL_S
from chaos.lab.nemeses import MOVE_TIMEOUT_S as MOVE_TIMEOUT_S
from chaos.lab.nemeses import NEW_BROKER as NEW_BROKER
from chaos.lab.nemeses import PRELOAD_BYTES as PRELOAD_BYTES
from chaos.lab.nemeses import PRELOAD_RECORD as PRELOAD_RECORD
from chaos.lab.nemeses import WORKLOAD_ASSIGNMENT as WORKLOAD_ASSIGNMENT
from chaos.lab.nemeses import LabFailoverNemesis as LabFailoverNemesis
from chaos.lab.nemeses import LabKillNemesis as LabKillNemesis
from chaos.lab.nemeses import LabPartitionEioNemesis as LabPartitionEioNemesis
from chaos.lab.nemeses import LabReassignNemesis as LabReassignNemesis
from chaos.lab.nemeses import LabStopNemesis as LabStopNemesis
from chaos.lab.nemeses import _OneProcessFault as _OneProcessFault
from chaos.lab.nemeses import reassignment_targets as reassignment_targets
from chaos.lab.nemeses import submitted as submitted
from chaos.lab.runner import EXPORT_INTERVAL_MS as EXPORT_INTERVAL_MS
from chaos.lab.runner import RESULT as RESULT
from chaos.lab.runner import STATE_INTERVAL_S as STATE_INTERVAL_S
from chaos.lab.runner import STATES as STATES
from chaos.lab.runner import LabRun as LabRun
from chaos.lab.runner import _sample_states as _sample_states
from chaos.lab.runner import run_dir as run_dir
from chaos.lab.runner import run_one as run_one
from common.errors import ReplogError


def plan(exp: Experiment, arms: tuple[Arm, ...], seeds: int, out: Path) -> list[LabRun]:
    """Seed by seed, every arm: a lab stopped half-way still compares arms on the same seeds."""
    return [LabRun(exp, a, s, run_dir(out, a.name, s)) for s in range(1, seeds + 1)
            for a in arms]


def check_out_dir(out: Path, exp: Experiment, resume: bool) -> None:
    manifest = out / "lab.json"
    if manifest.is_file():
        old = json.loads(manifest.read_text())
        if old.get("experiment") != exp.name:
            raise ReplogError(f"{out} holds the lab of experiment {old.get('experiment')}; "
                              f"use another --out")
        if not resume:
            raise ReplogError(f"{out} already holds runs of {exp.name}: --resume to go on "
                              f"with them, or another --out")
    elif out.exists() and any(out.iterdir()):
        raise ReplogError(f"--out {out} is not empty and holds no lab")


def _clock(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 3600:d}:{s // 60 % 60:02d}:{s % 60:02d}"


def progress_line(done: int, total: int, current: LabRun | None, elapsed: float,
                  walls: list[float]) -> str:
    """``[####------] 4/10 elr-balanced seed 2, 0:03:10 elapsed, ~0:04:45 left``: time left
    from the mean wall time of the runs finished in this invocation."""
    width = 20
    filled = width * done // max(1, total)
    bar = "#" * filled + "-" * (width - filled)
    what = f" {current.arm.name} seed {current.seed}," if current is not None else ""
    left = (f"~{_clock(sum(walls) / len(walls) * (total - done))} left" if walls
            else "time left unknown")
    return f"[{bar}] {done}/{total}{what} {_clock(elapsed)} elapsed, {left}"


def run_lab(exp: Experiment, arms: tuple[Arm, ...], seeds: int, out: Path,
            resume: bool = False, log=print) -> list[dict]:
    """Every run not finished yet; returns the results of all finished ones. Ctrl-C ends the
    run in progress (its cluster stopped, its dir left without a result) and raises
    KeyboardInterrupt."""
    check_out_dir(out, exp, resume)
    out.mkdir(parents=True, exist_ok=True)
    (out / "lab.json").write_text(json.dumps(
        {"experiment": exp.name, "claim": exp.claim, "scenario": exp.scenario,
         "arms": {a.name: {"description": a.description, "overrides": a.overrides,
                           "baseline": a.baseline} for a in arms},
         "seeds": seeds}, indent=2) + "\n")
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    runs = plan(exp, arms, seeds, out)
    done = sum(1 for r in runs if r.finished())
    if done:
        log(f"Resuming: {done} of {len(runs)} run(s) already finished")
    t0, walls, failed = time.monotonic(), [], 0
    for r in runs:
        if r.finished():
            continue
        log(progress_line(done, len(runs), r, time.monotonic() - t0, walls))
        t = time.monotonic()
        try:
            res = asyncio.run(run_one(r, log=lambda line: None))
        except Exception as e:  # noqa: BLE001 - one broken run (a cluster that did not
            # start on a loaded machine) must not cost the others; --resume runs it again
            failed += 1
            log(f"  {r.run_id}: FAILED, no result ({type(e).__name__}: {e})"[:300])
            continue
        walls.append(time.monotonic() - t)
        done += 1
        log(f"  {r.run_id}: {'VALID' if res['valid'] else 'INVALID'}; "
            f"{res['acked_lost']} acked lost, longest acks=all gap "
            f"{res['max_unavailable_s']:.1f}s, {res['unclean_elections']} unclean "
            f"election(s), {res['wall_s']:.0f}s")
    log(progress_line(done, len(runs), None, time.monotonic() - t0, walls))
    if failed:
        log(f"{failed} run(s) failed without a result: --resume runs them again")
    return [json.loads((r.dir / RESULT).read_text()) for r in runs if r.finished()]


def finished_runs(out: Path) -> list[Path]:
    return sorted(p.parent for p in (out / "runs").glob(f"*/seed-*/{RESULT}"))


def main_run(name: str, seeds: int, arms_text: str | None, out: Path, master: str | None,
             resume: bool) -> int:
    exp = experiment(name)
    if exp.schedule is None:
        raise ReplogError(f"experiment {name} cannot run yet: {exp.not_ready}")
    if seeds < 1:
        raise ReplogError(f"--seeds must be at least 1, got {seeds}")
    arms = parse_arms(exp, arms_text)
    try:
        run_lab(exp, arms, seeds, out, resume, log=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print(f"\nStopped. Finished runs are kept in {out}; go on with: replog lab run "
              f"{name} --seeds {seeds} --out {out} --resume", file=sys.stderr, flush=True)
        return 130
    from analytics.lab import analyze
    summary = analyze(out, master)
    print(f"Report: {out / 'report.html'}")
    print(f"Summary: {out / 'summary.json'}")
    for line in summary["table"]:
        print(line)
    return 0

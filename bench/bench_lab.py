"""What ``replog lab`` costs: the wall time of its runs, per experiment, per arm and per run.

Reads what a lab already wrote - it runs no lab itself (``make lab`` does, for an hour). The
lab output dir is ``$LAB_OUT`` (default ``lab-results``, ``make lab``'s), one dir per
experiment below it, or a single experiment's ``--out`` dir; each finished run's
``result.json`` holds its ``wall_s`` (cluster start to stop, chaos/lab/runner.py; the same column as
the analysis's ``tables/runs.csv``). Printed per arm: runs, the median, min and max wall time of
a run, and the arm's total; per experiment, the mean run and the total. Without any lab output
it says how to make one and exits 0.

``python -m bench lab`` (``LAB_OUT=/tmp/lab python -m bench lab``).
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

from bench import json_line, save_results

REPO = Path(__file__).resolve().parents[1]
NONE_YET = ("no replog lab output in {out}: make one with 'make lab' (every experiment, "
            "LAB_SEEDS=10) or 'replog lab run NAME --seeds N --out {out}/NAME', or point "
            "LAB_OUT at one")


def lab_dirs(out: Path) -> list[Path]:
    """``out`` itself when it is one experiment's output (it holds lab.json), else each
    experiment dir below it that does, in name order."""
    if (out / "lab.json").is_file():
        return [out]
    return sorted(p.parent for p in out.glob("*/lab.json"))


def read_walls(lab: Path) -> tuple[str, dict[str, list[float]]]:
    """(experiment, arm -> the wall times of its finished runs, in seed order)."""
    meta = json.loads((lab / "lab.json").read_text())
    walls: dict[str, list[float]] = {a: [] for a in meta.get("arms", {})}
    for path in sorted((lab / "runs").glob("*/seed-*/result.json"),
                       key=lambda p: (p.parts[-3], int(p.parts[-2].removeprefix("seed-")))):
        r = json.loads(path.read_text())
        if r.get("wall_s") is not None:
            walls.setdefault(r.get("arm", path.parts[-3]), []).append(float(r["wall_s"]))
    return meta.get("experiment", lab.name), {a: w for a, w in walls.items() if w}


def arm_figures(walls: list[float]) -> dict:
    return {"runs": len(walls), "median_s": round(statistics.median(walls), 1),
            "min_s": round(min(walls), 1), "max_s": round(max(walls), 1),
            "total_s": round(sum(walls), 1)}


def table(experiment: str, arms: dict[str, list[float]]) -> tuple[list[str], dict]:
    """The printed lines and the figures of one experiment."""
    figures = {a: arm_figures(w) for a, w in arms.items()}
    every = [x for w in arms.values() for x in w]
    total = {"runs": len(every), "mean_s": round(statistics.mean(every), 1),
             "total_s": round(sum(every), 1)}
    head = (f"{experiment}: {total['runs']} runs, {total['mean_s']:.1f} s a run on average, "
            f"{total['total_s'] / 60:.1f} min in all")
    columns = (f"  {'arm':<24} {'runs':>4} {'median s':>9} {'min s':>7} {'max s':>7} "
               f"{'total min':>9}")
    lines = [head, columns]
    for a, f in figures.items():
        lines.append(f"  {a:<24} {f['runs']:>4} {f['median_s']:>9.1f} {f['min_s']:>7.1f} "
                     f"{f['max_s']:>7.1f} {f['total_s'] / 60:>9.1f}")
    return lines, {"arms": figures, **total}


def main(opts) -> None:
    out = Path(os.environ.get("LAB_OUT", "lab-results"))
    if not out.is_absolute():
        out = (Path.cwd() / out) if (Path.cwd() / out).exists() else REPO / out
    results = {}
    for lab in lab_dirs(out):
        experiment, arms = read_walls(lab)
        if not arms:
            continue
        lines, figures = table(experiment, arms)
        print("\n".join(lines))
        for arm, f in figures["arms"].items():
            print(json_line("lab", f"{experiment}/{arm}", f))
        results[experiment] = figures
    if not results:
        print(NONE_YET.format(out=out))
        return
    save_results("lab", {"lab_out": str(out), "experiments": results})

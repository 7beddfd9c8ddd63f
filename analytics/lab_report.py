"""``OUT/report.html`` of ``replog lab``: the per-arm table, the distribution of each figure per
arm (one point per run, the median marked), and a timeline per arm of one seed with its faults
shaded. Self-contained as ``replog analyze``'s report is (analytics/report.py: inline PNGs,
no scripts), and drawn with the same helpers."""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path

from analytics.report import _head, _png, _table, plt

SHOWN = ("acked_lost", "longest_unavailable_s", "leaderless_s", "urp_s", "isr_shrinks",
         "time_to_full_s")
# shown only where the experiment measures them (a reassignment: the move's own figures)
SHOWN_IF_MEASURED = ("move_s", "copy_mb_s", "throttle_ratio", "p99_move_ms")
FAULT_COLORS = {"lab-stop": "tab:blue", "lab-kill": "tab:red"}


def _arms(lab: dict, summary: dict) -> list[str]:
    return list(summary["arms"]) or list(lab.get("arms", {}))


def shown_figures(runs: list[dict], metrics: dict[str, str]) -> list[str]:
    """The figures plotted: the common ones, then those only some experiments measure."""
    return [m for m in SHOWN if m in metrics] + [
        m for m in SHOWN_IF_MEASURED
        if m in metrics and any(r.get(m) is not None for r in runs)]


def distributions(runs: list[dict], arms: list[str], metrics: dict[str, str]) -> str:
    shown = shown_figures(runs, metrics)
    fig, axes = plt.subplots(1, len(shown), figsize=(3.1 * len(shown), 3.4), squeeze=False)
    for ax, m in zip(axes[0], shown):
        for i, arm in enumerate(arms):
            vals = [r[m] for r in runs if r["arm"] == arm and r.get(m) is not None]
            ax.plot([i] * len(vals), vals, "o", alpha=0.6, color="tab:blue", ms=4)
            if vals:
                med = sorted(vals)[len(vals) // 2] if len(vals) % 2 else \
                    sum(sorted(vals)[len(vals) // 2 - 1:len(vals) // 2 + 1]) / 2
                ax.plot([i - 0.3, i + 0.3], [med, med], color="tab:red", lw=2)
        ax.set_xticks(range(len(arms)))
        ax.set_xticklabels(arms, rotation=60, ha="right", fontsize=7)
        ax.set_title(metrics[m], fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def representative_seed(runs: list[dict], arms: list[str]) -> int | None:
    """The lowest seed every arm ran."""
    seeds = [{r["seed"] for r in runs if r["arm"] == a} for a in arms]
    common = set.intersection(*seeds) if seeds else set()
    return min(common) if common else None


def timeline(data: dict, arms: list[str], seed: int) -> str:
    fig, axes = plt.subplots(len(arms), 1, figsize=(10, 1.9 * len(arms)), sharex=True,
                             squeeze=False)
    rate = defaultdict(list)
    for r in data["acked_rate"]:
        rate[r["run"]].append((r["second"], r["acked"]))
    states = defaultdict(list)
    for r in data["timelines"]:
        states[r["run"]].append((r["t_s"], r["leaderless"], r["urp"]))
    for ax, arm in zip(axes[:, 0], arms):
        run = f"{arm}/seed-{seed}"
        if rate[run]:
            xs, ys = zip(*sorted(rate[run]))
            ax.bar(xs, ys, width=1.0, align="edge", color="tab:green", alpha=0.5,
                   label="acks=all acked/s")
        ax2 = ax.twinx()
        if states[run]:
            ts, ll, urp = zip(*sorted(states[run]))
            ax2.step(ts, ll, where="post", color="tab:red", label="leaderless partitions")
            ax2.step(ts, urp, where="post", color="tab:orange", ls="--",
                     label="under-replicated")
        ax2.set_ylim(bottom=0)
        for i, f in enumerate(f for f in data["faults"] if f["run"] == run):
            ax.axvspan(f["from_s"], f["to_s"], color=FAULT_COLORS.get(f["nemesis"], "grey"),
                       alpha=0.08)
            # one line per fault, from its start to its end: overlapping faults stay readable
            y = 0.95 - 0.13 * (i % 6)
            ax.annotate("", (f["to_s"], y), (f["from_s"], y), xycoords=("data", "axes fraction"),
                        arrowprops={"arrowstyle": "-|>", "color": FAULT_COLORS.get(
                            f["nemesis"], "grey"), "lw": 0.8})
            ax.annotate(f"{f['nemesis']} {f['target']}", (f["from_s"], y + 0.01),
                        xycoords=("data", "axes fraction"), fontsize=6, va="bottom")
        ax.set_ylabel(arm, fontsize=7)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=6, loc="upper right")
    ax2.legend(fontsize=6, loc="lower right")
    axes[-1, 0].set_xlabel("seconds since the workload started")
    fig.suptitle(f"Seed {seed}: acknowledged acks=all writes per second (bars), leaderless and "
                 f"under-replicated partitions (lines), faults shaded", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def render(out: Path, lab: dict, summary: dict, data: dict) -> Path:
    arms = _arms(lab, summary)
    metrics = summary["metrics"]
    name = summary.get("experiment") or "lab"
    parts = [_head(f"replog lab: {name}")]
    parts.append(f"<p><b>Claim:</b> {html.escape(summary.get('claim') or '')}<br>"
                 f"<b>Scenario:</b> {html.escape(summary.get('scenario') or '')}</p>")
    described = lab.get("arms", {})
    parts.append(_table(["arm", "description", "baseline"], [
        {"arm": a, "description": described.get(a, {}).get("description", ""),
         "baseline": "pre-design behaviour" if described.get(a, {}).get("baseline") else ""}
        for a in arms]))
    parts.append("<h2>Per arm</h2><p class=note>Sums over runs, then the median over runs of "
                 "each figure [95% bootstrap interval, with at least "
                 f"{summary['min_runs_for_ci']} runs].</p>")
    rows = []
    for a in arms:
        s = summary["arms"][a]
        row = {"arm": a, "runs": s["runs"], "acked_lost": s["acked_lost"],
               "clean_lost": s["clean_lost"], "lossy runs": s["runs_with_loss"],
               "unclean elections": s["unclean_elections"]}
        for m in metrics:
            med, lo, hi = s.get(f"{m}_median"), s.get(f"{m}_ci_low"), s.get(f"{m}_ci_high")
            row[m] = ("-" if med is None else f"{med:.2f}"
                      + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None else ""))
        rows.append(row)
    parts.append(_table(["arm", "runs", "acked_lost", "clean_lost", "lossy runs",
                         "unclean elections", *metrics], rows))
    parts.append("<p class=note>" + "; ".join(f"<b>{html.escape(k)}</b>: {html.escape(v)}"
                                               for k, v in metrics.items()) + "</p>")
    parts.append("<h2>Distributions per arm</h2><p class=note>One point per run; the red bar "
                 "is the median.</p>")
    parts.append(f'<img src="data:image/png;base64,{distributions(data["runs"], arms, metrics)}">')
    seed = representative_seed(data["runs"], arms)
    if seed is not None:
        parts.append("<h2>Timelines</h2>")
        parts.append(f'<img src="data:image/png;base64,{timeline(data, arms, seed)}">')
    cols = ["arm", "seed", "valid", "acked_lost", "clean_lost", "unclean_elections",
            *[m for m in metrics if m != "acked_lost"], "wall_s"]
    parts.append("<h2>Runs</h2>")
    parts.append(_table(cols, data["runs"]))
    parts.append("</body></html>")
    out.write_text("\n".join(parts), encoding="utf-8")
    return out

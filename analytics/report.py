"""``OUTPUT/report.html``: one self-contained page (plots inlined as base64 PNG, no scripts, no
external CSS), so it can be mailed, attached to an issue or opened from a CI artefact.

matplotlib because it renders static PNGs headlessly (Agg) with no browser or JS runtime, and a
PNG inlines in a page that works offline; interactive libraries would need their JS bundled.
Fault markers on every time series: a process going down (red; a kill or a pause, as the
exporter saw it), coming back (green), log dirs going offline (purple) and leader elections
(grey ticks along the bottom).
"""

from __future__ import annotations

import base64
import html
import io
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: render to memory only
import matplotlib.pyplot as plt

from analytics.schema import CHAOS_TABLES

MAX_ROWS = 60  # rows of a table shown in the page; the CSV beside it has all

SECTIONS = [
    ("Failover by cause", "failover_summary",
     "Time from a leader's loss to a new leader serving (its become_leader), by cause."),
    ("Failovers", "failovers",
     ("Each leader lost to a failure. loss_source says how the loss time was known: scrape = "
      "the exporter saw the process stop answering (midpoint, within loss_uncertainty_s); "
      "first_scrape = the exporter's first scrape of the process already failed (it started "
      "after the death: lost then or earlier); detection = the controller's broker_failed (lost "
      "then or earlier, by up to the ZooKeeper session timeout); election = the election "
      "itself.")),
    ("Availability per partition", "availability",
     "Leaderless windows: from a leader loss to a new leader serving (or the end of the data)."),
    ("Replica recoveries", "recoveries",
     ("A replica rejoining the ISR: from when it came back (restart, resume, re-creation) to "
      "its isr_expand.")),
    ("ISR churn per broker", "isr_churn_by_broker",
     "How often each broker's replicas left (shrinks) and rejoined (expands) an ISR."),
    ("ISR churn per partition", "isr_churn_by_partition", ""),
    ("Flapping partitions", "flapping_partitions",
     "Partitions whose ISR changed 6 or more times (3 shrink/expand cycles) within 60 s."),
    ("Unclean elections and recoveries", "unclean_elections",
     ("Blind unclean elections (offsets discarded: the followers' truncations) and KIP-966 "
      "unclean recoveries: strategy, outcome, replicas asked and answering, wait, chosen "
      "replica and the offsets the controller counted as discarded.")),
    ("Log-dir failures", "log_dir_failures",
     "Per partition of a failed log dir: time until that broker's replica rejoined the ISR."),
    ("Reassignments", "reassignments",
     ("Per partition: from reassignment_started to reassignment_completed. bytes_moved: the "
      "adding brokers' reassignment byte counters over the reassignment's sampling intervals "
      "(brokers count them per broker, not per partition); an upper bound when "
      "bytes_shared_with other reassignments added to the same broker in those intervals.")),
    ("Throughput per broker", "throughput_by_broker",
     ("Counter rates (bytes/s) and totals over the run: bytes_in from producers, bytes_out "
      "to consumers, replication_bytes_in/out between leaders and followers (Kafka's "
      "BytesIn/BytesOut/ReplicationBytesIn/ReplicationBytesOutPerSec).")),
    ("Process outages seen by the exporter", "process_transitions", ""),
    ("Scrapes", "scrape_health", ""),
]


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _markers(ax, data: dict, t0: float) -> None:
    for r in data["process_transitions"]["rows"]:
        color = "tab:red" if r["kind"] == "down" else "tab:green"
        ax.axvline(r["ts"] - t0, color=color, lw=1.2, ls="--", alpha=0.8)
        if r["kind"] == "down":
            ax.annotate(r["process"], (r["ts"] - t0, 1), xycoords=("data", "axes fraction"),
                        fontsize=7, color=color, rotation=90, va="top", ha="right")
    for r in data["log_dir_failures"]["rows"]:
        ax.axvline(r["ts"] - t0, color="tab:purple", lw=1.2, ls=":")
    # One artist for all leader losses: thousands of separate ones take minutes to draw.
    losses = [r["loss_ts"] - t0 for r in data["failovers"]["rows"]]
    if losses:
        ax.plot(losses, [0] * len(losses), ls="none", marker="|", color="grey", ms=10,
                transform=ax.get_xaxis_transform(), clip_on=False)


def _series_plot(data: dict, name: str, value: str, title: str, ylabel: str, t0: float,
                 by: str = "process", split: str | None = None):
    rows = data[name]["rows"]
    lines: dict[str, list] = defaultdict(list)
    for r in rows:
        key = r[by] if split is None else f"{r[by]} {r[split]}"
        lines[key].append((r["ts"] - t0, r[value]))
    fig, ax = plt.subplots(figsize=(10, 3.2))
    for key in sorted(lines):
        xs, ys = zip(*sorted(lines[key]))
        ax.plot(xs, ys, label=key, lw=1.2)
    if not lines:
        ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
    _markers(ax, data, t0)
    ax.set_title(title)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel(ylabel)
    if lines:
        ax.legend(fontsize=7, loc="upper left", ncol=3)
    ax.grid(alpha=0.3)
    return _png(fig)


def _hist(values_by: dict[str, list[float]], title: str, xlabel: str):
    fig, ax = plt.subplots(figsize=(5, 3.2))
    vals = [v for vs in values_by.values() for v in vs]
    if vals:
        bins = min(30, max(5, len(vals) // 2))
        ax.hist([values_by[k] for k in sorted(values_by)], bins=bins, stacked=True,
                label=sorted(values_by))
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "none in this run", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    ax.grid(alpha=0.3)
    return _png(fig)


def _availability_plot(data: dict):
    rows = sorted(data["availability"]["rows"], key=lambda r: -r["total_leaderless_s"])
    fig, ax = plt.subplots(figsize=(5, 3.2))
    shown = [r for r in rows if r["total_leaderless_s"] > 0][:30]
    if shown:
        ax.barh([r["partition"] for r in shown][::-1],
                [r["total_leaderless_s"] for r in shown][::-1], color="tab:orange")
        ax.set_xlabel("leaderless seconds")
        ax.tick_params(axis="y", labelsize=7)
    else:
        ax.text(0.5, 0.5, "no partition was ever leaderless", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_title(f"Leaderless time per partition ({len(shown)} of {len(rows)} shown)")
    ax.grid(alpha=0.3, axis="x")
    return _png(fig)


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    if isinstance(v, dict):
        return ",".join(f"{k}={x}" for k, x in v.items())
    return str(v)


def _table(columns: list[str], rows: list[dict], t0: float | None = None) -> str:
    """An HTML table; times (``ts``, ``*_ts``) shown as seconds since ``t0``, like the plots
    (the CSV keeps Unix seconds)."""
    def cell(c, v):
        if t0 is not None and (c == "ts" or c.endswith("_ts")) and isinstance(v, float):
            return f"+{v - t0:.3f}"
        return _fmt(v)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell(c, r[c]))}</td>" for c in columns)
                   + "</tr>" for r in rows[:MAX_ROWS])
    more = (f"<p class=note>{len(rows) - MAX_ROWS} more rows in the CSV.</p>"
            if len(rows) > MAX_ROWS else "")
    return f"<table><tr>{head}</tr>{body}</table>{more}"


CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:6px 0}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}.note{color:#666;font-size:12px}
.row{display:flex;gap:12px;flex-wrap:wrap}img{max-width:100%}
"""


def _head(title: str) -> str:
    t = html.escape(title)
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{t}</title>"
            f"<style>{CSS}</style></head><body><h1>{t}</h1>")


def _chaos_section(chaos: dict) -> list[str]:
    """Chaos runs' histories (analytics.chaos_history): their tables, with what each holds."""
    parts = ["<h2>Chaos runs: writes and acks=all availability</h2>",
             ("<p class=note>From the runs' history.jsonl; times are seconds since each run's "
              "workload started. Gaps are chaos.checker's availability figures.</p>")]
    for name, note in CHAOS_TABLES.items():
        d = chaos[name]
        parts.append(f"<h3>{html.escape(name)}</h3><p class=note>{html.escape(note)}</p>")
        parts.append(_table(d["columns"], d["rows"]) if d["rows"]
                     else "<p class=note>None in these runs.</p>")
        parts.append(f"<p class=note>tables/{name}.csv, tables/{name}.parquet</p>")
    return parts


def render_chaos_report(out: Path, chaos: dict) -> Path:
    """The page when only chaos histories were given."""
    parts = [_head("replog analysis — chaos runs"), *_chaos_section(chaos), "</body></html>"]
    path = out / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def render_report(out: Path, manifest: dict, summary: list[tuple], data: dict, span,
                  chaos: dict | None = None) -> Path:
    t0 = span[0]
    plots = [
        _series_plot(data, "throughput", "rate", "Bytes in and out per broker (bytes/s)", "bytes/s",
                     t0, split="series"),
        _series_plot(data, "follower_lag", "max_lag", "Follower max lag per broker (messages)",
                     "messages", t0),
        _series_plot(data, "under_replicated", "value", "Under-replicated partitions per broker",
                     "partitions", t0),
    ]
    by_cause: dict[str, list[float]] = defaultdict(list)
    for r in data["failovers"]["rows"]:
        if r["failover_s"] is not None:
            by_cause[r["cause"]].append(r["failover_s"])
    by_kind: dict[str, list[float]] = defaultdict(list)
    for r in data["recoveries"]["rows"]:
        if r["recovery_s"] is not None:
            by_kind[r["cause"]].append(r["recovery_s"])
    small = [_hist(by_cause, "Failover time by cause", "seconds"),
             _hist(by_kind, "Recovery time (back -> rejoined ISR)", "seconds"),
             _availability_plot(data)]

    cid = str(manifest.get("cluster_id") or "?")
    parts = [_head(f"replog analysis — cluster {cid}"), "<h2>Summary</h2>",
             _table(["figure", "value"], [{"figure": k, "value": v} for k, v in summary]),
             ("<h2>Over time</h2><p class=note>Red dashed: a process stopped answering the "
              "exporter (kill or pause); green: answering again; purple dotted: a log dir went "
              "offline; grey ticks: leader losses.</p>")]
    parts += [f'<img alt="time series {i}" src="data:image/png;base64,{p}">'
              for i, p in enumerate(plots)]
    parts.append("<h2>Distributions</h2><div class=row>")
    parts += [f'<img alt="distribution {i}" src="data:image/png;base64,{p}">'
              for i, p in enumerate(small)]
    parts.append("</div>")
    for title, name, note in SECTIONS:
        d = data[name]
        parts.append(f"<h2>{html.escape(title)}</h2>")
        note = note + (" Times: seconds since the start of the data." if d["rows"] and any(
            c == "ts" or c.endswith("_ts") for c in d["columns"]) else "")
        if note:
            parts.append(f"<p class=note>{html.escape(note)}</p>")
        if d["rows"]:
            parts.append(_table(d["columns"], d["rows"], t0))
        else:
            parts.append("<p class=note>None in this run.</p>")
        parts.append(f"<p class=note>tables/{name}.csv, tables/{name}.parquet</p>")
    if chaos is not None:
        parts += _chaos_section(chaos)
    parts.append("</body></html>")
    path = out / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path

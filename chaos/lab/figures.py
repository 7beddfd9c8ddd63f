"""The figures a lab run measures beyond the chaos runner's verdict: a reassignment's copy
(bytes in, copy time) and the event logs' counts (unclean elections, offsets discarded or
truncated)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

REASSIGN_BYTES_IN = "kafka_server_brokertopicmetrics_reassignmentbytesin_total"


async def _bytes_in(url: str) -> float | None:
    """The reassignment bytes a broker has received (its /metrics, read as the exporter reads
    it); None when it does not answer."""
    from analytics.export import http_get, parse_samples
    try:
        text = await http_get(url, timeout=5)
    except (OSError, TimeoutError):
        return None
    return sum(v for name, _, v in parse_samples(text) if name == REASSIGN_BYTES_IN)


def copy_figures(received: list[tuple[float, float]], share: float = 0.95) -> dict:
    """From broker 4's reassignment bytes in, sampled (seconds since the request, bytes)
    through the move: ``bytes_in`` in all, and ``copy_s``, when ``share`` of them had
    arrived - the copy's own duration, which a new replica's entry to the ISR (it waits for
    a controller to accept it, KIP-497) may well outlast - with ``copy_bytes``, that share.
    The rate the throttle let through is copy_bytes / copy_s."""
    if not received or received[-1][1] <= 0:
        return {"bytes_in": None, "copy_s": None, "copy_bytes": None}
    total = received[-1][1]
    at = next(t for t, b in received if b >= share * total)
    return {"bytes_in": int(total), "copy_s": round(at, 3), "copy_bytes": int(share * total)}


def _events(cluster_dir: Path) -> list[dict]:
    out = []
    for path in sorted((cluster_dir / "logs").glob("*.events.jsonl")):
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
    return out


def event_counts(events: list[dict], topic: str) -> dict:
    """Per run, from the processes' event logs: unclean elections (blind ones and KIP-966
    recoveries) of the workload topic, the offsets recoveries counted as discarded, and the
    offsets followers truncated (a truncation below an acknowledged record is data loss; one of
    an unacknowledged acks=1 tail is not)."""
    mine = [e for e in events if str(e.get("partition", "")).startswith(f"{topic}-")]
    elections = [e for e in mine if e.get("event") == "leader_election"]
    return {
        "unclean_elections": sum(1 for e in elections if e.get("unclean")),
        "leader_elections": sum(1 for e in elections if e.get("new_leader", -1) >= 0),
        "recovery_offsets_discarded": sum(
            int(e.get("offsets_discarded") or 0) for e in mine
            if e.get("event") == "unclean_recovery_finished"),
        "offsets_truncated": sum(
            max(0, int(e.get("from_offset") or 0) - int(e.get("to_offset") or 0))
            for e in mine if e.get("event") == "truncated"),
    }

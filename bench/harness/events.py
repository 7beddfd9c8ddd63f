"""Reading the processes' JSON-lines event logs as they grow: what happened when, by the
processes' own clocks (wall clock, one host)."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from pathlib import Path


def parse_ts(text: str) -> float:
    """structlog's ISO UTC timestamp -> seconds since the epoch."""
    return datetime.fromisoformat(text).timestamp()


class EventTail:
    """New events of a process's JSON-lines event log since the tail was made."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.offset = self.path.stat().st_size
        except FileNotFoundError:
            self.offset = 0
        self._partial = b""
        self.events: list[dict] = []

    def poll(self) -> list[dict]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        new = []
        for line in lines:
            if line.strip():
                with contextlib.suppress(ValueError):
                    e = json.loads(line)
                    e["_ts"] = parse_ts(e["timestamp"])
                    new.append(e)
        self.events += new
        return new

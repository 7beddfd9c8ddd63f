"""The history of a chaos run: every operation, one JSON object per line (Jepsen's shape).

Each line is one event of an operation::

    {"index": 12, "time": 3.5123, "wall": 1764000000.12, "process": "writer-0",
     "type": "invoke", "f": "send", "value": {"partition": 2, "value": "w0:17:all",
                                            "acks": "all"}}

- ``type``: ``invoke`` when an operation starts, then ``ok`` (it happened), ``fail`` (it
  certainly did not happen) or ``info`` (unknown: a timeout or an error after which the write
  may or may not be in the log) for its completion, by the same ``process``;
- ``f``: ``send`` (a produce; ok carries ``offset``), ``read`` (a consumer poll; ok carries
  ``records``: ``[[partition, offset, value], ...]``), ``final-read`` (everything read back
  after the heal, with the partitions' ``end_offsets``), ``replicas`` (each replica's batches
  read from its segment files after the heal, with the ISR), and the nemesis's ``start`` /
  ``stop`` / ``heal`` (process ``nemesis``, value = the fault);
- ``time`` is seconds since the run started (monotonic), ``wall`` the Unix time (for joining
  with the brokers' event logs and the PySpark analysis, which reads flat JSON lines).

Values written by the workload describe themselves: ``w<writer>:<seq>:<acks>``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO


class History:
    """Appends operations to a JSON Lines file as they happen (flushed per line, so a run
    that dies still leaves its history) and keeps them in memory for the checker."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        self.ops: list[dict] = []
        self._t0 = time.monotonic()
        self._file: IO[str] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w", encoding="utf-8")

    def now(self) -> float:
        return time.monotonic() - self._t0

    def record(self, process: str, type_: str, f: str, value: dict | None = None) -> dict:
        op = {"index": len(self.ops), "time": round(self.now(), 4),
              "wall": round(time.time(), 4), "process": process, "type": type_, "f": f,
              "value": value or {}}
        self.ops.append(op)
        if self._file is not None:
            self._file.write(json.dumps(op, separators=(",", ":")) + "\n")
            self._file.flush()
        return op

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_history(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return list(parse_lines(f))


def parse_lines(lines: Iterable[str]) -> Iterator[dict]:
    for line in lines:
        if line.strip():
            yield json.loads(line)


def write_value(writer: int, seq: int, acks: str) -> str:
    return f"w{writer}:{seq}:{acks}"


def parse_value(value: str) -> tuple[str, int, str] | None:
    """``w0:17:all`` -> ("w0", 17, "all"); None for a value the workload did not write."""
    parts = value.split(":")
    if len(parts) != 3 or not parts[0].startswith("w") or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1]), parts[2]

"""The metric catalog (docker/prometheus/metrics.txt) and the metric names PromQL refers to."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROM_DIR = REPO / "docker" / "prometheus"
CATALOG = PROM_DIR / "metrics.txt"

_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count",
                                                               "_created"), "gauge": ("",)}


def catalog() -> set[tuple[str, str, str]]:
    """{(role, family name, type)} as listed in the repo."""
    out = set()
    for line in CATALOG.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            role, name, kind = line.split()
            out.add((role, name, kind))
    return out


def sample_names() -> set[str]:
    """Every series name a catalogued family exposes (counters with _total, ...)."""
    return {name + suffix for _role, name, kind in catalog() for suffix in _SUFFIXES[kind]}


def referenced_metrics(expr: str) -> set[str]:
    """Metric names (replog_*, kafka_*) an expression reads; recording-rule names have colons
    and are not metrics."""
    return set(re.findall(r"(?<![\w:])((?:kafka|replog)_[A-Za-z0-9_]+)(?![\w:])", expr))

"""``replog analyze`` on bad input: one ``Error:`` line on stderr, exit 1, no traceback — and
no JVM started for it (the checks run first)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.local_cluster import REPO_ROOT


def _analyze(input_dir, tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-m", "admin.cli", "analyze", "--input",
                           str(input_dir), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60, env=env, check=False)


def _export(tmp_path, cluster_id="CLUSTER-A"):
    d = tmp_path / "export"
    for sub in ("samples", "scrapes", "events"):
        (d / sub).mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps(
        {"format": "replog-export", "version": 1, "cluster_id": cluster_id, "interval_ms": 1000}))
    (d / "scrapes" / "scrapes-1.jsonl").write_text(json.dumps(
        {"ts": 1.0, "process": "broker-1", "role": "broker", "node_id": 1, "ok": True}) + "\n")
    (d / "events" / "broker-1.events.jsonl").write_text(json.dumps(
        {"event": "broker_started", "timestamp": "2024-05-01T10:00:00Z", "process": "broker",
         "broker": 1, "cluster_id": cluster_id}) + "\n")
    return d


def _bad_empty_dir(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    return d, "is not a replog export: no manifest.json"


def _bad_no_data(tmp_path):
    d = _export(tmp_path)
    for f in d.glob("*/*.jsonl"):
        f.unlink()
    return d, "holds no samples, scrapes or events"


def _bad_corrupt_parquet(tmp_path):
    d = _export(tmp_path)
    (d / "samples" / "part-0.parquet").write_bytes(b"PAR1" + b"\x00garbage" * 20)
    return d, "samples/part-0.parquet is not a Parquet file (corrupt or truncated)"


def _bad_other_cluster(tmp_path):
    d = _export(tmp_path)
    (d / "events" / "broker-2.events.jsonl").write_text(json.dumps(
        {"event": "broker_started", "timestamp": "2024-05-01T10:00:00Z", "process": "broker",
         "broker": 2, "cluster_id": "CLUSTER-B"}) + "\n")
    return d, ("events/broker-2.events.jsonl holds events of cluster CLUSTER-B, but this "
               "export is of cluster CLUSTER-A")


def _bad_missing_dir(tmp_path):
    return tmp_path / "nope", "no such directory"


def _bad_manifest(tmp_path):
    d = _export(tmp_path)
    (d / "manifest.json").write_text("{not json")
    return d, "manifest.json is not JSON"


# Each case is a CLI process (~3 s of imports on this machine): the three, plus a
# missing dir, a dir without data and an unreadable manifest.
@pytest.mark.parametrize("case", [_bad_empty_dir, _bad_no_data, _bad_corrupt_parquet,
                                  _bad_other_cluster, _bad_missing_dir, _bad_manifest],
                         ids=lambda f: f.__name__.removeprefix("_bad_"))
def test_bad_input_one_line_exit_1(case, tmp_path):
    d, expected = case(tmp_path)
    r = _analyze(d, tmp_path)
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("Error: ") and expected in lines[0], lines[0]
    assert r.stdout == ""

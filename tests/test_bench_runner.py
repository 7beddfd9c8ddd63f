"""bench/harness/runner.py, the skeleton the cluster benchmarks share: the number of runs the
options ask for, each in a scratch dir of its own that is gone afterwards, a progress line per
run, and the figure printed and saved with the machine it ran on."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import bench
from bench.harness import runner


def test_runs_each_in_a_fresh_scratch_dir_then_prints_and_saves(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "RESULTS_DIR", tmp_path / "results")
    opts = SimpleNamespace(runs=None, quick=False, data_dir=str(tmp_path))
    dirs = []

    async def one_run(d: str) -> dict:
        assert os.path.isdir(d)
        dirs.append(d)
        return {"n": len(dirs)}

    results = runner.run_each(opts, one_run, lambda i, n, r: f"run {i + 1}/{n}: {r['n']}")
    assert results == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert len(set(dirs)) == 3 and not any(os.path.exists(d) for d in dirs)
    figure = runner.report("demo", "fig", {"x": 1}, ["== demo"], runs=results)
    out, err = capsys.readouterr()
    assert err.splitlines() == ["run 1/3: 1", "run 2/3: 2", "run 3/3: 3"]
    assert out.splitlines() == ["== demo", '{"bench":"demo","figure":"fig","x":1}']
    saved = json.loads((tmp_path / "results" / "demo.json").read_text())
    assert figure == saved["figure"] == {"x": 1} and saved["runs"] == results
    assert "python" in saved["machine"]


def test_quick_is_one_run_and_runs_overrides():
    assert runner.runs_of(SimpleNamespace(runs=None, quick=True)) == 1
    assert runner.runs_of(SimpleNamespace(runs=None, quick=False), default_runs=5) == 5
    assert runner.runs_of(SimpleNamespace(runs=2, quick=True)) == 2


def test_phase_cpu_reports_each_group_and_the_client():
    from bench.harness.cpu import PhaseCpu
    cpu = PhaseCpu({"me": [os.getpid()], "gone": [None]})
    cpu.start()
    sum(i * i for i in range(200_000))
    out = cpu.stop()
    assert set(out) == {"client", "me", "gone"}
    assert out["me"] >= 0 and out["gone"] == 0 and out["client"] >= 0

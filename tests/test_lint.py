"""``make lint`` inside ``make test``: ruff with the rules pyproject.toml chooses, import-linter
with the README's layers ([tool.importlinter]) and mypy on the pure cores ([tool.mypy]). Each
runs from the dev extra's pinned version (pip install -e '.[dev]'); a tool that is not
installed skips its test, saying so. Together they take a few seconds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / tool
    path = str(exe) if exe.exists() else shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (the dev extra: pip install -e '.[dev]')")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([path, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_ruff_finds_nothing():
    r = _run("ruff", "check", "--no-cache", ".")
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_import_keeps_the_layers():
    r = _run("lint-imports", "--no-cache")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_pure_cores_type_check():
    r = _run("mypy")
    assert r.returncode == 0, r.stdout + r.stderr

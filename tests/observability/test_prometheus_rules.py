"""docker/prometheus/ and docker/grafana/ checked with Prometheus's own tools (Debian's
`promtool`, installed by `make setup`): the configs and rules load, every alert's unit tests
pass, the dashboards JSON matches its generator, and every query names only served metrics."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from harness.prometheus import RULES_DIR, scrape_config
from tests.observability.catalog import PROM_DIR, REPO, referenced_metrics, sample_names

DASHBOARDS = REPO / "docker" / "grafana" / "dashboards.py"


def promtool(*args: str) -> str:
    path = shutil.which("promtool")
    # No skip: `make setup` installs Debian's prometheus; a silent skip would hide a broken
    # setup.
    assert path, "promtool missing: run 'apt-get install prometheus' as root (make setup does)"
    p = subprocess.run([path, *args], capture_output=True, text=True, cwd=PROM_DIR,
                       check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout + p.stderr


def test_rules_load_and_alert_unit_tests_pass():
    out = promtool("check", "rules", *map(str, sorted(RULES_DIR.glob("*.yml"))))
    assert out.count("SUCCESS") == 2, out
    out = promtool("test", "rules", "tests/alerts_test.yml")
    assert "SUCCESS" in out, out


def test_every_alert_has_firing_and_quiet_unit_tests():
    alerts = set(re.findall(r"- alert: (\w+)", (RULES_DIR / "replog-alerts.yml").read_text()))
    tests = (PROM_DIR / "tests" / "alerts_test.yml").read_text()
    quiet = set(re.findall(r"alertname: (\w+), exp_alerts: \[\]", tests))
    firing = set(re.findall(r"alertname: (\w+)\n\s+exp_alerts:\n\s+- exp_labels", tests))
    assert alerts, "no alerts found"
    assert alerts - quiet == set(), f"alerts with no quiet case: {alerts - quiet}"
    assert alerts - firing == set(), f"alerts with no firing case: {alerts - firing}"


def test_compose_and_local_scrape_configs_are_valid(tmp_path):
    promtool("check", "config", "prometheus.yml")
    cluster = {"controllers": [{"id": 100, "metrics_url": "http://127.0.0.1:9001/metrics"}],
               "brokers": [{"id": 1, "metrics_url": "http://127.0.0.1:9002/metrics"}]}
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(json.dumps(scrape_config(cluster)))
    out = promtool("check", "config", str(cfg))
    assert "2 rule files found" in out, out


def test_dashboards_json_is_generated_from_dashboards_py():
    p = subprocess.run([sys.executable, str(DASHBOARDS), "--check"], check=False,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def _exprs() -> list[tuple[str, str]]:
    out = []
    for f in sorted((PROM_DIR / "rules").glob("*.yml")):
        out += [(f.name, e) for e in re.findall(r"expr: (?:>-\n)?(.+(?:\n {10}\S.*)*)",
                                                 f.read_text())]
    sys.path.insert(0, str(DASHBOARDS.parent))
    try:
        import dashboards
    finally:
        sys.path.pop(0)
    out += [(f"{uid}: {title}", expr) for uid, title, expr in dashboards.queries()]
    return out


@pytest.mark.parametrize("where,expr", _exprs())
def test_queries_name_only_catalogued_metrics(where, expr):
    unknown = referenced_metrics(expr) - sample_names()
    assert not unknown, f"{where}: {expr!r} reads metrics no process serves: {unknown}"

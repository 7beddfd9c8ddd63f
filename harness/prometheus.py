"""Debian's Prometheus beside a local cluster (``replog cluster up --prometheus``).

The scrape config is written from ``cluster.json`` (every controller and broker's
``metrics_url``), with the jobs and labels of the compose config
(``docker/prometheus/prometheus.yml``: job ``replog-controller``/``replog-broker``, ``node_id``),
so the same rule files (``docker/prometheus/rules/``) and dashboards work for both. Ports of a
local cluster stay the same across process restarts, so static targets stay valid.

Prometheus runs as its own process (``prometheus --config.file ... --storage.tsdb.path ...``) on
a loopback port, with its data and log under ``DIR/prometheus/``. Nothing here is Debian-specific
but the install hint: any ``prometheus`` 2.x binary on PATH works.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from harness.local_cluster import HOST, REPO_ROOT, LocalClusterError, _tail, free_port
from harness.polling import wait_until

RULES_DIR = REPO_ROOT / "docker" / "prometheus" / "rules"
INSTALL_HINT = "apt-get install prometheus"
# Short enough that a `for: 10s` alert fires within seconds of a fault on a laptop cluster;
# the compose config uses 5s.
SCRAPE_INTERVAL = "2s"


class PrometheusNotInstalledError(LocalClusterError):
    def __init__(self):
        super().__init__(f"prometheus is not installed: run '{INSTALL_HINT}' as root")


def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        raise PrometheusNotInstalledError()
    return path


def scrape_config(cluster: dict, rules_dir: Path = RULES_DIR,
                  interval: str = SCRAPE_INTERVAL) -> dict:
    """Prometheus's config for a cluster description (the contents of ``cluster.json``)."""
    def targets(procs: list[dict]) -> list[dict]:
        out = []
        for p in procs:
            url = urllib.parse.urlsplit(p["metrics_url"])
            out.append({"targets": [url.netloc], "labels": {"node_id": str(p["id"])}})
        return out

    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(rules_dir / "*.yml")],
        "scrape_configs": [
            {"job_name": "replog-controller", "static_configs": targets(cluster["controllers"])},
            {"job_name": "replog-broker", "static_configs": targets(cluster["brokers"])},
        ],
    }


class PrometheusServer:
    """One Prometheus process scraping the cluster described by ``cluster_json``."""

    def __init__(self, cluster_json: Path, work_dir: Path, port: int = 0,
                 interval: str = SCRAPE_INTERVAL):
        self.cluster_json = Path(cluster_json)
        self.work_dir = Path(work_dir)
        self.port = port or free_port()
        self.interval = interval
        self.config_file = self.work_dir / "prometheus.yml"
        self.log_file = self.work_dir / "prometheus.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def write_config(self) -> None:
        cluster = json.loads(self.cluster_json.read_text(encoding="utf-8"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        # JSON is YAML: no YAML library needed to write Prometheus's config.
        self.config_file.write_text(json.dumps(scrape_config(cluster, interval=self.interval),
                                               indent=2) + "\n", encoding="utf-8")

    def start(self, timeout: float = 60.0) -> PrometheusServer:
        binary = prometheus_binary()
        self.write_config()
        cmd = [binary, f"--config.file={self.config_file}",
               f"--storage.tsdb.path={self.work_dir / 'tsdb'}",
               f"--web.listen-address={HOST}:{self.port}",
               # A local cluster's data is worth an hour at most; keeps the data dir small.
               "--storage.tsdb.retention.time=1d"]
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        def ready() -> bool:
            if self._ready():
                return True
            if self.proc.poll() is not None:
                raise LocalClusterError(
                    f"prometheus exited with code {self.proc.returncode}; last lines of "
                    f"{self.log_file}:\n{_tail(self.log_file)}")
            return False

        def timed_out(_last) -> LocalClusterError:
            self.stop()
            return LocalClusterError(f"prometheus not ready after {timeout:.0f}s; last lines "
                                     f"of {self.log_file}:\n{_tail(self.log_file)}")

        wait_until(ready, timeout, timed_out=timed_out)
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    # ------------------------------------------------------------------ HTTP API

    def api(self, path: str, **params: str) -> dict:
        """GET ``/api/v1/<path>``; returns ``data``; raises with Prometheus's error text."""
        return api_get(self.url, path, **params)


def api_get(base_url: str, path: str, **params: str) -> dict:
    url = f"{base_url}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as e:  # a bad query answers 400 with a JSON error
        body = json.loads(e.read() or b"{}")
    if body.get("status") != "success":
        raise LocalClusterError(f"prometheus {path} {params}: {body.get('errorType')}: "
                                f"{body.get('error')}")
    return body["data"]

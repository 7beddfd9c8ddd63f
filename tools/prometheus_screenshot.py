"""Re-make ``docs/prometheus-graph.png``: Prometheus's graph page for a replog metric, from a live
run, taken with headless Chromium (docs/observability.md, "Prometheus, alerts and dashboards").

What it runs, the way an operator would:

1. ``replog cluster up --prometheus --prometheus-port 0`` (3 brokers, 1 controller) with a data
   dir under /tmp, in the background;
2. ``replog topics create`` a 3-partition RF 3 topic, then ``replog produce`` in perf mode in a
   few phases of different throughput, so the bytes-in rate per broker has a curve;
3. Chromium (``make setup`` installs Debian's) screenshots
   ``/graph?g0.expr=<QUERY>&g0.tab=0&g0.range_input=3m``;
4. ``replog cluster down`` (also on failure or Ctrl-C), and the data dir is removed unless
   ``--keep``.

    python tools/prometheus_screenshot.py [--out docs/prometheus-graph.png] [--keep]

It takes about three minutes and little CPU (a few hundred 1 KiB records per second).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.prometheus import api_get  # noqa: E402

# Kafka's BytesInPerSec as Strimzi exports it: bytes appended by each leader, per second.
QUERY = "rate(kafka_server_brokertopicmetrics_bytesin_total[30s])"
TOPIC = "orders"
# (records/s, seconds) of 1 KiB records: ramps, a pause, a burst.
PHASES = [(150, 40), (400, 40), (0, 20), (700, 30), (250, 30)]
RECORD_SIZE = 1024


def replog(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "admin.cli", *args], cwd=REPO, check=check,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), **kw)


def start_cluster(data_dir: Path) -> tuple[subprocess.Popen, str, str]:
    """``replog cluster up --prometheus`` in the background; its (process, bootstrap servers,
    Prometheus URL), read from the lines it prints."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "admin.cli", "cluster", "up", "--data-dir", str(data_dir),
         "--brokers", "3", "--prometheus", "--prometheus-port", "0"],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    bootstrap = prom = None
    for line in proc.stdout:
        print(f"  cluster: {line.rstrip()}", flush=True)
        if m := re.match(r"Prometheus: (\S+)", line):
            prom = m.group(1)
        elif m := re.match(r"Bootstrap servers: (\S+)", line):
            bootstrap = m.group(1)
        elif line.startswith("Press Ctrl-C"):
            break
    if bootstrap is None or prom is None:
        proc.wait()
        raise SystemExit(f"replog cluster up exited with code {proc.returncode}")
    return proc, bootstrap, prom


def screenshot(url: str, out: Path, profile: Path) -> None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("chromium is missing: run 'apt-get install chromium' as root "
                         "(make setup does)")
    subprocess.run([exe, "--headless", "--disable-gpu", "--no-sandbox",
                    "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                    "--hide-scrollbars", f"--screenshot={out}", "--window-size=1400,900",
                    "--virtual-time-budget=10000", url],
                   check=True, capture_output=True, timeout=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "prometheus-graph.png")
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="the cluster's data dir (default: a new dir under /tmp)")
    ap.add_argument("--range", default="3m", help="the graph's range (default 3m: the run)")
    ap.add_argument("--keep", action="store_true", help="keep the data dir")
    args = ap.parse_args(argv)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="replog-promshot-", dir="/tmp"))
    proc = None
    try:
        proc, bootstrap, prom = start_cluster(data_dir)
        replog("topics", "create", "--bootstrap-server", bootstrap, "--topic", TOPIC,
               "--partitions", "3", "--replication-factor", "3")
        for rate, seconds in PHASES:
            print(f"producing {rate} records/s for {seconds} s", flush=True)
            if rate == 0:
                time.sleep(seconds)
                continue
            replog("produce", "--bootstrap-server", bootstrap, "--topic", TOPIC,
                   "--num-records", str(rate * seconds), "--record-size", str(RECORD_SIZE),
                   "--throughput", str(rate), "--producer-props", "acks=all",
                   stdout=subprocess.DEVNULL)
        time.sleep(5)  # the last phase's tail reaches the graph
        result = api_get(prom, "query", query=QUERY)["result"]
        if not result:
            raise SystemExit(f"{QUERY} returned no data from {prom}")
        params = {"g0.expr": QUERY, "g0.tab": "0", "g0.range_input": args.range,
                  "g0.stacked": "0"}
        url = f"{prom}/graph?{urllib.parse.urlencode(params)}"
        args.out.parent.mkdir(parents=True, exist_ok=True)
        screenshot(url, args.out, data_dir / "chromium-profile")
        print(f"wrote {args.out} from {url}")
        return 0
    finally:
        if proc is not None:
            replog("cluster", "down", "--data-dir", str(data_dir), check=False)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if not args.keep and args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

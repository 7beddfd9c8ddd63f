"""End to end: a real cluster, the exporter as its own process (the CLI), a SIGKILL of a leader,
then the analysis; the report's failover is checked against what a client saw, the page is
rendered by headless Chromium, and the same job on a real standalone Spark cluster (master and
worker started from the pyspark installation) must give the same tables as local mode."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from client import AdminClient, KafkaError, Producer
from harness.local_cluster import REPO_ROOT, LocalCluster, free_port
from tests.cluster.helpers import eventually

pytestmark = pytest.mark.integration

INTERVAL_MS = 250
TOPIC = "t"
PARTITIONS = 4
# The client's own delay between a new leader serving and its next success: one retry backoff
# (<= 50 ms below) plus a metadata refresh and a produce round trip on a loopback.
CLIENT_RETRY_SLACK_S = 0.25
# Scrapes every broker must have answered in the steady state before the fault (a second's
# worth at INTERVAL_MS): the exporter is its own process and starts sampling when it is ready -
# on a loaded machine, after a fault injected on a fixed delay.
STEADY_SCRAPES = 4


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return env


async def _probe(bootstrap: str, partition: int, successes: list[tuple[float, float]],
                 stop: asyncio.Event):
    """acks=1 records to one partition, back to back: each success's (send, acknowledged)
    wall-clock times."""
    async with Producer(bootstrap, acks=1, linger_ms=0, retry_backoff_ms=20,
                        retry_backoff_max_ms=50, request_timeout_ms=2000,
                        delivery_timeout_ms=60000) as p:
        while not stop.is_set():
            try:
                sent = time.time()
                await p.send_and_wait(TOPIC, b"v", partition=partition)
                successes.append((sent, time.time()))
            except KafkaError:
                pass
            await asyncio.sleep(0.01)


def _answered_since(export: Path, since: float) -> dict[str, int]:
    """How many scrapes of each process the exporter has recorded as answered since
    ``since``."""
    n: dict[str, int] = {}
    for f in (export / "scrapes").glob("*.jsonl"):
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue  # the line being written
            if r["ok"] and r["ts"] >= since:
                n[r["process"]] = n.get(r["process"], 0) + 1
    return n


async def _scenario(cluster: LocalCluster, export: Path) -> dict:
    bs = cluster.bootstrap_servers
    async with AdminClient(bs) as admin:
        await admin.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
    stop = asyncio.Event()
    ok: dict[int, list[tuple[float, float]]] = {p: [] for p in range(PARTITIONS)}
    probes = [asyncio.create_task(_probe(bs, p, ok[p], stop)) for p in range(PARTITIONS)]
    try:
        await eventually(lambda: all(ok.values()), what="a success on every partition")
        # Samples of the steady state before the fault, and the exporter must be watching the
        # victim answer for the report to see it stop (else it only has what came after).
        steady = time.time()
        brokers = [f"broker-{b}" for b in cluster.brokers]
        await eventually(lambda: all(_answered_since(export, steady).get(b, 0) >= STEADY_SCRAPES
                                     for b in brokers),
                         timeout=60, what=f"{STEADY_SCRAPES} answered scrapes of every broker")
        async with AdminClient(bs) as admin:
            parts = (await admin.describe_topics([TOPIC]))[TOPIC].partitions
        leaders = [p.leader for p in parts]
        victim = max(set(leaders), key=leaders.count)
        led = [p.partition for p in parts if p.leader == victim]
        kill_ts = time.time()
        await cluster.broker(victim).akill()
        # A send the victim answered just before it died can be acknowledged after kill_ts:
        # only sends made once the process is gone measure the failover.
        dead_ts = time.time()
        await eventually(lambda: all(ok[p] and ok[p][-1][0] >= dead_ts for p in led),
                         timeout=60, what="every partition of the killed leader served again")
        client = {f"{TOPIC}-{p}": min(done for sent, done in ok[p] if sent >= dead_ts) - kill_ts
                  for p in led}
    finally:
        stop.set()
        await asyncio.gather(*probes, return_exceptions=True)
    return {"victim": victim, "kill_ts": kill_ts, "client_failover": client}


@pytest.fixture(scope="module")
def failover_run(spark, zk_server, tmp_path_factory):
    """The scenario once for the module: export dir, local-mode output, what the client saw."""
    root = tmp_path_factory.mktemp("analytics-e2e")
    cluster = LocalCluster(root / "cluster", brokers=3, log_dirs_per_broker=1,
                           zookeeper=f"{zk_server.hosts}/replog-analytics-{uuid.uuid4().hex[:8]}",
                           overrides={"zookeeper.session.timeout.ms": 2000,
                                      "auto.leader.rebalance.enable": "false"})
    export = root / "export"
    exporter = None
    try:
        cluster.start()
        exporter = subprocess.Popen(
            [sys.executable, "-m", "admin.cli", "metrics", "export", "--cluster",
             str(cluster.data_dir), "--out", str(export), "--interval-ms", str(INTERVAL_MS)],
            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen = asyncio.run(_scenario(cluster, export))
    finally:
        if exporter is not None:
            exporter.send_signal(signal.SIGTERM)  # a last round drains the event logs
            out, _ = exporter.communicate(timeout=30)
            assert exporter.returncode == 0, out
        cluster.stop(graceful=False)
    from analytics.job import analyze
    result = analyze(spark, str(export), str(root / "local"))
    return {**seen, "export": export, "local": root / "local", "root": root,
            "result": result}


def _csv(path: Path) -> list[dict]:
    import csv
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_failover_in_report_matches_the_client(failover_run):
    rows = _csv(failover_run["local"] / "tables" / "failovers.csv")
    mine = {r["partition"]: r for r in rows if r["old_leader"] == str(failover_run["victim"])}
    client = failover_run["client_failover"]
    assert set(mine) == set(client)
    for tp, seen in client.items():
        r = mine[tp]
        assert r["cause"] == "broker_down"
        assert r["loss_source"] == "scrape"  # the exporter saw the kill, not only ZooKeeper
        reported = float(r["failover_s"])
        # The report cannot know the kill better than the sampling interval; the client's
        # first success comes at most one retry after the new leader serves.
        assert abs(reported - seen) <= INTERVAL_MS / 1000 + CLIENT_RETRY_SLACK_S, \
            f"{tp}: report {reported:.3f} s, client {seen:.3f} s"
    avail = {r["partition"]: r for r in _csv(failover_run["local"] / "tables" /
                                              "availability.csv")}
    assert set(avail) == {f"{TOPIC}-{p}" for p in range(PARTITIONS)}
    for tp in client:
        assert float(avail[tp]["total_leaderless_s"]) == float(mine[tp]["failover_s"])


# Injected into a copy of the page (the report itself has no scripts): every <img> must have
# loaded and decoded; the verdict goes into the title, which --dump-dom prints.
_CHECK = """<script>window.addEventListener('load', () => {
  const imgs = [...document.images];
  const good = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  document.title = 'IMAGES ' + good + '/' + imgs.length;
});</script>"""


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is missing: 'make test' installs Debian's chromium (as root)"
    return exe


def test_report_renders_in_headless_chromium(failover_run, tmp_path):
    page = (failover_run["local"] / "report.html").read_text(encoding="utf-8")
    assert "src=\"http" not in page and "<script" not in page  # self-contained
    checked = tmp_path / "checked.html"
    checked.write_text(page.replace("</body>", _CHECK + "</body>"), encoding="utf-8")
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
           "--dump-dom", checked.as_uri()]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    n = page.count("<img ")
    assert n == 6
    assert f"<title>IMAGES {n}/{n}</title>" in out.stdout, out.stderr[-2000:]
    # A screenshot beside the report, for people (not asserted).
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                    f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars",
                    f"--screenshot={failover_run['local'] / 'report.png'}",
                    "--window-size=1280,2400", (failover_run["local"] / "report.html").as_uri()],
                   capture_output=True, timeout=120, check=False)


def _spark_class() -> Path:
    import pyspark
    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_log(path: Path, text: str, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        assert proc.poll() is None, path.read_text(errors="replace")[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in {path} after {timeout}s:\n"
                         f"{path.read_text(errors='replace')[-3000:]}")


# A standalone master and worker take about 90 s to start and run the job: make soak runs it.
# make test keeps the same tables computed in local mode (test_failover_in_report_matches_the_client).
@pytest.mark.soak
def test_standalone_spark_cluster_gives_the_same_tables(failover_run):
    root = failover_run["root"]
    import pyspark
    env = {**_env(), "SPARK_HOME": str(Path(pyspark.__file__).parent),
           "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(root / "spark-work")}
    # The master and worker log at Spark's default INFO level: their readiness lines are read
    # below (analytics/spark.py quiets only the job's driver).
    env.pop("SPARK_CONF_DIR", None)
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        mlog = root / "spark-master.log"
        with mlog.open("w") as f:
            procs.append(subprocess.Popen(
                [str(_spark_class()), "org.apache.spark.deploy.master.Master", "--host",
                 "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())],
                env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True))
        _wait_log(mlog, "I have been elected leader", procs[0])
        wlog = root / "spark-worker.log"
        with wlog.open("w") as f:
            procs.append(subprocess.Popen(
                [str(_spark_class()), "org.apache.spark.deploy.worker.Worker", master_url,
                 "--host", "127.0.0.1", "--cores", "2", "--memory", "1g", "--webui-port",
                 str(free_port())],
                env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True))
        _wait_log(wlog, "Successfully registered with master", procs[1])
        out = root / "standalone"
        r = subprocess.run([sys.executable, "-m", "admin.cli", "analyze", "--input",
                            str(failover_run["export"]), "--output", str(out), "--master",
                            master_url], env=env, capture_output=True, text=True, timeout=600,
                           check=False)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "Report:" in r.stdout
    finally:
        for p in reversed(procs):
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    local = failover_run["local"] / "tables"
    names = sorted(p.name for p in local.glob("*.csv"))
    assert names == sorted(p.name for p in (out / "tables").glob("*.csv"))
    for name in names:
        assert (out / "tables" / name).read_text() == (local / name).read_text(), name
    assert (out / "tables" / "failovers.parquet" / "_SUCCESS").exists()

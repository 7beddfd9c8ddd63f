"""The controller as a real process (`replog controller --config FILE`): start-up, health,
graceful SIGTERM, a clear error when ZooKeeper is unreachable, and a paused (SIGSTOP) active
controller that wakes after its session expired and is fenced."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from common import zk_layout as L
from harness.ports import free_port
from tests.cluster.helpers import standby_of
from tests.controller.fakes import wait_for
from tests.controller.test_controller_zk import create, state
from tests.polling import wait_until

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
ACTIVE_COUNT = "kafka_controller_kafkacontroller_activecontrollercount"


def start_process(tmp_path: Path, zk_hosts: str, controller_id: int, **props) -> tuple:
    port = free_port()
    cfg = tmp_path / f"controller-{controller_id}.properties"
    events = tmp_path / f"controller-{controller_id}.events.jsonl"
    lines = {"controller.id": controller_id, "listeners": f"127.0.0.1:{port}",
             "zookeeper.connect": zk_hosts, "event.log.file": events, **props}
    cfg.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    proc = subprocess.Popen([sys.executable, "-m", "admin.cli", "controller", "--config",
                             str(cfg)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, f"127.0.0.1:{port}", events


async def health(address: str, service: str) -> int | None:
    try:
        async with grpc.aio.insecure_channel(address) as ch:
            r = await health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=2)
            return r.status
    except grpc.aio.AioRpcError:
        return None


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
    proc.wait(10)


async def test_process_serves_health_and_stops_cleanly_on_sigterm(tmp_path, zk_hosts, zk):
    metrics_port = free_port()
    proc, address, events = start_process(tmp_path, zk_hosts, 5, **{"metrics.port":
                                                                    metrics_port})
    try:
        await wait_for(lambda: health(address, "replog.v1.Controller")
                       , what="the controller to serve")
        assert await health(address, "") == health_pb2.HealthCheckResponse.SERVING
        await wait_for(lambda: zk.exists(L.CONTROLLER) is not None)
        assert json.loads(zk.get(L.CONTROLLER)[0])["port"] == int(address.rsplit(":", 1)[1])
        await wait_for(lambda: _is(health(address, "replog.v1.Controller"),
                                   health_pb2.HealthCheckResponse.SERVING))
        samples = await asyncio.get_running_loop().run_in_executor(None, scrape, metrics_port)
        assert samples[ACTIVE_COUNT] == 1
        assert samples["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0
        for name in ("kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
                     "kafka_controller_kafkacontroller_globalpartitioncount",
                     "kafka_controller_kafkacontroller_globaltopiccount",
                     "kafka_controller_controllerstats_uncleanleaderelections_total",
                     "kafka_controller_controllerstats_leaderelectionrateandtimems_bucket"):
            assert name in samples, name
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        out, err = proc.communicate()
        assert f"controller 5 listening on {address}" in out
        assert "Traceback" not in err
        assert zk.exists(L.CONTROLLER) is None  # resigned: a standby need not wait
        names = [json.loads(line)["event"] for line in events.read_text().splitlines()]
        assert "controller_elected" in names and "controller_resigned" in names
    finally:
        stop(proc)


def scrape(port: int) -> dict[str, float]:
    """The controller's /metrics as {sample name: value} (labels dropped), once it counts itself
    the active controller."""
    def active():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            text = resp.read().decode()
        samples = {s.name: s.value for f in text_string_to_metric_families(text)
                   for s in f.samples}
        return samples if samples.get(ACTIVE_COUNT) == 1 else None
    return wait_until(active, 10, "the metrics to count an active controller", ignore=(OSError,))


async def _is(aw, value) -> bool:
    return (await aw) == value


def test_unreachable_zookeeper_is_one_clear_line(tmp_path):
    proc, _, _ = start_process(tmp_path, f"127.0.0.1:{free_port()}", 1,
                               **{"zookeeper.connection.timeout.ms": 1000})
    try:
        assert proc.wait(30) == 1
        _, err = proc.communicate()
        assert "Traceback" not in err
        assert "replog controller: cannot start" in err
    finally:
        stop(proc)


def test_unknown_config_key_is_refused(tmp_path, zk_hosts):
    proc, _, _ = start_process(tmp_path, zk_hosts, 1, **{"no.such.key": 1})
    try:
        assert proc.wait(30) == 1
        _, err = proc.communicate()
        assert "no.such.key" in err and "Traceback" not in err
    finally:
        stop(proc)


async def test_paused_controller_wakes_up_fenced(tmp_path, zk_hosts, zk, controllers,
                                                 fake_brokers):
    """The active controller is SIGSTOPped past its session timeout; a standby takes over
    (epoch + 1) and changes the cluster; the old one, resumed, changes nothing: it sees its
    session expired and resigns, and a broker refuses its epoch."""
    (b1, b2) = await fake_brokers(1, 2)
    proc, address, _ = start_process(tmp_path, zk_hosts, 1,
                                     **{"zookeeper.session.timeout.ms": 1000})
    try:
        await wait_for(lambda: zk.exists(L.CONTROLLER) is not None
                       and json.loads(zk.get(L.CONTROLLER)[0])["brokerid"] == 1)
        await wait_for(lambda: b1.of("UpdateMetadata"), what="the first controller's metadata")
        standby = await controllers(2)
        await wait_for(lambda: standby.controller.active_controller is not None)

        os.kill(proc.pid, signal.SIGSTOP)
        await wait_for(lambda: standby.controller.is_active, timeout=20,
                       what="the standby to take over after the session expired")
        assert standby.controller.epoch == 2
        res = await create(standby, "t", assignments={0: [1, 2]})
        assert res.error_code == 0
        before = (state(zk, "t", 0), zk.get(L.CONTROLLER_EPOCH)[0])

        os.kill(proc.pid, signal.SIGCONT)
        # Woken, it must end up a standby that knows controller 2 is active.
        await wait_for(lambda: standby_of(address, 2), timeout=20,
                       what="the woken controller to step down", interval=0.05)
        assert (state(zk, "t", 0), zk.get(L.CONTROLLER_EPOCH)[0]) == before
        assert json.loads(zk.get(L.CONTROLLER)[0])["brokerid"] == 2
        # Brokers that heard epoch 2 never accepted anything from epoch 1 afterwards.
        for b in (b1, b2):
            epochs = [r.request.controller_epoch for r in b.received]
            first2 = epochs.index(2)
            assert all(e == 2 for e in epochs[first2:])
    finally:
        stop(proc)

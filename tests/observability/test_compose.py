"""docker-compose.yml built and run for real: the images from docker/ (base from Debian's
packages, docker/base-image.sh), ZooKeeper + two controller candidates + three brokers +
Prometheus up and healthy, records produced and consumed with `replog` on the host through the
published EXTERNAL listeners (KIP-103) and read back on the compose network through the
INTERNAL one, a broker killed with
`docker-compose kill` and its leaderships moved with every acked record still readable, and
Prometheus seeing every target. Torn down with `down -v`.

Skips, saying why in one line, only when Docker cannot run at all (no engine and not root to
start one, or dockerd refusing to start); `make setup` installs docker.io and docker-compose.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request

import pytest

from tests.observability.catalog import REPO
from tests.polling import wait_until

pytestmark = pytest.mark.integration

PROJECT = "replog-test"  # not the `replog` project a developer's `make compose-up` uses
PROMETHEUS = "http://127.0.0.1:19090"
# Each broker's EXTERNAL listener, published on the host and advertised as such.
EXTERNAL = {1: "127.0.0.1:19092", 2: "127.0.0.1:19093", 3: "127.0.0.1:19094"}


def run(*cmd: str, stdin: bytes | None = None, timeout: float = 900) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.setdefault("REPLOG_BASE_IMAGE", "replog-base:bookworm")
    # vfs copies a container's whole image (~1 GB) when creating it: five at once on a loaded
    # machine outlast docker-compose's default 60 s API read timeout.
    env.setdefault("COMPOSE_HTTP_TIMEOUT", "600")
    p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout, cwd=REPO,
                       env=env, check=False)
    assert p.returncode == 0, f"{' '.join(cmd)} failed:\n{p.stdout.decode()}\n{p.stderr.decode()}"
    return p.stdout.decode()


def compose(*args: str, stdin: bytes | None = None) -> str:
    return run("docker-compose", "-p", PROJECT, *args, stdin=stdin)


# A container or service still starting fails its check (a command's exit status, a refused
# connection): that counts as "not up yet".
wait_for = functools.partial(wait_until, interval=1, ignore=(AssertionError, OSError))


def docker_unusable() -> str | None:
    for tool in ("docker", "dockerd", "docker-compose"):
        if shutil.which(tool) is None:
            # make setup installs them; only a machine without root can lack them.
            return f"{tool} is not installed (make setup installs docker.io and docker-compose)"
    p = subprocess.run([str(REPO / "docker" / "start-dockerd.sh")], capture_output=True,
                       text=True, check=False)
    return (p.stderr.strip().splitlines() or ["no Docker engine"])[-1] if p.returncode else None


def replog(*args: str, stdin: bytes | None = None) -> str:
    """The CLI on the host, through the published EXTERNAL listeners (KIP-103)."""
    return run(sys.executable, "-m", "admin.cli", *args, stdin=stdin)


def leaders(topic: str) -> dict[int, int]:
    out = replog("topics", "describe", "--bootstrap-server", EXTERNAL[1], "--topic", topic)
    return {int(m[1]): int(m[2])
            for m in re.finditer(r"Partition: (\d+)\tLeader: (-?\d+)", out)}


# About 2.5 minutes of containers (images, three brokers, a kill, Prometheus): make soak runs it.
# make test keeps the compose file's fast checks (tests/test_compose_kafka_listener.py and the
# shipped-config tests), which read what this run starts.
@pytest.mark.soak
def test_compose_cluster_produce_consume_broker_kill_and_prometheus():
    reason = docker_unusable()
    if reason:
        pytest.skip(f"Docker cannot run here: {reason}")
    run(str(REPO / "docker" / "build-images.sh"), sys.executable)
    compose("down", "-v")  # leftovers of an interrupted run
    try:
        compose("up", "-d")
        ids = compose("ps", "-q").split()
        assert len(ids) == 9, ids  # 3 zookeeper members, 2 controllers, 3 brokers, prometheus

        def healthy():
            states = json.loads(run("docker", "inspect", *ids))
            bad = [s["Name"] for s in states
                   if s["State"].get("Health", {"Status": "healthy"})["Status"] != "healthy"]
            return not bad
        wait_for(healthy, 300, "every container healthy")

        topic = "compose-orders"
        # From the host: bootstrap from broker-1's published EXTERNAL port; Metadata there gives
        # every broker's and the controller's EXTERNAL address (127.0.0.1:1909N), not the
        # compose names the INTERNAL listener advertises.
        wait_for(lambda: replog("topics", "create", "--bootstrap-server", EXTERNAL[1],
                                "--topic", topic, "--partitions", "3",
                                "--replication-factor", "3",
                                "--config", "min.insync.replicas=2", "--if-not-exists") or True,
                 120, "topic created")
        wait_for(lambda: all(v > 0 for v in leaders(topic).values()), 60, "leaders elected")
        records = [f"record-{i}" for i in range(200)]
        replog("produce", "--bootstrap-server", EXTERNAL[1], "--topic", topic, "--acks", "all",
               stdin="\n".join(records).encode() + b"\n")

        def consume(bootstrap: str) -> list[str]:
            return replog("consume", "--bootstrap-server", bootstrap, "--topic", topic,
                          "--from-beginning", "--max-messages", str(len(records)),
                          "--timeout-ms", "60000").split()
        assert sorted(consume(EXTERNAL[2])) == sorted(records)
        # The same records through the INTERNAL listener, from inside the compose network.
        assert sorted(compose("exec", "-T", "broker-3", "replog", "consume",
                              "--bootstrap-server", "broker-1:9092", "--topic", topic,
                              "--from-beginning", "--max-messages", str(len(records)))
                      .split()) == sorted(records)

        def targets_up():
            with urllib.request.urlopen(f"{PROMETHEUS}/api/v1/targets", timeout=5) as r:
                active = json.loads(r.read())["data"]["activeTargets"]
            return len(active) == 5 and all(t["health"] == "up" for t in active)
        wait_for(targets_up, 120, "Prometheus sees all 5 targets up")

        # Kill a broker other than the bootstrap one (broker-1) that leads a partition.
        before = leaders(topic)
        victim = next(b for b in (2, 3) if b in before.values())
        compose("kill", f"broker-{victim}")
        wait_for(lambda: all(v not in (victim, -1) for v in leaders(topic).values()), 120,
                 f"leadership moved off broker {victim}")
        survivor = 3 if victim == 2 else 2
        assert sorted(consume(EXTERNAL[survivor])) == sorted(records)
    finally:
        compose("down", "-v")

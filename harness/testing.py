"""pytest plugin: real local clusters for integration and fault tests.

Fixtures:

- ``cluster_factory(brokers=3, controllers=1, log_dirs_per_broker=2, overrides=None,
  broker_overrides=None, controller_overrides=None, per_broker_overrides=None, start=True,
  **LocalCluster kwargs) -> LocalCluster`` — builds (and starts) a cluster in the test's
  tmp_path. Every cluster made is SIGKILLed at teardown (fast; tests that care about a clean
  shutdown call ``cluster.stop()`` themselves).
- ``cluster`` — one started cluster with the defaults (3 brokers, 2 log dirs each, 1 controller).

ZooKeeper: when the session's ``zk_server`` fixture exists (tests/conftest.py) each cluster gets
a fresh chroot on it, so no JVM is started per test; otherwise each cluster starts its own.
``cluster_factory(..., zookeeper_nodes=3)`` starts the cluster's own ensemble instead (the
shared server is not used), with ``cluster.kill_zookeeper(myid)`` / ``restart_zookeeper``.

When a test fails, the report gets a section with each process's last log lines and the paths
of the full logs and event files.

Use it from a conftest.py with ``pytest_plugins = ["harness.testing"]`` (root conftest only) or
``from harness.testing import *  # noqa: F403`` (any conftest).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator

import pytest

from harness.local_cluster import LocalCluster

__all__ = ["cluster", "cluster_factory", "pytest_runtest_makereport"]

_CLUSTERS_KEY = pytest.StashKey[list]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    clusters = item.stash.get(_CLUSTERS_KEY, None)
    if report.failed and clusters:
        parts = []
        for c in clusters:
            for h in [*c.controllers.values(), *c.brokers.values()]:
                parts.append(f"--- {h.name} ({h.log_file}; events {h.event_log_file}) ---\n"
                             f"{h.log_tail(20)}")
            if c.zookeeper_ensemble is not None:
                for m in c.zookeeper_ensemble.members.values():
                    parts.append(f"--- zookeeper-{m.myid} ({m.log_file}) ---\n"
                                 f"{m.log_tail(10)}")
        report.sections.append(("replog cluster logs", "\n".join(parts)))


def _zookeeper_for(request: pytest.FixtureRequest) -> str | None:
    try:
        server = request.getfixturevalue("zk_server")
    except pytest.FixtureLookupError:
        return None
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:50]
    return f"{server.hosts}/replog-cluster-{name}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def cluster_factory(tmp_path, request) -> Iterator[Callable[..., LocalCluster]]:
    made: list[LocalCluster] = []
    request.node.stash[_CLUSTERS_KEY] = made

    def make(brokers: int = 3, controllers: int = 1, log_dirs_per_broker: int = 2, *,
             start: bool = True, zookeeper: str | None = None, **kwargs) -> LocalCluster:
        if zookeeper is None and kwargs.get("zookeeper_nodes", 1) == 1:
            zookeeper = _zookeeper_for(request)
        c = LocalCluster(tmp_path / f"cluster-{len(made)}", brokers=brokers,
                         controllers=controllers, log_dirs_per_broker=log_dirs_per_broker,
                         zookeeper=zookeeper, **kwargs)
        made.append(c)
        if start:
            c.start()
        return c

    yield make
    for c in made:
        c.stop(graceful=False)


@pytest.fixture
def cluster(cluster_factory) -> LocalCluster:
    return cluster_factory()

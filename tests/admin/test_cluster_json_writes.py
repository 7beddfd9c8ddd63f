"""cluster.json is rewritten whenever a node starts, and tests start nodes in threads at once
(``asyncio.gather(a.astart(), b.astart())``): concurrent rewrites must neither fail nor leave a
torn file. Before the lock, two writers shared the .tmp file and the second os.replace found it
gone (FileNotFoundError in test_controller_killed_mid_recovery_next_one_finishes)."""

from __future__ import annotations

import json
import threading

from harness.local_cluster import LocalCluster


def test_concurrent_rewrites_of_cluster_json(tmp_path):
    c = LocalCluster(tmp_path / "cluster", brokers=3)
    c.data_dir.mkdir(parents=True, exist_ok=True)
    c._owns_dir = True  # as once the data dir's lock is held
    c._served = True  # and the cluster serves: cluster.json itself is written
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def writer() -> None:
        start.wait()
        try:
            for _ in range(200):
                c._write_cluster_json()
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    described = json.loads(c.cluster_json_path.read_text())
    assert [b["id"] for b in described["brokers"]] == [1, 2, 3]

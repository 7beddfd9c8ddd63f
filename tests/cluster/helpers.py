"""Helpers for fault tests against a LocalCluster: polling, topic state, on-disk logs."""

from __future__ import annotations

import asyncio
import glob
import os

from admin.client.admin_client import AdminClient
from common.records import iter_batches


async def eventually(check, timeout: float = 30.0, interval: float = 0.1, what: str = ""):
    """Await ``check()`` (sync or async) until it returns a truthy value; fail after timeout."""
    deadline = asyncio.get_running_loop().time() + timeout
    last = None
    while True:
        last = check()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not reached within {timeout}s: {what} (last: {last!r})")
        await asyncio.sleep(interval)


async def partition_state(bootstrap: str, topic: str, partition: int = 0):
    async with AdminClient(bootstrap, request_timeout_ms=5000) as admin:
        info = (await admin.describe_topics([topic]))[topic]
        return info.partition(partition)


def replica_batches(cluster, broker_id: int, topic: str, partition: int, below: int):
    """(base offset, last offset, bytes after the offset field) of every batch below offset
    ``below`` in a broker's replica, read from its segment files (whichever log dir holds it).
    The bytes exclude only the base offset, so they include the leader epoch and the CRC."""
    out = []
    for d in cluster.broker(broker_id).log_dirs:
        pdir = os.path.join(str(d), f"{topic}-{partition}")
        for seg in sorted(glob.glob(os.path.join(pdir, "*.log"))):
            with open(seg, "rb") as f:
                data = f.read()
            for b in iter_batches(data, validate=False, allow_partial_tail=True):
                if b.header.last_offset < below:
                    out.append((b.header.base_offset, b.header.last_offset,
                                bytes(b.data[8:])))
    return out


def scrape(url: str) -> dict[str, float]:
    """A process's /metrics as {'name{labels}': value}."""
    import urllib.request
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def partition_dir(cluster, broker_id: int, topic: str, partition: int) -> str:
    for d in cluster.broker(broker_id).log_dirs:
        path = os.path.join(str(d), f"{topic}-{partition}")
        if os.path.isdir(path):
            return path
    raise AssertionError(f"broker {broker_id} has no replica of {topic}-{partition}")

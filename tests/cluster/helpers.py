"""Helpers for fault tests against a LocalCluster: polling, topic state, on-disk logs."""

from __future__ import annotations

import functools
import glob
import os
import urllib.request

import grpc
from prometheus_client.parser import text_string_to_metric_families

from admin.client.admin_client import AdminClient
from common.records import iter_batches
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from tests.polling import async_wait_until

# Each poll of a real cluster is an RPC or a scrape: every 0.1 s is enough.
eventually = functools.partial(async_wait_until, interval=0.1)


async def partition_state(bootstrap: str, topic: str, partition: int = 0):
    async with AdminClient(bootstrap, request_timeout_ms=5000) as admin:
        info = (await admin.describe_topics([topic]))[topic]
        return info.partition(partition)


async def standby_of(address: str, controller_id: int) -> bool:
    """Whether the controller at ``address`` is a standby that knows ``controller_id`` is
    active: it refuses a request as NOT_CONTROLLER (41), naming that controller."""
    try:
        async with grpc.aio.insecure_channel(address) as ch:
            await replog_pb2_grpc.ControllerStub(ch).DescribeCluster(
                pb.DescribeClusterRequest(), timeout=2)
    except grpc.aio.AioRpcError as e:
        return ("replog-error-code", "41") in tuple(e.trailing_metadata() or ()) \
            and f"controller {controller_id} " in e.details()
    return False


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
    """A process's /metrics as {'name{label="value",...}': value}, labels in served order."""
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    return {s.name + _labels(s.labels): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""


def partition_dir(cluster, broker_id: int, topic: str, partition: int) -> str:
    for d in cluster.broker(broker_id).log_dirs:
        path = os.path.join(str(d), f"{topic}-{partition}")
        if os.path.isdir(path):
            return path
    raise AssertionError(f"broker {broker_id} has no replica of {topic}-{partition}")

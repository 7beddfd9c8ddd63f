"""Helpers for fault tests against a LocalCluster: polling, topic state, on-disk logs."""

from __future__ import annotations

import asyncio
import functools
import glob
import itertools
import os
import urllib.request

import grpc
from prometheus_client.parser import text_string_to_metric_families

from client.admin_client import AdminClient
from client.consumer import Consumer
from client.producer import Producer
from client.transport import default_channel_factory
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
    active: it refuses a request as NOT_CONTROLLER (41), naming that controller. The channel
    is the clients' (TLS with the admin certificate under REPLOG_CLUSTER_SECURITY)."""
    try:
        async with default_channel_factory()(address) as ch:
            await replog_pb2_grpc.ControllerStub(ch).DescribeCluster(
                pb.DescribeClusterRequest(), timeout=2)
    except grpc.aio.AioRpcError as e:
        return ("replog-error-code", "41") in tuple(e.trailing_metadata() or ()) \
            and f"controller {controller_id} " in e.details()
    return False


def replica_batches(cluster, broker_id: int, topic: str, partition: int, below: int,
                    skip_dirs=()):
    """(base offset, last offset, bytes after the offset field) of every batch below offset
    ``below`` in a broker's replica, read from its segment files (whichever log dir holds it,
    but none of ``skip_dirs``: an offline dir's stale copy). The bytes exclude only the base
    offset, so they include the leader epoch and the CRC."""
    out = []
    skip = {str(d) for d in skip_dirs}
    for d in cluster.broker(broker_id).log_dirs:
        if str(d) in skip:
            continue
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


class LoadProducer:
    """acks=all records with unique values, round-robin over a topic's partitions at a modest
    rate (~200 records/s), until stopped; the acknowledged ones by (partition, offset), and
    each acknowledgement's time. Records that fail (a bounce, leader moves) are only counted:
    they were never acked."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, **producer_config):
        self.bootstrap = bootstrap
        self.producer_config = producer_config  # Producer options over the defaults below
        self.topic = topic
        self.partitions = partitions
        self.acked: dict[tuple[int, int], bytes] = {}
        self.acked_at: list[float] = []
        self.failed = 0
        self.stop = asyncio.Event()

    def _done(self, p: int, value: bytes, f: asyncio.Future) -> None:
        if f.cancelled() or f.exception() is not None:
            self.failed += 1
        else:
            self.acked[(p, f.result().offset)] = value
            self.acked_at.append(asyncio.get_running_loop().time())

    def max_gap(self, since: float) -> float:
        """The longest time without an acknowledgement after loop time ``since``."""
        times = [since] + sorted(t for t in self.acked_at if t >= since)
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    async def run(self) -> None:
        pending = []
        config = {"acks": "all", "linger_ms": 5, "delivery_timeout_ms": 60000,
                  "request_timeout_ms": 5000, **self.producer_config}
        async with Producer(self.bootstrap, **config) as prod:
            i = 0
            while not self.stop.is_set():
                for _ in range(10):
                    p, value = i % self.partitions, f"r{i}".encode()
                    f = await prod.send(self.topic, value, partition=p)
                    f.add_done_callback(lambda f, p=p, v=value: self._done(p, v, f))
                    pending.append(f)
                    i += 1
                await asyncio.sleep(0.05)
            await asyncio.gather(*pending, return_exceptions=True)


async def consume_range(bootstrap: str, topic: str, ends: dict[int, int],
                        want: set[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    """Every partition of ``topic`` read from the start up to ``ends`` (partition -> offset),
    with one consumer, until every (partition, offset) in ``want`` is read (or 60 s pass)."""
    out: dict[tuple[int, int], bytes] = {}
    async with Consumer(bootstrap, auto_offset_reset="earliest") as cons:
        await cons.assign([(topic, p) for p in sorted(ends)])
        cons.seek_to_beginning()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not want <= out.keys() and loop.time() < deadline:
            for r in await cons.poll(500):
                if r.offset < ends[r.partition]:
                    out[(r.partition, r.offset)] = r.value
    return out


async def assert_acked_read_back(bootstrap: str, load: LoadProducer) -> dict[int, int]:
    """Every record ``load`` got acknowledged is read back at its offset; returns each
    partition's high watermark (the end offset consumers see)."""
    async with Consumer(bootstrap) as cons:
        hws = {tp.partition: o for tp, o in (await cons.end_offsets(
            [(load.topic, p) for p in range(load.partitions)])).items()}
    consumed = await consume_range(bootstrap, load.topic, hws, set(load.acked))
    missing = [(tp, v) for tp, v in load.acked.items() if consumed.get(tp) != v]
    assert not missing, f"{len(missing)} of {len(load.acked)} acked records not read back " \
                        f"at their offsets, e.g. {missing[:5]}"
    return hws

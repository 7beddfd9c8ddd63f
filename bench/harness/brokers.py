"""Talking to the brokers straight over grpc.aio, as the lean load generators and probers do:
a channel per broker, pre-serialized Produce, Metadata from one broker, and waits until every
running broker's metadata shows a topic in some state."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import grpc
import grpc.aio

from bench import log
from client import AdminClient
from common.errors import ErrorCode
from common.grpc_options import CLIENT_OPTIONS
from common.rpc import replog_pb2 as pb
from harness.local_cluster import LocalCluster

_PRODUCE = "/replog.v1.Broker/Produce"


class Brokers:
    """grpc.aio channels to the brokers by address, and Metadata straight from one broker."""

    def __init__(self) -> None:
        self.channels: dict[str, grpc.aio.Channel] = {}

    def channel(self, address: str) -> grpc.aio.Channel:
        ch = self.channels.get(address)
        if ch is None:
            ch = self.channels[address] = grpc.aio.insecure_channel(address,
                                                                     options=CLIENT_OPTIONS)
        return ch

    def produce(self, address: str):
        """Produce taking a pre-serialized request (bytes)."""
        return self.channel(address).unary_unary(
            _PRODUCE, request_serializer=None,
            response_deserializer=pb.ProduceResponse.FromString)

    async def metadata(self, address: str, topics: list[str], timeout: float = 10.0
                       ) -> pb.MetadataResponse:
        stub = self.channel(address).unary_unary(
            "/replog.v1.Broker/Metadata", request_serializer=pb.MetadataRequest.SerializeToString,
            response_deserializer=pb.MetadataResponse.FromString)
        return await stub(pb.MetadataRequest(topics=topics), timeout=timeout)

    async def close(self) -> None:
        chans, self.channels = list(self.channels.values()), {}
        for ch in chans:
            await ch.close()


async def topic_view(brokers: Brokers, c: LocalCluster, topic: str
                     ) -> dict[int, list[pb.MetadataPartition] | None]:
    """Each running broker's view of the topic's partitions (None: no answer / unknown)."""
    out: dict[int, list[pb.MetadataPartition] | None] = {}
    for b, h in c.brokers.items():
        if not h.is_running():
            continue
        try:
            md = await brokers.metadata(h.address, [topic], timeout=30.0)
        except grpc.aio.AioRpcError:
            out[b] = None
            continue
        t = next((t for t in md.topics if t.topic == topic and t.error_code == 0), None)
        out[b] = list(t.partitions) if t is not None else None
    return out


async def wait_partitions(brokers: Brokers, c: LocalCluster, topic: str, n: int, pred,
                          what: str, timeout: float, interval: float = 0.25) -> float:
    """Wait until every running broker's metadata has ``n`` partitions all satisfying
    ``pred``; returns the seconds waited. Raises TimeoutError with the count reached."""
    t0 = time.perf_counter()
    best = 0
    while True:
        views = await topic_view(brokers, c, topic)
        counts = [0 if ps is None else sum(1 for p in ps if pred(p)) for ps in views.values()]
        worst = min(counts) if counts else 0
        best = max(best, worst)
        if views and worst == n:
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"{topic}: {what}: only {worst}/{n} partitions after "
                               f"{timeout:.0f} s")
        await asyncio.sleep(interval)


def isr_full(p: pb.MetadataPartition) -> bool:
    return p.leader_id >= 0 and len(p.isr) == len(p.replicas)


def preferred_leads(p: pb.MetadataPartition) -> bool:
    return p.leader_id == p.replicas[0] and len(p.isr) == len(p.replicas)


async def restore(brokers: Brokers, admin: AdminClient, c: LocalCluster, topic: str, n: int,
                  timeout: float) -> dict:
    """After a broker came back: ISR full, then a preferred election, then preferred leaders
    everywhere. Returns the seconds each step took."""
    t_isr = await wait_partitions(brokers, c, topic, n, isr_full, "ISR full", timeout,
                                  interval=0.5 if n > 1000 else 0.25)
    t = time.perf_counter()
    res = await admin.elect_leaders("preferred", [(topic, p) for p in range(n)],
                                    timeout_ms=int(timeout * 1000))
    bad = Counter(e.name for e in res.values()
                  if e is not None and e.error_code != ErrorCode.ELECTION_NOT_NEEDED)
    if bad:
        log(f"[cluster] preferred election errors: {dict(bad)}")
    t_elect = time.perf_counter() - t
    t_lead = await wait_partitions(brokers, c, topic, n, preferred_leads, "preferred leaders",
                                   timeout, interval=0.5 if n > 1000 else 0.1)
    return {"isr_full_s": round(t_isr, 2), "preferred_election_s": round(t_elect, 2),
            "leaders_visible_s": round(t_lead, 2)}

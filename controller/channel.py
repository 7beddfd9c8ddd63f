"""ControllerChannelManager: the controller's connections to the brokers (Kafka's
ControllerChannelManager + RequestSendThread).

One grpc.aio channel and one sender task per live broker. Requests to a broker are sent one at
a time, in the order they were queued (LeaderAndIsr before the UpdateMetadata and StopReplica
of the same decision, and decisions in the order they were made), because a broker must see a
partition's states in the order the controller wrote them.

Retries: a transport failure (broker unreachable, deadline) is retried with backoff for as long
as the broker is live - the controller tolerates unreachable brokers and never blocks on them;
its event queue does not wait for deliveries. A broker that is removed (its registration
vanished or was replaced by a new epoch) has its queue dropped and its channel closed; the
controller sends the new incarnation what it needs on its startup.

Not retried: FAILED_PRECONDITION (the broker saw a newer controller epoch - code 11 - so this
controller is deposed; or the request names an old broker epoch - code 77 - and the new
registration will get fresh requests), INVALID_ARGUMENT and UNIMPLEMENTED. The exception: code
77 for a request carrying the broker's current registration epoch is retried (the broker has
not recorded its new epoch yet).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from common.errors import ErrorCode
from common.grpc_options import CONTROLLER_TO_BROKER_OPTIONS, ChannelFactory, insecure_channel
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.rpc_status import error_code_of
from common.zk_layout import BrokerRegistration
from controller.decisions.recovery import ReplicaLogInfo
from controller.request_batch import BrokerBatch
from controller.request_pb import request_pb


def _error_code(n: int) -> ErrorCode:
    try:
        return ErrorCode(n)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR

log = logging.getLogger(__name__)

_NOT_RETRIED = {grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT,
                grpc.StatusCode.UNIMPLEMENTED}

# on_answer(broker_id, broker_epoch, answers or None, error)
LogInfoCallback = Callable[[int, int, "dict[TopicPartition, ReplicaLogInfo] | None", str], None]

# on_response(broker_id, kind, request, response or None, error or None)
ResponseCallback = Callable[[int, str, Any, Any, "grpc.aio.AioRpcError | None"], None]


@dataclass(frozen=True)
class Delivery:
    broker_id: int
    kind: str
    done: asyncio.Future


@dataclass
class _Item:
    kind: str  # "LeaderAndIsr" | "UpdateMetadata" | "StopReplica"
    request: Any
    done: asyncio.Future


class _BrokerSender:
    def __init__(self, reg: BrokerRegistration, manager: ControllerChannelManager):
        self.reg = reg
        self.manager = manager
        self.channel = manager.channel_factory(manager.address_of(reg),
                                               CONTROLLER_TO_BROKER_OPTIONS)
        self.stub = replog_pb2_grpc.BrokerStub(self.channel)
        self.queue: asyncio.Queue[_Item] = asyncio.Queue()
        self.current: _Item | None = None
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-send-{reg.broker_id}")

    async def _run(self) -> None:
        m = self.manager
        while True:
            item = self.current = await self.queue.get()
            backoff = m.retry_backoff_s
            while True:
                try:
                    resp = await getattr(self.stub, item.kind)(item.request,
                                                               timeout=m.request_timeout_s)
                except asyncio.CancelledError:
                    raise
                except grpc.aio.AioRpcError as e:
                    if e.code() in _NOT_RETRIED and not self._not_yet_registered(item, e):
                        m.notify(self.reg.broker_id, item, None, e)
                        _settle(item.done, False)
                        break
                    m.failed_attempts += 1
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, m.max_retry_backoff_s)
                    continue
                except Exception as e:
                    log.exception("sending %s to broker %s failed", item.kind,
                                  self.reg.broker_id)
                    m.notify(self.reg.broker_id, item, None, e)
                    _settle(item.done, False)
                    break
                m.notify(self.reg.broker_id, item, resp, None)
                _settle(item.done, True)
                break

    def _not_yet_registered(self, item: _Item, e: grpc.aio.AioRpcError) -> bool:
        """STALE_BROKER_EPOCH for a request carrying the broker's *current* registration
        epoch: the broker re-registered and has not recorded its new epoch yet (the
        controller's watch fired before the broker's create returned). Retried with backoff
        - this sender lives only as long as that registration - where dropping it left the
        new incarnation without its LeaderAndIsr."""
        return (e.code() == grpc.StatusCode.FAILED_PRECONDITION
                and error_code_of(e) == ErrorCode.STALE_BROKER_EPOCH
                and getattr(item.request, "broker_epoch", -1) == self.reg.epoch)

    async def close(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001, S110 - cancelled on purpose
            pass
        if self.current is not None:
            _settle(self.current.done, False)
        while not self.queue.empty():
            _settle(self.queue.get_nowait().done, False)
        await self.channel.close()


def _settle(fut: asyncio.Future, value: bool) -> None:
    if not fut.done():
        fut.set_result(value)


class ControllerChannelManager:
    def __init__(self, on_response: ResponseCallback | None = None, *,
                 request_timeout_s: float = 30.0, retry_backoff_s: float = 0.1,
                 max_retry_backoff_s: float = 2.0, log_info_timeout_s: float = 5.0,
                 channel_factory: ChannelFactory = insecure_channel,
                 listener: str | None = None):
        self.on_response = on_response
        # KIP-291 control.plane.listener.name: the broker endpoint requests go to (None, or a
        # broker without it: the inter-broker one, the registration's host:port)
        self.listener = listener.upper() if listener else None
        self.channel_factory = channel_factory  # the transport to brokers (tests inject one)
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.max_retry_backoff_s = max_retry_backoff_s
        self.failed_attempts = 0
        self.log_info_timeout_s = log_info_timeout_s
        self._senders: dict[int, _BrokerSender] = {}
        self._closing: set[asyncio.Task] = set()
        self._queries: set[asyncio.Task] = set()

    @property
    def brokers(self) -> set[int]:
        return set(self._senders)

    def address_of(self, reg: BrokerRegistration) -> str:
        if self.listener is not None:
            for e in reg.listener_endpoints:
                if e.listener == self.listener:
                    return e.address
        return reg.address

    def update_brokers(self, live: dict[int, BrokerRegistration]) -> None:
        """Match the senders to the live brokers: add new ones, drop vanished ones, and
        replace a broker's sender when its registration (epoch or address) changed."""
        for broker_id in list(self._senders):
            s = self._senders[broker_id]
            reg = live.get(broker_id)
            if reg is None or reg.epoch != s.reg.epoch or \
                    self.address_of(reg) != self.address_of(s.reg):
                self._drop(broker_id)
        for broker_id, reg in live.items():
            if broker_id not in self._senders:
                self._senders[broker_id] = _BrokerSender(reg, self)

    def _drop(self, broker_id: int) -> None:
        s = self._senders.pop(broker_id)
        t = asyncio.get_running_loop().create_task(s.close())
        self._closing.add(t)
        t.add_done_callback(self._closing.discard)

    def send(self, batches: dict[int, BrokerBatch]) -> list[Delivery]:
        """Queue each broker's requests (LeaderAndIsr, UpdateMetadata, StopReplica order).
        Returns one Delivery per request; its future is True once delivered, False if the
        request was dropped (broker gone) or refused."""
        loop = asyncio.get_running_loop()
        out = []
        memo: dict[int, object] = {}  # a partition state shared by several brokers: built once
        for broker_id, bb in batches.items():
            s = self._senders.get(broker_id)
            for kind, reqs in (("LeaderAndIsr", bb.leader_and_isr),
                               ("UpdateMetadata", bb.update_metadata),
                               ("StopReplica", bb.stop_replica)):
                for req in reqs:
                    fut = loop.create_future()
                    out.append(Delivery(broker_id, kind, fut))
                    if s is None or s.reg.epoch != bb.broker_epoch:
                        fut.set_result(False)
                    else:
                        s.queue.put_nowait(_Item(kind, request_pb(req, memo), fut))
        return out

    def get_replica_log_info(self, broker_id: int, broker_epoch: int,
                             partitions: Sequence[tuple[TopicPartition, str]],
                             on_answer: LogInfoCallback) -> None:
        """KIP-966's BrokerRequestSender: one GetReplicaLogInfo to this broker incarnation,
        sent at once on its channel - not behind the ordered LeaderAndIsr/UpdateMetadata queue,
        which may be retrying - with its own deadline (`log_info_timeout_s`), never retried
        here (the Unclean Recovery Manager asks again). `on_answer(broker, epoch, answers,
        error)`: answers per partition, or None with the reason."""
        s = self._senders.get(broker_id)
        loop = asyncio.get_running_loop()
        if s is None or s.reg.epoch != broker_epoch:
            loop.call_soon(on_answer, broker_id, broker_epoch, None,
                           f"broker {broker_id} epoch {broker_epoch} is not registered")
            return
        by_topic: dict[tuple[str, str], list[int]] = {}
        for tp, topic_id in partitions:
            by_topic.setdefault((tp.topic, topic_id), []).append(tp.partition)
        request = pb.GetReplicaLogInfoRequest(
            broker_id=broker_id, broker_epoch=broker_epoch,
            topic_partitions=[pb.GetReplicaLogInfoTopic(topic=t, topic_id=tid, partitions=ps)
                              for (t, tid), ps in by_topic.items()])
        task = loop.create_task(self._log_info(s.stub, request, on_answer),
                                name=f"replica-log-info-{broker_id}")
        self._queries.add(task)
        task.add_done_callback(self._queries.discard)

    async def _log_info(self, stub, request, on_answer: LogInfoCallback) -> None:
        try:
            resp = await stub.GetReplicaLogInfo(request, timeout=self.log_info_timeout_s)
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError as e:
            on_answer(request.broker_id, request.broker_epoch, None,
                      f"{e.code().name}: {e.details()}")
            return
        except Exception as e:  # reported as a failed query: the manager asks again
            log.exception("GetReplicaLogInfo to broker %s failed", request.broker_id)
            on_answer(request.broker_id, request.broker_epoch, None, repr(e))
            return
        answers = {}
        for t in resp.topic_partition_log_info:
            for p in t.partition_log_info:
                answers[TopicPartition(t.topic, p.partition)] = ReplicaLogInfo(
                    p.last_written_leader_epoch, p.log_end_offset,
                    _error_code(p.error_code))
        on_answer(request.broker_id, resp.broker_epoch, answers, "")

    def notify(self, broker_id: int, item: _Item, response, error) -> None:
        if self.on_response is not None:
            try:
                self.on_response(broker_id, item.kind, item.request, response, error)
            except Exception:
                log.exception("response callback failed")

    def pending(self) -> int:
        return sum(s.queue.qsize() for s in self._senders.values())

    async def close(self) -> None:
        for t in list(self._queries):
            t.cancel()
        for broker_id in list(self._senders):
            self._drop(broker_id)
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)

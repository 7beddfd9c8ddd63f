"""Events of the controller's single event queue (Kafka's ControllerEvent types).

ZooKeeper watches, the ZooKeeper connection listener, broker responses, timers and gRPC
requests only *post* events; one task processes them one at a time (controller.py), so no two
decisions ever interleave. Events that answer an RPC carry a future the servicer awaits.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from common.errors import ErrorCode
from common.names import TopicPartition


@dataclass
class Event:
    enqueued: float = field(default_factory=time.monotonic, init=False)
    future: asyncio.Future | None = field(default=None, init=False)

    @property
    def name(self) -> str:
        return type(self).__name__

    def resolve(self, value: Any) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_result(value)

    def fail(self, error: BaseException) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_exception(error)


# ---- election and ZooKeeper session ------------------------------------------------------

@dataclass
class Elect(Event):
    """Start-up, reconnection, or /controller vanished: try to become the controller."""


@dataclass
class ControllerChange(Event):
    """/controller was created, changed or deleted."""


# ---- cluster changes (watches) ----------------------------------------------------------

@dataclass
class BrokerChange(Event):
    """/brokers/ids children changed: registrations appeared or vanished."""


@dataclass
class BrokerModification(Event):
    broker_id: int = -1


@dataclass
class TopicChange(Event):
    """/brokers/topics children changed (a topic created outside CreateTopics)."""


@dataclass
class TopicDeletionChange(Event):
    """/admin/delete_topics children changed."""


@dataclass
class TopicConfigChange(Event):
    topic: str = ""


@dataclass
class StopReplicaResponse(Event):
    generation: int = 0
    broker_id: int = -1
    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass
class AutoRebalance(Event):
    """Timer: leader.imbalance.check.interval.seconds."""


# ---- RPCs --------------------------------------------------------------------------------

@dataclass
class CreateTopics(Event):
    request: Any = None


@dataclass
class DeleteTopics(Event):
    request: Any = None


@dataclass
class AlterPartition(Event):
    request: Any = None


@dataclass
class ControlledShutdown(Event):
    broker_id: int = -1
    broker_epoch: int = -1


@dataclass
class ElectLeaders(Event):
    request: Any = None

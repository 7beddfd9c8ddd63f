"""Topics created on a Metadata request: Kafka's auto.create.topics.enable (default true) and
its AutoTopicCreationManager in ZooKeeper mode, behind both front-ends (the Kafka listener and
the gRPC Metadata).

Rules, as KafkaApis.handleTopicMetadataRequest and AutoTopicCreationManager:
- only named topics (never "all topics"), only when the request allows it
  (``allow_auto_topic_creation``, Metadata v4+; true before) and the broker's
  ``auto.create.topics.enable`` is true;
- the requester needs Create on the cluster, or else on the topic: without it the topic is
  TOPIC_AUTHORIZATION_FAILED (checked by the caller, which holds the authorizer);
- Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``,
  ``__share_group_state``) are not created here: their coordinators create them, and replog
  has none yet, so they stay UNKNOWN_TOPIC_OR_PARTITION. Any other name Kafka accepts, ``__``
  prefix included, is created as Kafka would;
- the topic gets this broker's ``num.partitions`` and ``default.replication.factor``, through
  the active controller's CreateTopics (which refuses a replication factor above the live
  brokers with INVALID_REPLICATION_FACTOR, answered as is, as Kafka's ZooKeeper mode does);
- a creation that was accepted, or found the topic already there, is LEADER_NOT_AVAILABLE
  until the brokers learn its leaders, so the client asks again; a creation still in flight
  for the same name, or a controller that cannot be reached, is UNKNOWN_TOPIC_OR_PARTITION
  (also retried by every client).
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from broker.controller_client import ControllerClient, ControllerUnavailable
from common.errors import ErrorCode
from common.rpc import replog_pb2 as pb

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_CALL_TIMEOUT_S = 10.0
# What the client is told once the controller answered (Kafka's createTopicsInZk)
_SETTLED = {ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.REQUEST_TIMED_OUT}


def wants_creation(config, allow_auto_topic_creation: bool, all_topics: bool) -> bool:
    """Whether this Metadata request creates the unknown topics it names."""
    return bool(allow_auto_topic_creation and not all_topics
                and config["auto.create.topics.enable"])


def metadata_error(code: int) -> ErrorCode:
    """The Metadata error of a topic whose creation the controller answered with ``code``."""
    code = ErrorCode(code)
    return ErrorCode.LEADER_NOT_AVAILABLE if code in _SETTLED else code


class AutoTopicCreation:
    """One per broker: forwards the creations, at most one in flight per topic name."""

    def __init__(self, controller: ControllerClient | None, config):
        self.controller = controller
        self.config = config
        self._inflight: set[str] = set()

    async def metadata_errors(self, names: list[str], cluster_allows: bool,
                              denied: Callable[[list[str]], frozenset[str]]
                              ) -> dict[str, ErrorCode]:
        """Each unknown topic of a Metadata request that creates them -> its entry's error:
        Create on the cluster (``cluster_allows``), or else on the topic (``denied`` names
        those refused), TOPIC_AUTHORIZATION_FAILED without (KafkaApis)."""
        refused = frozenset() if cluster_allows else denied(names)
        errors = await self.create([n for n in names if n not in refused])
        return {n: ErrorCode.TOPIC_AUTHORIZATION_FAILED if n in refused else errors[n]
                for n in names}

    async def create(self, names: list[str]) -> dict[str, ErrorCode]:
        """Each unknown, valid, authorized name -> the error its Metadata entry carries."""
        out = {n: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for n in names}
        todo = [n for n in dict.fromkeys(names)
                if n not in INTERNAL_TOPICS and n not in self._inflight]
        if not todo or self.controller is None:
            return out
        self._inflight.update(todo)
        try:
            resp = await self.controller.stub().CreateTopics(pb.CreateTopicsRequest(
                topics=[pb.CreatableTopic(
                    name=n, num_partitions=self.config["num.partitions"],
                    replication_factor=self.config["default.replication.factor"])
                    for n in todo],
                timeout_ms=0), timeout=_CALL_TIMEOUT_S)
        except (ControllerUnavailable, grpc.aio.AioRpcError):
            return out  # the client's next Metadata tries again
        finally:
            self._inflight.difference_update(todo)
        for r in resp.topics:
            if r.name in out:
                out[r.name] = metadata_error(r.error_code)
        return out

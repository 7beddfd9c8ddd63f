"""`__consumer_offsets` is created on the first FindCoordinator for a group, as Kafka's
KafkaApis.getOrCreateInternalTopic (ZooKeeper mode) does: through the active controller's
CreateTopics, with

- `offsets.topic.num.partitions` partitions (50);
- `offsets.topic.replication.factor` replicas (3), capped at the live brokers when it is
  created (the issue's rule, and Kafka's before KIP-115 made it wait for enough brokers), so a
  one- or two-broker cluster gets a coordinator too;
- `cleanup.policy=compact` (the last commit per key is what a load needs), `compression.type=
  producer`, and `segment.bytes` from `offsets.topic.segment.bytes` (small segments: the cleaner
  and the loads go faster), as GroupMetadataManager.offsetsTopicConfigs.

Until the topic exists and its partition has a live leader, FindCoordinator answers
COORDINATOR_NOT_AVAILABLE, which every client retries. At most one creation is in flight.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.group.coordinator import OFFSETS_TOPIC

_CALL_TIMEOUT_S = 10.0
log = logging.getLogger(__name__)


def offsets_topic_configs(config: Any) -> dict[str, str]:
    """GroupMetadataManager.offsetsTopicConfigs."""
    return {"cleanup.policy": "compact", "compression.type": "producer",
            "segment.bytes": str(config["offsets.topic.segment.bytes"])}


def replication_factor(config: Any, live_brokers: int) -> int:
    return max(1, min(int(config["offsets.topic.replication.factor"]), live_brokers))


class OffsetsTopicCreation:
    """One per broker: asks the controller for __consumer_offsets, once at a time."""

    def __init__(self, controller: Any, config: Any, events: Any = None):
        self.controller = controller
        self.config = config
        self.events = events
        self._inflight = False

    async def ensure(self, live_brokers: int) -> None:
        """Ask for the topic (its FindCoordinator answers COORDINATOR_NOT_AVAILABLE meanwhile);
        an error is logged and the next FindCoordinator asks again."""
        if self._inflight or self.controller is None:
            return
        # imported here: grpc and the stubs are the broker's, not the pure core's
        import grpc

        from broker.controller_client import ControllerUnavailable
        from common.rpc import replog_pb2 as pb
        self._inflight = True
        rf = replication_factor(self.config, live_brokers)
        try:
            resp = await self.controller.stub().CreateTopics(pb.CreateTopicsRequest(
                topics=[pb.CreatableTopic(
                    name=OFFSETS_TOPIC, num_partitions=self.config["offsets.topic.num.partitions"],
                    replication_factor=rf, configs=offsets_topic_configs(self.config))],
                timeout_ms=0), timeout=_CALL_TIMEOUT_S)
        except (ControllerUnavailable, grpc.aio.AioRpcError) as e:
            self._log("offsets_topic_creation_failed", error=str(e)[:300])
            return
        finally:
            self._inflight = False
        for r in resp.topics:
            self._log("offsets_topic_created" if r.error_code == 0
                      else "offsets_topic_creation_answered", error_code=r.error_code,
                      replication_factor=rf,
                      partitions=self.config["offsets.topic.num.partitions"])

    def _log(self, name: str, **fields: Any) -> None:
        if self.events is not None:
            self.events.info(name, **fields)

"""KIP-73's throttles as Kafka's tool sets them, through IncrementalAlterConfigs: broker
``*.replication.throttled.rate`` and topic ``*.replication.throttled.replicas``; put back as they
were when the controller refuses the reassignment, cleared by ``--verify`` once it completes.
The steps are the client's (client/reassignment.py, which the lab uses too); this module adds
Kafka's lines on stdout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from client import AdminClient
from client import reassignment as lib
from client.admin_client import AlterConfigOp
from client.reassignment import BROKER_LEVEL_THROTTLES as BROKER_LEVEL_THROTTLES
from client.reassignment import FOLLOWER_THROTTLE_RATE as FOLLOWER_THROTTLE_RATE
from client.reassignment import FOLLOWER_THROTTLED_REPLICAS as FOLLOWER_THROTTLED_REPLICAS
from client.reassignment import LEADER_THROTTLE_RATE as LEADER_THROTTLE_RATE
from client.reassignment import LEADER_THROTTLED_REPLICAS as LEADER_THROTTLED_REPLICAS
from client.reassignment import LOG_DIR_THROTTLE_RATE as LOG_DIR_THROTTLE_RATE
from client.reassignment import TOPIC_LEVEL_THROTTLES as TOPIC_LEVEL_THROTTLES
from client.reassignment import PartitionMove
from client.reassignment import merge_throttled as merge_throttled
from client.reassignment import throttled_replicas as throttled_replicas

TP = tuple[str, int]
alter = lib.alter_configs


async def set_throttles(admin: AdminClient, moves: Mapping[TP, PartitionMove],
                        inter_broker: int | None, log_dir: int | None
                        ) -> dict[tuple[str, str], list[AlterConfigOp]]:
    """Kafka's modifyReassignmentThrottle / modifyLogDirThrottle, printing Kafka's lines."""
    return await lib.set_throttles(admin, moves, inter_broker, log_dir, log=print)


async def clear_all_throttles(admin: AdminClient, targets: Mapping[TP, Sequence[int]]) -> None:
    """Kafka's clearAllThrottles, printing Kafka's lines."""
    await lib.clear_all_throttles(admin, targets, log=print)

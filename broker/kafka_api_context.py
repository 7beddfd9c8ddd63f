"""What the Kafka API modules use of the listener that serves them.

``kafka_admin``, ``kafka_acl_apis``, ``kafka_config_apis``, ``kafka_create_partitions`` and
``kafka_unserved`` each give the Kafka listener (broker/kafka_listener.py) the handlers of a
family of APIs; the listener imports them to register those handlers, so they take this
protocol - the replica manager, the controller and config clients, and the broker/apis/
context of the request being served (where every check is made) - instead of importing the
listener back.
``KafkaListener`` implements it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from broker.apis.context import ApiContext
    from broker.config_manager import ConfigManager
    from broker.controller_client import ControllerClient
    from broker.replica_manager import ReplicaManager
    from common.security.authorizer import Requester


class KafkaApiContext(Protocol):
    rm: ReplicaManager
    broker_id: int
    listener: str  # the listener's name (KIP-103): Metadata answers give endpoints of this name
    controller: ControllerClient | None  # admin APIs are forwarded to the active controller
    configs: ConfigManager | None  # DescribeConfigs / IncrementalAlterConfigs
    authorizer: Any  # common.security.authorizer's (ALLOW_ALL without one)

    def api_context(self) -> ApiContext:
        """broker/apis/'s context of the request being served."""

    def requester(self) -> Requester:
        """Who sent the request being served: its connection's principal and address."""

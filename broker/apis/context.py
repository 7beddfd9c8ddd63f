"""What every API of the layer is called with: the broker's parts and who is asking.

A front-end builds one ``ApiContext`` per request (or per stream: one connection, one
principal). ``requester`` is None when the broker runs without an authorizer: nothing asks,
and the data path does not pay for building a principal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from common.security.acl import CLUSTER_RESOURCE, AclOperation, ResourcePattern
from common.security.acl import topic as topic_resource
from common.security.authorizer import ALLOW_ALL

if TYPE_CHECKING:
    from broker.auto_topic_creation import AutoTopicCreation
    from broker.config_manager import ConfigManager
    from broker.replica_manager import ReplicaManager
    from common.security.authorizer import Requester


@dataclass
class ApiContext:
    rm: ReplicaManager
    broker_id: int
    listener: str  # the listener the request came in on (KIP-103: its endpoints are answered)
    requester: Requester | None = None
    authorizer: Any = ALLOW_ALL  # common.security.authorizer's; ALLOW_ALL without one
    auto_topics: AutoTopicCreation | None = None  # auto.create.topics.enable's creations
    configs: ConfigManager | None = None  # dynamic configs (None: no ZooKeeper)

    @property
    def principal(self) -> str:
        return str(self.requester.principal) if self.requester is not None else "ANONYMOUS"

    def authorized(self, operation: AclOperation, resource: ResourcePattern) -> bool:
        return self.authorizer.authorize(self.requester, operation, resource)

    def authorized_on_cluster(self, operation: AclOperation) -> bool:
        return self.authorized(operation, CLUSTER_RESOURCE)

    def authorized_operations(self, resource: ResourcePattern) -> int:
        """KIP-430's bit field for ``resource``: every supported operation without an
        authorizer, the requester's allowed ones with one."""
        return self.authorizer.authorized_operations(self.requester, resource)

    def denied_topics(self, operation: AclOperation, names: Iterable[str | None]
                      ) -> frozenset[str]:
        """The names the requester may not ``operation`` (none without an authorizer, and
        none for a super user, without asking per topic); an empty or null name is no
        resource and is denied."""
        if self.authorizer.allows_everything(self.requester):
            return frozenset()
        return frozenset(n or "" for n in set(names) if not n or not self.authorizer.authorize(
            self.requester, operation, topic_resource(n)))

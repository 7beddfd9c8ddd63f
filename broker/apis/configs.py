"""DescribeConfigs, IncrementalAlterConfigs and the legacy AlterConfigs, once for both
front-ends: KafkaApis' authorization around broker/config_requests.py (Kafka's ConfigHelper and
ZkAdminManager rules, one resource at a time, over the config manager).

DescribeConfigs needs DescribeConfigs and the alters AlterConfigs, on the topic
(TOPIC_AUTHORIZATION_FAILED) or, for a broker resource, on the cluster
(CLUSTER_AUTHORIZATION_FAILED); a refused resource is answered so and left as it was.
``unknown_type_fails_all`` is Kafka's ConfigHelper: a DescribeConfigs naming a resource type
Kafka does not know fails every resource of the request with INVALID_REQUEST (the gRPC API
answers that resource alone, as config_requests does).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker import config_requests
from broker.apis.context import ApiContext
from broker.config_requests import AlterResource, Outcome, ResourceType
from common.errors import ErrorCode
from common.security.acl import CLUSTER_RESOURCE, AclOperation
from common.security.acl import topic as topic_resource
from common.security.authorizer import ALLOW_ALL


@dataclass
class DescribeResource:
    resource_type: int
    name: str
    keys: list[str] | None = None  # None: every key


def _refusal(ctx: ApiContext, operation: AclOperation, resource_type: int,
            name: str) -> Outcome | None:
    """The refusal of a resource the requester may not ``operation``, or None."""
    if ctx.authorizer is ALLOW_ALL:
        return None
    if resource_type == ResourceType.TOPIC:
        if not name:
            return config_requests.failed(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                          "a topic name is required")
        resource, code = topic_resource(name), ErrorCode.TOPIC_AUTHORIZATION_FAILED
    else:
        resource, code = CLUSTER_RESOURCE, ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if ctx.authorized(operation, resource):
        return None
    return config_requests.failed(code, f"{ctx.principal} is not authorized to "
                                        f"{operation.value} {name!r}")


async def describe_configs(ctx: ApiContext, resources: list[DescribeResource],
                           unknown_type_fails_all: bool = False) -> list[Outcome]:
    """One outcome per resource, in order (its entries carry their synonyms)."""
    if unknown_type_fails_all:
        unknown = next((r for r in resources
                        if r.resource_type not in ResourceType._value2member_map_
                        or r.resource_type == ResourceType.UNKNOWN), None)
        if unknown is not None:
            o = config_requests.failed(ErrorCode.INVALID_REQUEST,
                                       f"Unexpected resource type {unknown.resource_type} for "
                                       f"resource {unknown.name}")
            return [o for _ in resources]
    out = []
    for r in resources:
        refused = _refusal(ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.name)
        out.append(refused or await config_requests.describe(ctx.configs, r.resource_type,
                                                             r.name, r.keys))
    return out


async def alter_configs(ctx: ApiContext, resources: list[AlterResource], validate_only: bool,
                        replace: bool = False) -> list[Outcome]:
    """IncrementalAlterConfigs, or with ``replace`` the legacy AlterConfigs (Kafka's
    ZkAdminManager.alterConfigs: each resource's dynamic configs become exactly those given,
    every other override removed). One outcome per resource, in order."""
    refusals = [_refusal(ctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.name)
                for r in resources]
    allowed = [r for r, refused in zip(resources, refusals) if refused is None]
    altered = iter(await config_requests.alter(ctx.configs, allowed, validate_only,
                                               replace=replace) if allowed else ())
    return [refused or next(altered) for refused in refusals]

"""DescribeAcls, CreateAcls and DeleteAcls, once for both front-ends: answered by the
authorizer (common/security/authorizer.py), as Kafka's KafkaApis/AclApis.

Without an authorizer every one is SECURITY_DISABLED; reading ACLs needs Describe on the
cluster, changing them Alter (CLUSTER_AUTHORIZATION_FAILED). A refused request, or a store that
failed (ZooKeeper unreachable: UNKNOWN_SERVER_ERROR), is the answer's ``error``: gRPC makes it
the call's status, Kafka puts it on every item. An item that could not be read is an AclError
(INVALID_REQUEST), parsed by the front-end from its wire form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.apis.context import ApiContext
from common.errors import ErrorCode
from common.security.acl import AclBinding, AclBindingFilter, AclError, AclOperation
from common.security.authorizer import ALLOW_ALL


@dataclass
class AclsAnswer:
    error: ErrorCode = ErrorCode.NONE  # the whole request's
    message: str | None = None
    # per item: CreateAcls None or an AclError; DeleteAcls the bindings deleted or an
    # AclError; DescribeAcls the bindings matched
    results: list[Any] = field(default_factory=list)


def _refusal(ctx: ApiContext, operation: AclOperation) -> AclsAnswer | None:
    if ctx.authorizer is ALLOW_ALL:
        return AclsAnswer(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    if not ctx.authorized_on_cluster(operation):
        return AclsAnswer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                          f"{ctx.principal} is not authorized to {operation.value} on the "
                          f"cluster")
    return None


def describe_acls(ctx: ApiContext, f: AclBindingFilter | AclError) -> AclsAnswer:
    refused = _refusal(ctx, AclOperation.DESCRIBE)
    if refused is not None:
        return refused
    if isinstance(f, AclError):
        return AclsAnswer(ErrorCode.INVALID_REQUEST, str(f))
    return AclsAnswer(results=list(ctx.authorizer.describe_acls(f)))


async def _run(ctx: ApiContext, operation: AclOperation, run) -> AclsAnswer:
    refused = _refusal(ctx, operation)
    if refused is not None:
        return refused
    try:
        return AclsAnswer(results=list(await run()))
    except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable etc.: one line
        return AclsAnswer(ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")


async def create_acls(ctx: ApiContext, creations: list[AclBinding | AclError]) -> AclsAnswer:
    return await _run(ctx, AclOperation.ALTER, lambda: ctx.authorizer.create_acls(creations))


async def delete_acls(ctx: ApiContext, filters: list[AclBindingFilter | AclError]
                      ) -> AclsAnswer:
    return await _run(ctx, AclOperation.ALTER, lambda: ctx.authorizer.delete_acls(filters))

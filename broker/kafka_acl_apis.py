"""Kafka's ACL APIs on the Kafka listener: DescribeAcls, CreateAcls, DeleteAcls, answered by this
broker's authorizer as a ZooKeeper-era broker answers them (KafkaApis.handleDescribeAcls etc.;
the authorizer writes /kafka-acl and announces the change). Translation only: the checks are
broker/apis/acls.py's (shared with the gRPC servicer), the decisions AclAuthorizer's
(common/security/authorizer.py).

- no authorizer configured: SECURITY_DISABLED ("No Authorizer is configured on the broker") for
  the request, every creation or every filter;
- DescribeAcls needs Describe on the cluster, CreateAcls and DeleteAcls Alter:
  CLUSTER_AUTHORIZATION_FAILED otherwise, in the same places;
- a creation or filter that names an unknown code, or that Kafka would not store, is
  INVALID_REQUEST for itself alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker.apis import acls as apis_acls
from broker.kafka_api_context import KafkaApiContext
from common.errors import ErrorCode
from common.kafka_protocol.api import ApiKey
from common.security.acl import (
    OPERATION_CODES,
    PATTERN_TYPE_CODES,
    PERMISSION_TYPE_CODES,
    RESOURCE_TYPE_CODES,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    ResourcePattern,
    ResourcePatternFilter,
    from_code,
)

Handler = Callable[[dict, int], Awaitable[dict | None]]


def handlers(listener: KafkaApiContext) -> dict[int, Handler]:
    """API key -> handler(request, version) -> response body (broker/apis/acls.py decides)."""

    async def describe_acls(req: dict, _version: int) -> dict:
        out = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": []}
        answer = apis_acls.describe_acls(listener.api_context(), _parse(_filter, req))
        if answer.error:
            return {**out, "error_code": int(answer.error), "error_message": answer.message}
        by_pattern: dict[ResourcePattern, list[dict]] = {}
        for b in answer.results:
            by_pattern.setdefault(b.pattern, []).append(_entry(b.entry))
        out["resources"] = [{"resource_type": RESOURCE_TYPE_CODES[p.resource_type],
                             "resource_name": p.name,
                             "pattern_type": PATTERN_TYPE_CODES[p.pattern_type], "acls": acls}
                            for p, acls in by_pattern.items()]
        return out

    def per_item(answer: apis_acls.AclsAnswer, count: int) -> tuple[list, int]:
        """Each item's result, and the code an AclError stands for: a request refused whole
        (or a store that failed) is answered on every one of its ``count`` items."""
        if answer.error:
            return [AclError(answer.message[:300])] * count, int(answer.error)
        return answer.results, int(ErrorCode.INVALID_REQUEST)

    async def create_acls(req: dict, _version: int) -> dict:
        creations = req["creations"]
        results, code = per_item(await apis_acls.create_acls(
            listener.api_context(), [_parse(_binding, c) for c in creations]), len(creations))
        return {"throttle_time_ms": 0, "results": [
            {"error_code": 0, "error_message": None} if r is None
            else {"error_code": code, "error_message": str(r)} for r in results]}

    async def delete_acls(req: dict, _version: int) -> dict:
        filters = req["filters"]
        results, code = per_item(await apis_acls.delete_acls(
            listener.api_context(), [_parse(_filter, f) for f in filters]), len(filters))
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": code, "error_message": str(r), "matching_acls": []}
            if isinstance(r, AclError) else
            {"error_code": 0, "error_message": None, "matching_acls": [
                {"error_code": 0, "error_message": None,
                 "resource_type": RESOURCE_TYPE_CODES[b.pattern.resource_type],
                 "resource_name": b.pattern.name,
                 "pattern_type": PATTERN_TYPE_CODES[b.pattern.pattern_type],
                 **_entry(b.entry)} for b in r]}
            for r in results]}

    return {ApiKey.DESCRIBE_ACLS: describe_acls, ApiKey.CREATE_ACLS: create_acls,
            ApiKey.DELETE_ACLS: delete_acls}


def _parse(parse, item: dict):
    try:
        return parse(item)
    except AclError as e:
        return e


def _entry(e: AccessControlEntry) -> dict:
    return {"principal": e.principal, "host": e.host,
            "operation": OPERATION_CODES[e.operation],
            "permission_type": PERMISSION_TYPE_CODES[e.permission_type]}


def _binding(c: dict) -> AclBinding:
    return AclBinding(
        ResourcePattern(from_code(RESOURCE_TYPE_CODES, c["resource_type"], "resource type"),
                        c["resource_name"],
                        from_code(PATTERN_TYPE_CODES, c["resource_pattern_type"],
                                  "pattern type")),
        AccessControlEntry(c["principal"], c["host"],
                           from_code(OPERATION_CODES, c["operation"], "operation"),
                           from_code(PERMISSION_TYPE_CODES, c["permission_type"],
                                     "permission type")))


def _filter(f: dict) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(
            from_code(RESOURCE_TYPE_CODES, f["resource_type_filter"], "resource type",
                      any_ok=True),
            f["resource_name_filter"],
            from_code(PATTERN_TYPE_CODES, f["pattern_type_filter"], "pattern type")),
        f["principal_filter"], f["host_filter"],
        from_code(OPERATION_CODES, f["operation"], "operation", any_ok=True),
        from_code(PERMISSION_TYPE_CODES, f["permission_type"], "permission type",
                  any_ok=True))

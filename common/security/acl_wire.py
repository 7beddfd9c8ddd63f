"""ACLs on replog's gRPC wire (proto/replog/v1/replog.proto AclBinding, AclBindingFilter):
Kafka's numeric enum codes <-> the ACL model (common/security/acl.py). Shared by the broker's
servicer and ``replog acls --bootstrap-server``; an unknown code is an AclError (one line)."""

from __future__ import annotations

from common.rpc import replog_pb2 as pb
from common.security.acl import (
    ANY_CODE,
    OPERATION_CODES,
    PATTERN_TYPE_CODES,
    PERMISSION_TYPE_CODES,
    RESOURCE_TYPE_CODES,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
    from_code,
)


def binding_pb(b: AclBinding) -> pb.AclBinding:
    return pb.AclBinding(
        resource_type=RESOURCE_TYPE_CODES[b.pattern.resource_type],
        resource_name=b.pattern.name, pattern_type=PATTERN_TYPE_CODES[b.pattern.pattern_type],
        principal=b.entry.principal, host=b.entry.host,
        operation=OPERATION_CODES[b.entry.operation],
        permission_type=PERMISSION_TYPE_CODES[b.entry.permission_type])


def binding_from_pb(m: pb.AclBinding) -> AclBinding:
    return AclBinding(
        ResourcePattern(from_code(RESOURCE_TYPE_CODES, m.resource_type, "resource type"),
                        m.resource_name,
                        from_code(PATTERN_TYPE_CODES, m.pattern_type, "pattern type")),
        AccessControlEntry(m.principal, m.host,
                           from_code(OPERATION_CODES, m.operation, "operation"),
                           from_code(PERMISSION_TYPE_CODES, m.permission_type,
                                     "permission type")))


def filter_pb(f: AclBindingFilter) -> pb.AclBindingFilter:
    out = pb.AclBindingFilter(
        resource_type=ANY_CODE if f.pattern.resource_type is None
        else RESOURCE_TYPE_CODES[f.pattern.resource_type],
        pattern_type=PATTERN_TYPE_CODES[f.pattern.pattern_type],
        operation=ANY_CODE if f.operation is None else OPERATION_CODES[f.operation],
        permission_type=ANY_CODE if f.permission_type is None
        else PERMISSION_TYPE_CODES[f.permission_type])
    for field, value in (("resource_name", f.pattern.name), ("principal", f.principal),
                         ("host", f.host)):
        if value is not None:
            setattr(out, field, value)
    return out


def filter_from_pb(m: pb.AclBindingFilter) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(
            from_code(RESOURCE_TYPE_CODES, m.resource_type, "resource type", any_ok=True),
            m.resource_name if m.HasField("resource_name") else None,
            from_code(PATTERN_TYPE_CODES, m.pattern_type, "pattern type")),
        m.principal if m.HasField("principal") else None,
        m.host if m.HasField("host") else None,
        from_code(OPERATION_CODES, m.operation, "operation", any_ok=True),
        from_code(PERMISSION_TYPE_CODES, m.permission_type, "permission type", any_ok=True))

"""Kafka's ACL model and the AclAuthorizer's decision, with no I/O.

Names, JSON and znode layout are Kafka's ZooKeeper-era ones (kafka.security.authorizer.
AclAuthorizer, AclEntry, kafka.zk.ZkData's ZkAclStore/ZkAclChangeStore, 3.x):

- an ACL binds a resource pattern (type, name, LITERAL or PREFIXED; the literal name ``*`` is
  every resource of the type) to an access control entry (principal, host, operation,
  Allow/Deny);
- ``/kafka-acl/<ResourceType>/<name>`` holds a literal pattern's entries and
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` a prefixed one's, as
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",
  "host":"*"}]}``;
- every change leaves a sequential ``acl_changes_`` node under ``/kafka-acl-changes`` (literal
  patterns, content ``TOPIC:name``) or ``/kafka-acl-extended-changes`` (others, a JSON event)
  naming the resource whose znode every authorizer reads again.

The decision (``authorize``) is AclAuthorizer.authorizeAction's: a super user is allowed
everything; otherwise the ACLs matching the resource (its literal name, the type's ``*``, and
every prefixed pattern the name starts with) decide: none at all -> allow.everyone.if.no.acl.
found; a matching Deny -> denied; a matching Allow -> allowed (Describe is implied by Read,
Write, Delete and Alter, DescribeConfigs by AlterConfigs; All covers every operation); else
denied. A principal matches itself or ``User:*``, a host itself or ``*``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from common.security.principal import KafkaPrincipal

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource (ResourcePattern's CLUSTER_NAME)

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
ACL_PATHS = (LITERAL_ACL_PATH, EXTENDED_ACL_PATH, LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH)


class AclError(ValueError):
    """Bad ACL input: an unknown name, a malformed principal, a corrupt znode."""


def _by_name(enum_cls, text: str, what: str):
    """Kafka's SecurityUtils / fromString: the camel name (``ClusterAction``) or the enum's
    (``CLUSTER_ACTION``), any case."""
    key = text.strip().lower().replace("_", "").replace("-", "")
    for member in enum_cls:
        if key in (member.value.lower(), member.name.lower().replace("_", "")):
            return member
    raise AclError(f"unknown {what} {text!r} (one of "
                   f"{', '.join(m.value for m in enum_cls)})")


class ResourceType(Enum):
    """Value: Kafka's resourceTypeName (the ZooKeeper path segment); name: its enum name."""

    TOPIC = "Topic"
    GROUP = "Group"
    CLUSTER = "Cluster"
    TRANSACTIONAL_ID = "TransactionalId"
    DELEGATION_TOKEN = "DelegationToken"
    USER = "User"

    @classmethod
    def parse(cls, text: str) -> ResourceType:
        return _by_name(cls, text, "resource type")


class PatternType(Enum):
    LITERAL = "Literal"
    PREFIXED = "Prefixed"
    ANY = "Any"      # filters only: either pattern type, the exact name
    MATCH = "Match"  # filters only: every pattern that matches the name

    @property
    def is_specific(self) -> bool:
        return self in (PatternType.LITERAL, PatternType.PREFIXED)

    @classmethod
    def parse(cls, text: str) -> PatternType:
        return _by_name(cls, text, "pattern type")


class AclOperation(Enum):
    ALL = "All"
    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    CLUSTER_ACTION = "ClusterAction"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "AlterConfigs"
    IDEMPOTENT_WRITE = "IdempotentWrite"
    CREATE_TOKENS = "CreateTokens"
    DESCRIBE_TOKENS = "DescribeTokens"

    @classmethod
    def parse(cls, text: str) -> AclOperation:
        return _by_name(cls, text, "operation")


class AclPermissionType(Enum):
    ALLOW = "Allow"
    DENY = "Deny"

    @classmethod
    def parse(cls, text: str) -> AclPermissionType:
        return _by_name(cls, text, "permission type")


# AclAuthorizer.allowAclExists: an Allow of any of these grants the key operation.
IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}

_O = AclOperation
# AclEntry.supportedOperations (All is accepted everywhere besides).
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE}),
    ResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                                     _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER,
                                     _O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}


@dataclass(frozen=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if not self.name:
            raise AclError("a resource name must not be empty")

    def __str__(self) -> str:  # Kafka's ResourcePattern.toString, as kafka-acls prints it
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")

    def __lt__(self, other: ResourcePattern) -> bool:  # a stable listing order
        return (self.resource_type.value, self.pattern_type.value, self.name) < \
            (other.resource_type.value, other.pattern_type.value, other.name)


CLUSTER_RESOURCE = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME)


def topic(name: str) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name)


@dataclass(frozen=True)
class AccessControlEntry:
    principal: str  # Type:name as written (User:alice, User:*)
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:  # Kafka's AccessControlEntryData.toString
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission_type.name})")

    def sort_key(self) -> tuple:
        return (self.principal, self.host, self.operation.value, self.permission_type.value)


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


# Kafka's wire codes (org.apache.kafka.common.acl/resource enums' code()), for the Admin API's
# CreateAcls / DescribeAcls / DeleteAcls. ANY (1) is a filter's wildcard; 0 is UNKNOWN.
ANY_CODE = 1
RESOURCE_TYPE_CODES = {ResourceType.TOPIC: 2, ResourceType.GROUP: 3, ResourceType.CLUSTER: 4,
                       ResourceType.TRANSACTIONAL_ID: 5, ResourceType.DELEGATION_TOKEN: 6,
                       ResourceType.USER: 7}
PATTERN_TYPE_CODES = {PatternType.ANY: 1, PatternType.MATCH: 2, PatternType.LITERAL: 3,
                      PatternType.PREFIXED: 4}
OPERATION_CODES = {op: code for code, op in enumerate(AclOperation, start=2)}
PERMISSION_TYPE_CODES = {AclPermissionType.DENY: 2, AclPermissionType.ALLOW: 3}

# SUPPORTED_OPERATIONS (above) is also what Metadata and DescribeCluster list as authorized
# operations (KIP-430); librdkafka's admin checks for exactly those: 8 on a topic, 7 on the
# cluster.
# "not provided": the authorized-operations fields when the request did not ask (KIP-430)
AUTHORIZED_OPERATIONS_OMITTED = -(2 ** 31)


def operations_bit_field(operations) -> int:
    """Kafka's Utils.to32BitField over the operations' wire codes (bit ``code`` set)."""
    out = 0
    for op in operations:
        out |= 1 << OPERATION_CODES[op]
    return out


def from_code(codes: dict, code: int, what: str, any_ok: bool = False):
    """The member of ``codes`` numbered ``code``; None for ANY when ``any_ok``; AclError for
    an unknown or UNKNOWN code."""
    if any_ok and code == ANY_CODE and ANY_CODE not in codes.values():
        return None
    for member, number in codes.items():
        if number == code:
            return member
    raise AclError(f"unknown {what} code {code}")


# ---------------------------------------------------------------------------- the decision

def matching_acls(acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]],
                  resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
    """AclAuthorizer.matchingAcls: the entries of the literal name, of the type's wildcard
    ``*`` and of every prefixed pattern ``name`` starts with."""
    out: list[AccessControlEntry] = []
    for key in _candidate_patterns(resource_type, name):
        out.extend(acls.get(key, ()))
    return out


@functools.lru_cache(maxsize=4096)
def _candidate_patterns(resource_type: ResourceType, name: str) -> tuple[ResourcePattern, ...]:
    """Every stored pattern that could apply to the name: the type's wildcard, the literal
    name (once, when it is the wildcard) and each prefix. Kept per name: a request asks about
    the same few topics again and again."""
    literal = (ResourcePattern(resource_type, WILDCARD_RESOURCE),) if name == WILDCARD_RESOURCE \
        else (ResourcePattern(resource_type, WILDCARD_RESOURCE),
              ResourcePattern(resource_type, name))
    return literal + tuple(ResourcePattern(resource_type, name[:end], PatternType.PREFIXED)
                           for end in range(1, len(name) + 1))


def _matches(acl: AccessControlEntry, principal: str, host: str, operation: AclOperation,
             permission: AclPermissionType) -> bool:
    """AclAuthorizer.matchingAclExists for one entry."""
    return (acl.permission_type == permission
            and acl.principal in (principal, WILDCARD_PRINCIPAL)
            and acl.operation in (operation, AclOperation.ALL)
            and acl.host in (host, WILDCARD_HOST))


def authorize(principal: KafkaPrincipal, host: str, operation: AclOperation,
              resource: ResourcePattern,
              acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]],
              super_users: frozenset[KafkaPrincipal] | set[KafkaPrincipal] = frozenset(),
              allow_everyone_if_no_acl_found: bool = False) -> bool:
    """AclAuthorizer.authorizeAction: may ``principal`` from ``host`` do ``operation`` on the
    literal ``resource``?"""
    if resource.pattern_type != PatternType.LITERAL:
        raise AclError(f"only literal resources are authorized, got {resource}")
    if principal in super_users:
        return True
    found = matching_acls(acls, resource.resource_type, resource.name)
    if not found:
        return allow_everyone_if_no_acl_found
    who = str(principal)
    if any(_matches(a, who, host, operation, AclPermissionType.DENY) for a in found):
        return False
    allowing = IMPLIED_BY.get(operation, frozenset({operation}))
    return any(_matches(a, who, host, op, AclPermissionType.ALLOW)
               for a in found for op in allowing)


def parse_super_users(text: str | None) -> frozenset[KafkaPrincipal]:
    """``super.users``: principals separated by semicolons (``User:admin;User:CN=broker``)."""
    if not text or not text.strip():
        return frozenset()
    try:
        return frozenset(KafkaPrincipal.parse(s) for s in text.split(";") if s.strip())
    except ValueError as e:
        raise AclError(f"super.users: {e}") from None


# ---------------------------------------------------------------------------- filters

@dataclass(frozen=True)
class ResourcePatternFilter:
    """Kafka's ResourcePatternFilter: a type and name (None: any) and a pattern type that may
    also be ANY (either, the exact name) or MATCH (every pattern that applies to the name)."""

    resource_type: ResourceType | None
    name: str | None
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:  # as Kafka prints a filter (same form as a pattern)
        kind = self.resource_type.name if self.resource_type is not None else "ANY"
        name = self.name if self.name is not None else "<any>"
        return f"ResourcePattern(resourceType={kind}, name={name}, patternType=" \
               f"{self.pattern_type.name})"

    def matches(self, pattern: ResourcePattern) -> bool:
        return pattern_filter_matches(self.resource_type, self.name, self.pattern_type,
                                      pattern)

    def pattern(self) -> ResourcePattern:
        """The one pattern a specific filter names (adding ACLs)."""
        if self.resource_type is None or self.name is None or not self.pattern_type.is_specific:
            raise AclError(f"{self} names no single resource pattern")
        return ResourcePattern(self.resource_type, self.name, self.pattern_type)


def pattern_filter_matches(filter_type: ResourceType | None, filter_name: str | None,
                           filter_pattern: PatternType, pattern: ResourcePattern) -> bool:
    """ResourcePatternFilter.matches: None is ANY for the type and the name. MATCH takes every
    pattern that would apply to the literal name (itself, ``*``, prefixes of it)."""
    if filter_type is not None and filter_type != pattern.resource_type:
        return False
    if filter_pattern.is_specific and filter_pattern != pattern.pattern_type:
        return False
    if filter_name is None:
        return True
    if filter_pattern != PatternType.MATCH:
        return filter_name == pattern.name
    if pattern.pattern_type == PatternType.LITERAL:
        return pattern.name in (filter_name, WILDCARD_RESOURCE)
    return filter_name.startswith(pattern.name)


@dataclass(frozen=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: a pattern filter and an entry filter (None: any)."""

    pattern: ResourcePatternFilter
    principal: str | None = None
    host: str | None = None
    operation: AclOperation | None = None
    permission_type: AclPermissionType | None = None

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation is None or self.operation == entry.operation)
                and (self.permission_type is None
                     or self.permission_type == entry.permission_type))

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.matches_entry(binding.entry)


def validate_binding(b: AclBinding) -> None:
    """What AclAuthorizer.createAcls refuses (InvalidRequestException): a filter's pattern
    type, a Cluster resource not named kafka-cluster, a malformed principal, an empty host."""
    if not b.pattern.pattern_type.is_specific:
        raise AclError(f"Invalid ACL creation: pattern type {b.pattern.pattern_type.name}")
    if b.pattern.resource_type == ResourceType.CLUSTER and b.pattern.name != CLUSTER_NAME:
        raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    try:
        KafkaPrincipal.parse(b.entry.principal)
    except ValueError as e:
        raise AclError(f"Invalid ACL creation: {e}") from None
    if not b.entry.host:
        raise AclError("Invalid ACL creation: the host must not be empty (* is every host)")


# ---------------------------------------------------------------------------- znodes

def resource_path(pattern: ResourcePattern) -> str:
    """ZkAclStore(patternType).path(resourceType, name)."""
    if pattern.pattern_type == PatternType.LITERAL:
        base = LITERAL_ACL_PATH
    elif pattern.pattern_type == PatternType.PREFIXED:
        base = f"{EXTENDED_ACL_PATH}/{pattern.pattern_type.name.lower()}"
    else:
        raise AclError(f"{pattern.pattern_type.name} is a filter, not a stored pattern type")
    return f"{base}/{pattern.resource_type.value}/{pattern.name}"


def type_paths() -> list[tuple[str, PatternType, ResourceType]]:
    """Every ``<store>/<ResourceType>`` directory a full load reads (loadAllAcls)."""
    out = []
    for pt, base in ((PatternType.LITERAL, LITERAL_ACL_PATH),
                     (PatternType.PREFIXED, f"{EXTENDED_ACL_PATH}/prefixed")):
        for rt in ResourceType:
            out.append((f"{base}/{rt.value}", pt, rt))
    return out


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """AclEntry.toJsonCompatibleMap, as ResourceZNode.encode writes it."""
    return json.dumps({"version": 1, "acls": [
        {"principal": e.principal, "permissionType": e.permission_type.value,
         "operation": e.operation.value, "host": e.host}
        for e in sorted(entries, key=AccessControlEntry.sort_key)]},
        separators=(",", ":")).encode()


def decode_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    """AclEntry.fromBytes: empty -> no entries; anything malformed -> AclError (one line)."""
    if not data:
        return frozenset()
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise AclError(f"ACL znode is not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("version") != 1 \
            or not isinstance(doc.get("acls"), list):
        raise AclError("ACL znode is not {\"version\":1,\"acls\":[...]}")
    out = set()
    for item in doc["acls"]:
        if not isinstance(item, dict) or not all(
                isinstance(item.get(k), str)
                for k in ("principal", "permissionType", "operation", "host")):
            raise AclError(f"ACL entry {str(item)[:100]} lacks principal, permissionType, "
                           "operation or host")
        try:
            KafkaPrincipal.parse(item["principal"])
        except ValueError as e:
            raise AclError(str(e)) from None
        out.add(AccessControlEntry(item["principal"], item["host"],
                                   AclOperation.parse(item["operation"]),
                                   AclPermissionType.parse(item["permissionType"])))
    return frozenset(out)


def change_path(pattern: ResourcePattern) -> str:
    """The sequential node prefix a change to ``pattern`` is announced under."""
    base = LITERAL_CHANGES_PATH if pattern.pattern_type == PatternType.LITERAL \
        else EXTENDED_CHANGES_PATH
    return f"{base}/{CHANGE_PREFIX}"


def encode_change(pattern: ResourcePattern) -> bytes:
    """LiteralAclChangeStore.encode (``TOPIC:name``) or ExtendedAclChangeStore.encode."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps({"version": 1, "resourceType": pattern.resource_type.name,
                       "name": pattern.name, "patternType": pattern.pattern_type.name},
                      separators=(",", ":")).encode()


def decode_change(changes_path: str, data: bytes) -> ResourcePattern:
    """The resource a change notification under ``changes_path`` names; AclError if bad."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise AclError("ACL change notification is not UTF-8") from None
    if changes_path.rstrip("/") == LITERAL_CHANGES_PATH:
        kind, sep, name = text.partition(":")
        if not sep:
            raise AclError(f"expected ResourceType:ResourceName, got {text[:100]!r}")
        return ResourcePattern(ResourceType.parse(kind), name)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise AclError(f"ACL change event is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("version"), int) \
            or doc["version"] > 1 or not all(isinstance(doc.get(k), str)
                                             for k in ("resourceType", "name", "patternType")):
        raise AclError(f"unsupported ACL change event {text[:100]!r}")
    pattern = PatternType.parse(doc["patternType"])
    if not pattern.is_specific:
        raise AclError(f"ACL change event names pattern type {pattern.name}")
    return ResourcePattern(ResourceType.parse(doc["resourceType"]), doc["name"], pattern)

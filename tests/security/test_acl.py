"""The ACL model and AclAuthorizer's decision (common/security/acl.py): each rule of
authorizeAction by example, then the decision against an independent model over generated ACL
sets, and Kafka's znode and change-notification formats."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.security.acl import (
    CLUSTER_RESOURCE,
    AccessControlEntry,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    authorize,
    change_path,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
    matching_acls,
    parse_super_users,
    pattern_filter_matches,
    resource_path,
    topic,
)
from common.security.principal import ANONYMOUS, KafkaPrincipal

O, P = AclOperation, AclPermissionType  # noqa: E741
ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")


def ace(principal="User:alice", op=O.READ, perm=P.ALLOW, host="*"):
    return AccessControlEntry(principal, host, op, perm)


def prefixed(name, rt=ResourceType.TOPIC):
    return ResourcePattern(rt, name, PatternType.PREFIXED)


def allowed(acls, op=O.READ, res=None, who=ALICE, host="10.0.0.1", **kw):
    return authorize(who, host, op, res or topic("orders"), acls, **kw)


# ---------------------------------------------------------------------------- rules by example

def test_no_acls_denies_unless_allow_everyone_if_no_acl_found():
    assert not allowed({})
    assert allowed({}, allow_everyone_if_no_acl_found=True)


def test_acls_on_the_resource_for_someone_else_deny_even_with_allow_everyone():
    acls = {topic("orders"): {ace("User:bob")}}
    assert not allowed(acls, allow_everyone_if_no_acl_found=True)
    assert allowed(acls, who=BOB)


def test_acls_on_another_resource_do_not_count_as_found():
    acls = {topic("other"): {ace("User:bob")}}
    assert allowed(acls, allow_everyone_if_no_acl_found=True)
    assert not allowed(acls)


def test_super_user_is_allowed_past_a_deny():
    acls = {topic("orders"): {ace(op=O.ALL, perm=P.DENY)}}
    assert allowed(acls, super_users=frozenset({ALICE}))
    assert not allowed(acls)


def test_deny_wins_over_allow():
    acls = {topic("orders"): {ace(), ace(perm=P.DENY)}}
    assert not allowed(acls)


def test_deny_on_wildcard_topic_and_prefix_and_wildcard_principal_and_host():
    for deny_where, entry in [(topic("*"), ace(perm=P.DENY)),
                              (prefixed("ord"), ace(perm=P.DENY)),
                              (topic("orders"), ace("User:*", perm=P.DENY)),
                              (topic("orders"), ace(perm=P.DENY, host="10.0.0.1"))]:
        acls = {topic("orders"): {ace()}}
        acls.setdefault(deny_where, set()).add(entry)
        assert not allowed(acls), deny_where


def test_deny_from_another_host_or_principal_does_not_apply():
    acls = {topic("orders"): {ace(), ace(perm=P.DENY, host="10.0.0.2"),
                              ace("User:bob", perm=P.DENY)}}
    assert allowed(acls)


@pytest.mark.parametrize("granted", [O.READ, O.WRITE, O.DELETE, O.ALTER, O.DESCRIBE, O.ALL])
def test_describe_is_implied_by_read_write_delete_alter(granted):
    assert allowed({topic("orders"): {ace(op=granted)}}, op=O.DESCRIBE)


@pytest.mark.parametrize("granted", [O.CREATE, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS,
                                     O.CLUSTER_ACTION])
def test_describe_is_not_implied_by_the_others(granted):
    assert not allowed({topic("orders"): {ace(op=granted)}}, op=O.DESCRIBE)


def test_describe_configs_implied_by_alter_configs_only():
    assert allowed({topic("orders"): {ace(op=O.ALTER_CONFIGS)}}, op=O.DESCRIBE_CONFIGS)
    assert not allowed({topic("orders"): {ace(op=O.ALTER)}}, op=O.DESCRIBE_CONFIGS)


def test_implication_is_for_allow_only_deny_read_does_not_deny_describe():
    acls = {topic("orders"): {ace(op=O.WRITE), ace(op=O.READ, perm=P.DENY)}}
    assert allowed(acls, op=O.DESCRIBE)
    assert not allowed(acls, op=O.READ)


def test_read_does_not_imply_write():
    assert not allowed({topic("orders"): {ace(op=O.READ)}}, op=O.WRITE)


def test_all_grants_and_denies_every_operation():
    for op in AclOperation:
        assert allowed({topic("orders"): {ace(op=O.ALL)}}, op=op)
        assert not allowed({topic("orders"): {ace(op=O.ALL), ace(op=O.ALL, perm=P.DENY)}}, op=op)


def test_prefixed_pattern_matches_names_starting_with_it_only():
    acls = {prefixed("ord"): {ace()}}
    assert allowed(acls)
    assert allowed(acls, res=topic("ord"))
    assert not allowed(acls, res=topic("or"))
    assert not allowed(acls, res=topic("xorders"))


def test_resource_types_do_not_mix():
    acls = {ResourcePattern(ResourceType.GROUP, "orders"): {ace()}}
    assert not allowed(acls)
    assert not allowed({CLUSTER_RESOURCE: {ace(op=O.ALL)}})


def test_cluster_action_on_the_cluster():
    acls = {CLUSTER_RESOURCE: {ace("User:broker", op=O.CLUSTER_ACTION)}}
    assert allowed(acls, op=O.CLUSTER_ACTION, res=CLUSTER_RESOURCE,
                   who=KafkaPrincipal("User", "broker"))
    assert not allowed(acls, op=O.CLUSTER_ACTION, res=CLUSTER_RESOURCE)


def test_principal_type_is_part_of_the_match():
    acls = {topic("orders"): {ace("Group:alice")}}
    assert not allowed(acls)


def test_only_literal_resources_are_authorized():
    with pytest.raises(AclError):
        allowed({}, res=prefixed("x"))


def test_matching_acls_counts_the_wildcard_name_once():
    acls = {topic("*"): {ace()}}
    assert matching_acls(acls, ResourceType.TOPIC, "*") == [ace()]


def test_super_users_parse_semicolon_separated():
    assert parse_super_users("User:admin; User:CN=broker,O=replog ;") == {
        KafkaPrincipal("User", "admin"), KafkaPrincipal("User", "CN=broker,O=replog")}
    assert parse_super_users("") == frozenset()
    assert parse_super_users(None) == frozenset()
    with pytest.raises(AclError, match="super.users"):
        parse_super_users("admin")


def test_names_parse_as_kafka_spells_them():
    assert AclOperation.parse("ClusterAction") is O.CLUSTER_ACTION
    assert AclOperation.parse("cluster_action") is O.CLUSTER_ACTION
    assert AclOperation.parse("DESCRIBECONFIGS") is O.DESCRIBE_CONFIGS
    assert ResourceType.parse("TransactionalId") is ResourceType.TRANSACTIONAL_ID
    assert PatternType.parse("prefixed") is PatternType.PREFIXED
    with pytest.raises(AclError, match="unknown operation 'Fly'"):
        AclOperation.parse("Fly")


def test_kafka_acls_string_forms():
    assert str(topic("t")) == "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
    assert str(prefixed("t")) == \
        "ResourcePattern(resourceType=TOPIC, name=t, patternType=PREFIXED)"
    assert str(ace(op=O.DESCRIBE_CONFIGS)) == \
        "(principal=User:alice, host=*, operation=DESCRIBE_CONFIGS, permissionType=ALLOW)"


# ---------------------------------------------------------------------------- filters

@pytest.mark.parametrize("filter_pattern,name,pattern,expected", [
    (PatternType.LITERAL, "t", topic("t"), True),
    (PatternType.LITERAL, "t", prefixed("t"), False),
    (PatternType.PREFIXED, "t", prefixed("t"), True),
    (PatternType.ANY, "t", prefixed("t"), True),
    (PatternType.ANY, "t", topic("t"), True),
    (PatternType.ANY, "t", topic("*"), False),
    (PatternType.MATCH, "t", topic("*"), True),
    (PatternType.MATCH, "t", prefixed("tx"), False),
    (PatternType.MATCH, "tx", prefixed("t"), True),
    (PatternType.MATCH, "t", topic("tx"), False),
])
def test_pattern_filters_match_as_kafkas_resource_pattern_filter(filter_pattern, name, pattern,
                                                                 expected):
    assert pattern_filter_matches(ResourceType.TOPIC, name, filter_pattern, pattern) == expected


def test_match_filter_takes_the_prefixes_of_the_name():
    assert pattern_filter_matches(ResourceType.TOPIC, "orders", PatternType.MATCH,
                                  prefixed("ord"))
    assert pattern_filter_matches(None, None, PatternType.ANY, CLUSTER_RESOURCE)


# ---------------------------------------------------------------------------- znodes

def test_resource_paths_are_kafkas():
    assert resource_path(topic("t")) == "/kafka-acl/Topic/t"
    assert resource_path(CLUSTER_RESOURCE) == "/kafka-acl/Cluster/kafka-cluster"
    assert resource_path(prefixed("t", ResourceType.GROUP)) == \
        "/kafka-acl-extended/prefixed/Group/t"
    with pytest.raises(AclError):
        resource_path(ResourcePattern(ResourceType.TOPIC, "t", PatternType.ANY))


def test_acl_json_is_kafkas():
    doc = json.loads(encode_acls([ace(op=O.CLUSTER_ACTION, perm=P.DENY, host="h")]))
    assert doc == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Deny",
                                           "operation": "ClusterAction", "host": "h"}]}


def test_acl_json_written_by_kafka_decodes():
    # as ZkData's example (spaces and key order as Kafka's Json writes vary)
    data = b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Allow",' \
           b'"operation": "Read","principal": "User:alice"}]}'
    assert decode_acls(data) == {ace(host="host1")}
    assert decode_acls(b"") == frozenset()


@pytest.mark.parametrize("data", [b"{", b"[]", b'{"version":2,"acls":[]}',
                                  (b'{"version":1,"acls":[{"principal":"alice","host":"*",'
                                  b'"operation":"Read","permissionType":"Allow"}]}'),
                                  (b'{"version":1,"acls":[{"principal":"User:a","host":"*",'
                                  b'"operation":"Fly","permissionType":"Allow"}]}'),
                                  b'{"version":1,"acls":[1]}', b"\xff"])
def test_bad_acl_znodes_are_one_error(data):
    with pytest.raises(AclError):
        decode_acls(data)


def test_change_notifications_are_kafkas():
    assert change_path(topic("t")) == "/kafka-acl-changes/acl_changes_"
    assert encode_change(topic("t")) == b"TOPIC:t"
    assert change_path(prefixed("t")) == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(encode_change(prefixed("t"))) == {
        "version": 1, "resourceType": "TOPIC", "name": "t", "patternType": "PREFIXED"}
    # a name holding the separator: split once, as LiteralAclChangeStore.decode
    assert decode_change("/kafka-acl-changes", b"Topic:a:b") == topic("a:b")


@pytest.mark.parametrize("path,data", [("/kafka-acl-changes", b"nocolon"),
                                       ("/kafka-acl-changes", b"Fish:x"),
                                       ("/kafka-acl-extended-changes", b"{"),
                                       ("/kafka-acl-extended-changes",
                                        (b'{"version":1,"resourceType":"TOPIC","name":"x",'
                                        b'"patternType":"MATCH"}')),
                                       ("/kafka-acl-extended-changes",
                                        (b'{"version":2,"resourceType":"TOPIC","name":"x",'
                                        b'"patternType":"PREFIXED"}'))])
def test_bad_change_notifications_are_one_error(path, data):
    with pytest.raises(AclError):
        decode_change(path, data)


# ---------------------------------------------------------------------------- generated

NAMES = st.sampled_from(["a", "ab", "abc", "b", "*"])
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:*", "User:ANONYMOUS"])
HOSTS = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
ENTRIES = st.builds(AccessControlEntry, PRINCIPALS, HOSTS, st.sampled_from(list(AclOperation)),
                    st.sampled_from(list(AclPermissionType)))
PATTERNS = st.builds(ResourcePattern, st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP]),
                     NAMES, st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]))
BINDINGS = st.lists(st.tuples(PATTERNS, ENTRIES), max_size=8)


def model(principal, host, op, resource, bindings, supers, allow_if_none):
    """The rules as the Kafka documentation states them, over a flat list of bindings."""
    if principal in supers:
        return True
    applies = [e for p, e in bindings if p.resource_type == resource.resource_type and (
        (p.pattern_type == PatternType.LITERAL and p.name in (resource.name, "*"))
        or (p.pattern_type == PatternType.PREFIXED and resource.name.startswith(p.name)))]
    if not applies:
        return allow_if_none
    mine = [e for e in applies if e.principal in (str(principal), "User:*")
            and e.host in (host, "*")]
    if any(e.permission_type == P.DENY and e.operation in (op, O.ALL) for e in mine):
        return False
    grants = {e.operation for e in mine if e.permission_type == P.ALLOW}
    if O.ALL in grants or op in grants:
        return True
    if op == O.DESCRIBE:
        return bool(grants & {O.READ, O.WRITE, O.DELETE, O.ALTER})
    return op == O.DESCRIBE_CONFIGS and O.ALTER_CONFIGS in grants


@settings(max_examples=400, deadline=None)
@given(bindings=BINDINGS, who=PRINCIPALS, host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
       op=st.sampled_from(list(AclOperation)), name=NAMES,
       rt=st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP]),
       supers=st.frozensets(PRINCIPALS.map(KafkaPrincipal.parse), max_size=1),
       allow_if_none=st.booleans())
def test_authorize_agrees_with_the_documented_rules(bindings, who, host, op, name, rt, supers,
                                                    allow_if_none):
    acls: dict = {}
    for p, e in bindings:
        acls.setdefault(p, set()).add(e)
    principal = KafkaPrincipal.parse(who)
    resource = ResourcePattern(rt, name)
    assert authorize(principal, host, op, resource, acls, supers, allow_if_none) == \
        model(principal, host, op, resource, list(dict.fromkeys(bindings)), supers,
              allow_if_none)


@given(st.sets(ENTRIES, max_size=6))
def test_acl_json_round_trips(entries):
    assert decode_acls(encode_acls(entries)) == entries


@given(PATTERNS)
def test_change_notification_round_trips(pattern):
    base = change_path(pattern).rsplit("/", 1)[0]
    assert decode_change(base, encode_change(pattern)) == pattern


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_fail_with_one_error(data):
    for decode in (decode_acls, lambda d: decode_change("/kafka-acl-changes", d),
                   lambda d: decode_change("/kafka-acl-extended-changes", d)):
        try:
            decode(data)
        except AclError:
            pass


def test_anonymous_is_kafkas():
    assert str(ANONYMOUS) == "User:ANONYMOUS"

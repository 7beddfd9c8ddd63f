"""The AclAuthorizer shell against a real ZooKeeper: ACLs stored in Kafka's znodes, loaded at
start, and an ACL written by another client reaching the cache through /kafka-acl-changes."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import ConfigError
from common.security.acl import (
    CLUSTER_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    topic,
)
from common.security.acl_store import CHANGE_EXPIRATION_MS, AclStore, create_acls, delete_acls
from common.security.authorizer import AclAuthorizer, Requester, enabled, peer_host
from common.security.principal import ANONYMOUS, KafkaPrincipal
from common.zk_async import AsyncZk
from tests.polling import async_wait_until

WRITE = AccessControlEntry("User:ANONYMOUS", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
ANON = Requester(ANONYMOUS, "127.0.0.1")


class Events:
    def __init__(self):
        self.seen: list[tuple[str, dict]] = []

    def info(self, name, **kw):
        self.seen.append((name, kw))

    warning = error = info


@pytest.fixture
async def zks(zk_hosts):
    clients = [AsyncZk(zk_hosts, session_timeout_ms=6000) for _ in range(2)]
    for c in clients:
        await c.start()
    yield clients
    for c in clients:
        await c.stop()


async def test_update_writes_kafkas_znode_and_a_change_notification(zks, zk):
    store = AclStore(zks[0])
    await store.ensure_paths()
    await store.update(topic("t"), lambda acls: acls | {WRITE})
    data, _ = zk.get("/kafka-acl/Topic/t")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:ANONYMOUS", "permissionType": "Allow", "operation": "Write",
         "host": "*"}]}
    [change] = zk.get_children("/kafka-acl-changes")
    assert change.startswith("acl_changes_")
    assert zk.get(f"/kafka-acl-changes/{change}")[0] == b"TOPIC:t"
    # removing the last entry deletes the znode, and is announced too
    await store.update(topic("t"), lambda acls: acls - {WRITE})
    assert zk.exists("/kafka-acl/Topic/t") is None
    assert len(zk.get_children("/kafka-acl-changes")) == 2


async def test_prefixed_acls_go_to_the_extended_store(zks, zk):
    store = AclStore(zks[0])
    await store.ensure_paths()
    pattern = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
    await store.update(pattern, lambda acls: acls | {WRITE})
    assert zk.exists("/kafka-acl-extended/prefixed/Topic/ord") is not None
    [change] = zk.get_children("/kafka-acl-extended-changes")
    assert json.loads(zk.get(f"/kafka-acl-extended-changes/{change}")[0])["patternType"] \
        == "PREFIXED"
    assert await store.load_all() == {pattern: frozenset({WRITE})}


async def test_acl_added_by_another_client_reaches_the_cache_through_notifications(zks):
    authorizer = AclAuthorizer(zks[0])
    await authorizer.start()
    try:
        assert not authorizer.authorize(ANON, AclOperation.WRITE, topic("t"))
        await AclStore(zks[1]).update(topic("t"), lambda acls: acls | {WRITE})
        await async_wait_until(
            lambda: authorizer.authorize(ANON, AclOperation.WRITE, topic("t")), timeout=10,
            what="the ACL written by the other client to reach the cache")
        await AclStore(zks[1]).update(topic("t"), lambda acls: frozenset())
        await async_wait_until(
            lambda: topic("t") not in authorizer.acls, timeout=10,
            what="the removal to reach the cache")
    finally:
        await authorizer.stop()


async def test_start_loads_what_is_stored_and_skips_a_corrupt_znode(zks, zk):
    await AclStore(zks[1]).update(CLUSTER_RESOURCE, lambda acls: acls | {AccessControlEntry(
        "User:ANONYMOUS", "*", AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW)})
    zk.create("/kafka-acl/Topic/bad", b"{not json", makepath=True)
    events = Events()
    authorizer = AclAuthorizer(zks[0], events=events)
    await authorizer.start()
    try:
        assert authorizer.authorize(ANON, AclOperation.CLUSTER_ACTION, CLUSTER_RESOURCE)
        assert list(authorizer.acls) == [CLUSTER_RESOURCE]
        assert any(name == "acl_znode_skipped" and kw["path"] == "/kafka-acl/Topic/bad"
                   for name, kw in events.seen)
    finally:
        await authorizer.stop()


async def test_a_hostile_change_notification_is_skipped(zks, zk):
    authorizer = AclAuthorizer(zks[0], events=Events())
    await authorizer.start()
    try:
        zk.create("/kafka-acl-changes/acl_changes_", b"garbage", sequence=True)
        await AclStore(zks[1]).update(topic("t"), lambda acls: acls | {WRITE})
        await async_wait_until(lambda: topic("t") in authorizer.acls, timeout=10,
                               what="the good notification after the bad one")
    finally:
        await authorizer.stop()


async def test_old_notifications_are_purged(zks, zk):
    store = AclStore(zks[0])
    await store.ensure_paths()
    await store.update(topic("t"), lambda acls: acls | {WRITE})
    children = zk.get_children("/kafka-acl-changes")
    ctime = zk.exists(f"/kafka-acl-changes/{children[0]}").ctime
    await store.purge_changes("/kafka-acl-changes", children, now_ms=ctime + 1000)
    assert zk.get_children("/kafka-acl-changes") == children
    await store.purge_changes("/kafka-acl-changes", children,
                              now_ms=ctime + CHANGE_EXPIRATION_MS + 1)
    assert zk.get_children("/kafka-acl-changes") == []


async def test_super_users_and_allow_everyone_from_config(zks):
    config = {"authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer",
              "super.users": "User:admin;User:broker", "allow.everyone.if.no.acl.found": True}
    authorizer = AclAuthorizer.from_config(config, zks[0])
    assert authorizer.super_users == {KafkaPrincipal("User", "admin"),
                                      KafkaPrincipal("User", "broker")}
    assert authorizer.allow_everyone_if_no_acl_found
    assert AclAuthorizer.from_config({"authorizer.class.name": ""}, zks[0]) is None


def test_authorizer_class_names():
    assert enabled("kafka.security.authorizer.AclAuthorizer")
    assert enabled(" kafka.security.auth.SimpleAclAuthorizer ")
    assert not enabled("")
    assert not enabled(None)
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        enabled("org.apache.kafka.metadata.authorizer.StandardAuthorizer")


@pytest.mark.parametrize("peer,host", [("ipv4:10.1.2.3:5000", "10.1.2.3"),
                                       ("ipv6:[::1]:5000", "::1"),
                                       ("unix:/tmp/s", "/tmp/s"), ("", ""), (None, "")])
def test_peer_host(peer, host):
    assert peer_host(peer) == host


async def test_notifications_after_the_session_expired_still_reach_the_cache(zks, zk_expire):
    """kazoo drops watches with the session; the watch fires once on the loss and is armed
    again on the new session, so later notifications are not missed."""
    authorizer = AclAuthorizer(zks[0])
    await authorizer.start()
    try:
        await asyncio.get_running_loop().run_in_executor(None, zk_expire, zks[0].client)
        await AclStore(zks[1]).update(topic("t"), lambda acls: acls | {WRITE})
        await async_wait_until(lambda: topic("t") in authorizer.acls, timeout=20,
                               what="the ACL written after the expiry to reach the cache")
    finally:
        await authorizer.stop()


_PATTERNS = st.sampled_from([topic("t"), topic("u"), topic("*"), CLUSTER_RESOURCE,
                             ResourcePattern(ResourceType.TOPIC, "t", PatternType.PREFIXED)])
_ENTRIES = st.builds(AccessControlEntry, st.sampled_from(["User:a", "User:b", "User:*"]),
                     st.sampled_from(["*", "10.0.0.1"]),
                     st.sampled_from([AclOperation.READ, AclOperation.WRITE, AclOperation.ALL]),
                     st.sampled_from(list(AclPermissionType)))
_OPS = st.lists(st.tuples(st.sampled_from(["add", "remove", "remove-all"]), _PATTERNS,
                          st.sets(_ENTRIES, min_size=1, max_size=3)), min_size=1, max_size=6)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_store_and_every_cache_agree_with_a_model(zk_hosts, ops):
    """Random additions and removals through the store (as replog acls and the brokers'
    CreateAcls/DeleteAcls write them): ZooKeeper holds what a dict model holds, and an
    authorizer started before them ends with the same cache through the notifications."""
    chroot = f"{zk_hosts}/ex-{uuid.uuid4().hex[:8]}"

    async def run():
        writer, reader = AsyncZk(chroot, 6000), AsyncZk(chroot, 6000)
        await writer.start()
        await reader.start()
        authorizer = AclAuthorizer(reader)
        await authorizer.start()
        try:
            store = AclStore(writer)
            model: dict = {}
            for kind, pattern, entries in ops:
                if kind == "add":
                    await create_acls(store, [AclBinding(pattern, e) for e in entries])
                    model[pattern] = model.get(pattern, frozenset()) | entries
                else:
                    f = ResourcePatternFilter(pattern.resource_type, pattern.name,
                                              pattern.pattern_type)
                    filters = [AclBindingFilter(f)] if kind == "remove-all" else [
                        AclBindingFilter(f, e.principal, e.host, e.operation,
                                         e.permission_type) for e in entries]
                    await delete_acls(store, filters)
                    left = frozenset() if kind == "remove-all" else \
                        model.get(pattern, frozenset()) - entries
                    model[pattern] = left
            model = {p: e for p, e in model.items() if e}
            assert await store.load_all() == model
            await async_wait_until(lambda: authorizer.acls == model, timeout=10,
                                   what="the cache to follow the notifications")
        finally:
            await authorizer.stop()
            await reader.stop()
            await writer.stop()
    asyncio.run(run())

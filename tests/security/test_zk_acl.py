"""common/security/zk_acl.py and zk_auth.py: Kafka's defaultAcls per path, and credentials."""

from __future__ import annotations

import pytest
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Id, Permissions

from common import zk_layout as zl
from common.errors import ConfigError
from common.security.zk_acl import (
    SECURE_ROOT_PATHS,
    chroot_acls,
    default_acls,
    digest_id,
    effective_acls,
    is_secure_path,
    is_sensitive,
)
from common.security.zk_auth import ZkSecurity, zk_security

SECURE_READABLE = list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)
SECURE_PRIVATE = list(CREATOR_ALL_ACL)

# Every znode replog writes, by the layout's own names, and what Kafka gives it.
REPLOG_PATHS = {
    "/cluster": SECURE_READABLE,
    zl.CLUSTER_ID: SECURE_READABLE,
    zl.CONTROLLER: SECURE_READABLE,
    zl.CONTROLLER_EPOCH: SECURE_READABLE,
    "/brokers": SECURE_READABLE,
    zl.BROKER_IDS: SECURE_READABLE,
    zl.broker_path(1): SECURE_READABLE,
    zl.TOPICS: SECURE_READABLE,
    zl.topic_path("t"): SECURE_READABLE,
    zl.partitions_path("t"): SECURE_READABLE,
    zl.partition_path("t", 0): SECURE_READABLE,
    zl.partition_state_path("t", 0): SECURE_READABLE,
    zl.LOST_REPLICAS: SECURE_READABLE,
    zl.lost_replicas_path(2): SECURE_READABLE,
    "/config": SECURE_READABLE,
    zl.CONFIG_TOPICS: SECURE_READABLE,
    zl.topic_config_path("t"): SECURE_READABLE,
    zl.CONFIG_CHANGES: SECURE_READABLE,
    zl.CONFIG_CHANGES + "/" + zl.CONFIG_CHANGE_PREFIX + "0000000001": SECURE_READABLE,
    zl.CONFIG_BROKERS: SECURE_PRIVATE,  # dynamic broker configs may hold passwords
    zl.CONFIG_BROKERS + "/1": SECURE_PRIVATE,
    zl.CONFIG_BROKERS + "/<default>": SECURE_PRIVATE,
    "/config/users": SECURE_PRIVATE,
    "/config/users/alice": SECURE_PRIVATE,
    "/delegation_token/tokens": SECURE_PRIVATE,
    "/delegation_token/tokens/x": SECURE_PRIVATE,
    "/delegation_token": SECURE_READABLE,
    zl.ADMIN: SECURE_READABLE,
    zl.DELETE_TOPICS: SECURE_READABLE,
    zl.DELETE_TOPICS + "/t": SECURE_READABLE,
    zl.REASSIGN_PARTITIONS: SECURE_READABLE,
    zl.PREFERRED_REPLICA_ELECTION: SECURE_READABLE,
    zl.RESTART_PARTITIONS: SECURE_READABLE,
    zl.restart_entry_path(zl.RESTART_ENTRY_PREFIX): SECURE_READABLE,
    "/kafka-acl": SECURE_READABLE,
    "/kafka-acl/Topic/t": SECURE_READABLE,
    "/kafka-acl-changes": SECURE_READABLE,
    "/consumers": list(OPEN_ACL_UNSAFE),  # Kafka leaves the old consumers' path open
}


@pytest.mark.parametrize("path", sorted(REPLOG_PATHS))
def test_secure_acls_are_kafkas_default_acls(path: str) -> None:
    assert default_acls(path, secure=True) == REPLOG_PATHS[path]


@pytest.mark.parametrize("path", sorted(REPLOG_PATHS))
def test_unsecure_acls_are_open(path: str) -> None:
    assert default_acls(path, secure=False) == list(OPEN_ACL_UNSAFE)


def test_sensitivity_is_a_prefix_test_as_kafkas_startswith() -> None:
    assert is_sensitive("/config/brokers")
    assert is_sensitive("/config/brokersX")  # Kafka's startsWith: kept as is
    assert not is_sensitive("/config")
    assert not is_sensitive("/config/topics/brokers")
    assert not is_sensitive("/")


def test_consumers_children_are_not_open() -> None:
    # only the /consumers znode itself is Kafka's exception
    assert default_acls("/consumers/g", secure=True) == SECURE_READABLE


def test_world_never_gets_more_than_read_when_secure() -> None:
    for path in REPLOG_PATHS:
        if path == "/consumers":
            continue
        for acl in default_acls(path, secure=True):
            if acl.id == Id("world", "anyone"):
                assert acl.perms == Permissions.READ, path


def test_chroot_is_creator_all_and_world_read() -> None:
    assert chroot_acls(True) == SECURE_READABLE
    assert chroot_acls(False) == list(OPEN_ACL_UNSAFE)


def test_the_acls_are_fresh_lists() -> None:
    a = default_acls("/controller", True)
    a.append(ACL(0, Id("world", "anyone")))
    assert default_acls("/controller", True) == SECURE_READABLE


@pytest.mark.parametrize("path,secure", [
    ("/controller", True), ("/controller_epoch", True), ("/brokers", True),
    ("/brokers/topics/t/partitions/0/state", True), ("/admin/reassign_partitions", True),
    ("/restart_partitions/restart-0000000001", True), ("/kafka-acl-changes/x", True),
    ("/cluster/id", True), ("/config/brokers/1", True),
    ("/consumers", False), ("/zookeeper", False), ("/controllers", False), ("/", False),
    ("/brokersx", False), ("/other/brokers", False),
])
def test_secure_paths_are_the_migrators_roots(path: str, secure: bool) -> None:
    assert is_secure_path(path) is secure


def test_every_persistent_path_is_under_a_secure_root() -> None:
    for path in zl.PERSISTENT_PATHS + (zl.CONTROLLER, zl.CONTROLLER_EPOCH, zl.CLUSTER_ID):
        assert is_secure_path(path), path
    assert len(set(SECURE_ROOT_PATHS)) == len(SECURE_ROOT_PATHS)


def test_digest_id_is_zookeepers() -> None:
    # DigestAuthenticationProvider.generateDigest("replog:secret")
    import base64
    import hashlib
    expected = base64.b64encode(hashlib.sha1(b"replog:secret").digest()).decode()
    assert digest_id("replog:secret") == Id("digest", f"replog:{expected}")
    assert digest_id("u:p:q").id.startswith("u:")  # a ':' in the password is the password's
    for bad in ("replog", ":pw", ""):
        with pytest.raises(ValueError):
            digest_id(bad)


def test_effective_acls_replace_auth_by_the_creator() -> None:
    me = digest_id("replog:secret")
    assert effective_acls(SECURE_READABLE, me) == [
        ACL(Permissions.ALL, me), ACL(Permissions.READ, Id("world", "anyone"))]


# ---------------------------------------------------------------------------- zk_auth

def test_default_security_is_open_and_unauthenticated() -> None:
    s = ZkSecurity()
    assert s.kazoo_args() == {}
    assert s.acls("/controller") == list(OPEN_ACL_UNSAFE)


def test_digest_credentials_become_kazoo_auth_data() -> None:
    s = zk_security({"zookeeper.set.acl": True, "zookeeper.auth.digest": "replog:pw"})
    assert s.kazoo_args() == {"auth_data": [("digest", "replog:pw")]}
    assert s.acls("/controller") == SECURE_READABLE
    assert "pw" not in repr(s)


def test_credentials_without_set_acl_authenticate_but_leave_znodes_open() -> None:
    s = zk_security({"zookeeper.auth.digest": "replog:pw"})
    assert s.auth_data == [("digest", "replog:pw")]
    assert s.acls("/controller") == list(OPEN_ACL_UNSAFE)


def test_credentials_from_a_file(tmp_path) -> None:
    f = tmp_path / "zk-digest"
    f.write_text("replog:pw\n")
    s = zk_security({"zookeeper.set.acl": True, "zookeeper.auth.digest.file": str(f)})
    assert s.auth_data == [("digest", "replog:pw")]


@pytest.mark.parametrize("config,names", [
    ({"zookeeper.set.acl": True}, "zookeeper.set.acl"),
    ({"zookeeper.set.acl": True, "zookeeper.auth.digest": None}, "zookeeper.set.acl"),
    ({"zookeeper.auth.digest": "nocolon"}, "zookeeper.auth.digest"),
    ({"zookeeper.auth.digest": "a:b", "zookeeper.auth.digest.file": "/x"},
     "zookeeper.auth.digest.file"),
    ({"zookeeper.auth.digest.file": "/nonexistent/zk-digest"}, "zookeeper.auth.digest.file"),
])
def test_bad_security_config_is_one_line_naming_the_key(config, names) -> None:
    with pytest.raises(ConfigError) as e:
        zk_security(config)
    assert names in str(e.value)
    assert "\n" not in str(e.value)


def test_the_config_table_declares_the_keys() -> None:
    from common.config import build_config
    cfg = build_config([("zookeeper.set.acl", "true", "test"),
                        ("zookeeper.auth.digest", "replog:pw", "test")])
    assert zk_security(cfg).set_acl is True
    assert zk_security(build_config([])) == ZkSecurity()

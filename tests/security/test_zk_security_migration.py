"""replog zookeeper-security-migration against a real ZooKeeper: an open tree of replog's znodes
gets Kafka's ACLs (and loses them again with unsecure), a client without the credentials then
gets NoAuth, znodes outside replog's roots are left alone, and bad input is one line."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE, Id, Permissions

from admin.cli import main
from admin.zk_security_migration import migrate, security_from_file
from common import zk_layout as zl
from common.security.zk_acl import default_acls, digest_id, effective_acls
from common.security.zk_auth import ZkSecurity

CREDENTIALS = "replog:zk-secret"
ME = digest_id(CREDENTIALS)
TREE = {  # an unsecured cluster's znodes, as its processes made them
    zl.CLUSTER_ID: b"id", zl.CONTROLLER_EPOCH: b"3", zl.topic_path("t"): b"topic",
    zl.partition_state_path("t", 0): b"{}", zl.broker_path(1): b"{}",
    zl.CONFIG_BROKERS + "/1": b"secret", zl.topic_config_path("t"): b"{}",
    zl.CONFIG_CHANGES + "/config_change_0000000000": b"{}", zl.DELETE_TOPICS: b"",
    zl.RESTART_PARTITIONS + "/restart-0000000001": b"{}", "/kafka-acl/Topic/t": b"{}",
}


@pytest.fixture
def secure_hosts(zk_hosts: str) -> str:
    return zk_hosts + "/cluster"


@pytest.fixture
def clients(secure_hosts):
    made = []

    def make(auth: bool = False) -> KazooClient:
        c = KazooClient(secure_hosts, timeout=10.0,
                        auth_data=[("digest", CREDENTIALS)] if auth else None)
        c.start(15)
        made.append(c)
        return c
    yield make
    for c in made:
        c.stop()
        c.close()


@pytest.fixture
def config_file(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text(f"broker.id=1\nzookeeper.connect=x\nzookeeper.auth.digest={CREDENTIALS}\n")
    return str(f)


@pytest.fixture
def open_tree(zk_hosts, clients):
    root = KazooClient(zk_hosts, timeout=10.0)
    root.start(15)
    root.ensure_path("/cluster")
    root.stop()
    root.close()
    c = clients()
    for path, data in TREE.items():
        c.create(path, data, makepath=True)
    c.create(zl.CONTROLLER, b"{}", ephemeral=True)  # another session's ephemeral
    c.create("/not-replogs", b"x")
    return c


def _all_paths(c: KazooClient, path: str = "/") -> list[str]:
    out = []
    for child in c.get_children(path):
        p = path.rstrip("/") + "/" + child
        out += [p] + _all_paths(c, p)
    return out


def test_secure_then_unsecure(open_tree, clients, config_file, secure_hosts, capsys):
    assert main(["zookeeper-security-migration", "--zookeeper.acl", "secure",
                 "--zookeeper.connect", secure_hosts, "--zk-config-file", config_file]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Set secure ACLs on ") and secure_hosts in out

    admin = clients(auth=True)
    paths = [p for p in _all_paths(admin) if p != "/not-replogs"]
    assert len(paths) > len(TREE)
    for path in paths:
        assert admin.get_acls(path)[0] == effective_acls(default_acls(path, True), ME), path
    assert admin.get_acls("/")[0] == [(Permissions.ALL, ME), (Permissions.READ,
                                                               Id("world", "anyone"))]
    assert admin.get_acls("/not-replogs")[0] == list(OPEN_ACL_UNSAFE)  # not replog's

    anonymous = clients()
    with pytest.raises(NoAuthError):
        anonymous.delete(zl.CONTROLLER)
    with pytest.raises(NoAuthError):
        anonymous.set(zl.topic_path("t"), b"rewritten")
    with pytest.raises(NoAuthError):
        anonymous.create(zl.broker_path(9), b"{}", ephemeral=True)
    with pytest.raises(NoAuthError):
        anonymous.create("/brokers2", b"")  # the chroot is closed too
    with pytest.raises(NoAuthError):
        anonymous.get(zl.CONFIG_BROKERS + "/1")
    assert anonymous.get(zl.topic_path("t"))[0] == b"topic"
    assert open_tree.get(zl.CONTROLLER)[0] == b"{}"  # ephemeral kept, its session untouched

    assert main(["zookeeper-security-migration", "--zookeeper.acl", "unsecure",
                 "--zookeeper.connect", secure_hosts, "--zk-config-file", config_file]) == 0
    for path in paths + ["/"]:
        assert admin.get_acls(path)[0] == list(OPEN_ACL_UNSAFE), path
    anonymous.set(zl.topic_path("t"), b"open again")


def test_wrong_credentials_cannot_unsecure(open_tree, secure_hosts, config_file, tmp_path,
                                           capsys):
    migrate(secure_hosts, "secure", security_from_file(config_file))
    wrong = tmp_path / "wrong.properties"
    wrong.write_text("zookeeper.auth.digest=replog:guess\n")
    assert main(["zookeeper-security-migration", "--zookeeper.acl", "unsecure",
                 "--zookeeper.connect", secure_hosts, "--zk-config-file", str(wrong)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NoAuth" in err[0], err
    assert "Traceback" not in err[0]


def test_missing_roots_are_skipped(open_tree, clients, secure_hosts):
    from admin.zk_security_migration import set_acls_recursively
    admin = clients(auth=True)
    result = set_acls_recursively(admin, ["/brokers", "/gone"], True)
    assert result.vanished == 0 and result.updated >= 6
    assert admin.get_acls(zl.topic_path("t"))[0] == effective_acls(
        default_acls(zl.topic_path("t"), True), ME)


@pytest.mark.parametrize("args,message", [
    (["--zookeeper.acl", "secured"], "either secure or unsecure"),
    (["--zookeeper.acl", "secure"], "needs the cluster's ZooKeeper credentials"),
    (["--zookeeper.acl", "secure", "--zk-config-file", "/nonexistent"], "cannot read"),
])
def test_bad_input_is_one_line(args, message, secure_hosts, capsys):
    rc = main(["zookeeper-security-migration", "--zookeeper.connect", secure_hosts, *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and message in err[0], err


def test_path_check_refuses_an_empty_chroot(zk_hosts, config_file, capsys):
    rc = main(["zookeeper-security-migration", "--zookeeper.acl", "secure", "--enable.path.check",
               "--zookeeper.connect", zk_hosts, "--zk-config-file", config_file])
    err = capsys.readouterr().err
    assert rc == 1 and "nothing to migrate" in err


def test_unreachable_zookeeper_is_one_line(config_file, capsys):
    from harness.ports import free_port
    rc = main(["zookeeper-security-migration", "--zookeeper.acl", "secure",
               "--zookeeper.connect", f"127.0.0.1:{free_port()}",
               "--zookeeper.connection.timeout", "1000", "--zk-config-file", config_file])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and "could not connect" in err[-1], err


def test_credentials_file_keys_other_than_zookeeper_auth_are_ignored(config_file) -> None:
    assert security_from_file(config_file) == ZkSecurity(False, CREDENTIALS)

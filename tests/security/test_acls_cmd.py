"""``replog acls``: AclCommand's checks, --producer/--consumer expansion and output, and the
command against a real ZooKeeper (in-process main(), and once as a real process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from admin.cli import main
from common.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    decode_acls,
)

O = AclOperation  # noqa: E741


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["acls", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def ace(op, principal="User:alice", perm=AclPermissionType.ALLOW, host="*"):
    return AccessControlEntry(principal, host, op, perm)


@pytest.mark.parametrize("argv,message", [
    (["--add", "--topic", "t"], 'Missing required argument "[authorizer-properties]"'),
    (["--authorizer-properties", "zookeeper.connect=x", "--topic", "t"],
     "exactly one action"),
    (["--authorizer-properties", "zookeeper.connect=x", "--add", "--list", "--topic", "t"],
     "exactly one action"),
    (["--authorizer-properties", "zookeeper.connect=x", "--list", "--producer"],
     'Option "[list]" can\'t be used with option "[producer]"'),
    (["--authorizer-properties", "zookeeper.connect=x", "--add", "--producer",
      "--allow-principal", "User:a"], "With --producer you must specify a --topic"),
    (["--authorizer-properties", "zookeeper.connect=x", "--add", "--consumer", "--topic", "t",
      "--allow-principal", "User:a"], "With --consumer you must specify a --topic and a --group"),
    (["--authorizer-properties", "zookeeper.connect=x", "--add", "--producer", "--topic", "t",
      "--operation", "Read", "--allow-principal", "User:a"],
     'Option "[producer]" can\'t be used with option "[operation]"'),
    (["--authorizer-properties", "zookeeper.connect=x", "--add", "--topic", "t"],
     "You must specify one of: --allow-principal, --deny-principal"),
    (["--authorizer-properties", "zookeeper.connect=x", "--add", "--allow-principal", "User:a"],
     "You must provide at least one resource"),
    (["--authorizer-properties", "zookeeper.connect=x", "--add", "--topic", "t",
      "--allow-principal", "alice"], "not of the form Type:name"),
    (["--authorizer-properties", "zookeeper.connect=x", "--add", "--topic", "t",
      "--allow-principal", "User:a", "--operation", "Fly"], "unknown operation 'Fly'"),
    (["--authorizer-properties", "zookeeper.connect=x", "--add", "--group", "g",
      "--allow-principal", "User:a", "--operation", "Write"],
     "ResourceType GROUP only supports operations"),
    (["--authorizer-properties", "zookeeper.connect=x", "--add", "--topic", "t",
      "--allow-principal", "User:a", "--resource-pattern-type", "match"],
     "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    (["--authorizer-properties", "zookeeper.connect=x", "--add", "--topic", "t",
      "--allow-principal", "User:a", "--resource-pattern-type", "weird"],
     "Unknown resource-pattern-type: weird"),
    (["--authorizer-properties", "session.timeout=1", "--list"],
     'Missing required configuration "zookeeper.connect"'),
    (["--bootstrap-server", "h:1", "--authorizer", "kafka.security.authorizer.AclAuthorizer",
      "--list"], "Only one of --bootstrap-server or --authorizer must be specified"),
    (["--bootstrap-server", "h:1", "--authorizer-properties", "zookeeper.connect=x", "--list"],
     "The --authorizer-properties option can only be used with --authorizer option"),
])
def test_bad_command_lines_are_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert out == ""


def test_command_config_goes_with_bootstrap_server(capsys, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=PLAINTEXT\n")
    code, _, err = run(capsys, "--authorizer-properties", "zookeeper.connect=x",
                       "--command-config", str(props), "--list")
    assert code == 1 and err.count("\n") == 1
    assert "The --command-config option can only be used with --bootstrap-server" in err


def test_kafka_acls_output_form(capsys, zk_hosts, zk):
    code, out, _ = run(capsys, "--authorizer-properties", f"zookeeper.connect={zk_hosts}",
                       "--add", "--allow-principal", "User:alice", "--operation", "Read",
                       "--topic", "t")
    assert code == 0
    assert out.startswith(
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, "
        "patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=READ, "
        "permissionType=ALLOW) \n\n")
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, " \
           "patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=READ, " \
           "permissionType=ALLOW) \n" in out
    data, _ = zk.get("/kafka-acl/Topic/t")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
         "host": "*"}]}
    assert [zk.get(f"/kafka-acl-changes/{c}")[0] for c in zk.get_children("/kafka-acl-changes")
            ] == [b"TOPIC:t"]


def test_producer_and_consumer_expand_as_acl_command(capsys, zk_hosts, zk):
    props = ("--authorizer-properties", f"zookeeper.connect={zk_hosts}")
    assert run(capsys, *props, "--add", "--allow-principal", "User:alice", "--producer",
               "--topic", "t", "--idempotent")[0] == 0
    assert run(capsys, *props, "--add", "--allow-principal", "User:bob", "--consumer",
               "--topic", "t", "--group", "g", "--allow-host", "10.0.0.1")[0] == 0
    assert decode_acls(zk.get("/kafka-acl/Topic/t")[0]) == {
        ace(O.WRITE), ace(O.DESCRIBE), ace(O.CREATE),
        ace(O.READ, "User:bob", host="10.0.0.1"), ace(O.DESCRIBE, "User:bob", host="10.0.0.1")}
    assert decode_acls(zk.get("/kafka-acl/Cluster/kafka-cluster")[0]) == {
        ace(O.IDEMPOTENT_WRITE)}
    assert decode_acls(zk.get("/kafka-acl/Group/g")[0]) == {
        ace(O.READ, "User:bob", host="10.0.0.1")}
    _code, out, _ = run(capsys, *props, "--list", "--principal", "User:bob")
    assert out.startswith("ACLs for principal `User:bob`\n")
    assert "User:alice" not in out and out.count("Current ACLs for resource") == 2


def test_deny_and_prefixed(capsys, zk_hosts, zk):
    props = ("--authorizer-properties", f"zookeeper.connect={zk_hosts}")
    assert run(capsys, *props, "--add", "--deny-principal", "User:*", "--operation", "Write",
               "--topic", "ord", "--resource-pattern-type", "prefixed")[0] == 0
    assert decode_acls(zk.get("/kafka-acl-extended/prefixed/Topic/ord")[0]) == {
        ace(O.WRITE, "User:*", AclPermissionType.DENY)}
    # match: every pattern that applies to the name
    _code, out, _ = run(capsys, *props, "--list", "--topic", "orders",
                       "--resource-pattern-type", "match")
    assert "name=ord, patternType=PREFIXED" in out
    _code, out, _ = run(capsys, *props, "--list", "--topic", "orders")
    assert out == ""


def test_remove_needs_force_without_a_terminal_and_then_removes(capsys, zk_hosts, zk):
    props = ("--authorizer-properties", f"zookeeper.connect={zk_hosts}")
    run(capsys, *props, "--add", "--allow-principal", "User:alice", "--producer", "--topic", "t")
    code, _out, err = run(capsys, *props, "--remove", "--allow-principal", "User:alice",
                         "--operation", "Create", "--topic", "t")
    assert code == 1 and "add --force" in err and err.count("\n") == 1
    assert len(decode_acls(zk.get("/kafka-acl/Topic/t")[0])) == 3
    assert run(capsys, *props, "--remove", "--allow-principal", "User:alice", "--operation",
               "Create", "--topic", "t", "--force")[0] == 0
    assert decode_acls(zk.get("/kafka-acl/Topic/t")[0]) == {ace(O.WRITE), ace(O.DESCRIBE)}
    # no entries named: every ACL of the resource; its znode goes with the last one
    assert run(capsys, *props, "--remove", "--topic", "t", "--force")[0] == 0
    assert zk.exists("/kafka-acl/Topic/t") is None
    assert len(zk.get_children("/kafka-acl-changes")) == 3


def test_as_a_process(zk_hosts, zk):
    """The installed entry point, as an operator runs it (a real process)."""
    proc = subprocess.run(
        [sys.executable, "-m", "admin.cli", "acls", "--authorizer-properties",
         f"zookeeper.connect={zk_hosts}", "--add", "--allow-principal", "User:ANONYMOUS",
         "--cluster", "--operation", "ClusterAction"],
        check=False, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "resourceType=CLUSTER, name=kafka-cluster" in proc.stdout
    assert decode_acls(zk.get("/kafka-acl/Cluster/kafka-cluster")[0]) == {
        ace(O.CLUSTER_ACTION, "User:ANONYMOUS")}



@pytest.mark.parametrize("answer,removed", [("y\n", True), ("n\n", False)])
def test_remove_asks_on_a_terminal(capsys, monkeypatch, zk_hosts, zk, answer, removed):
    import io
    props = ("--authorizer-properties", f"zookeeper.connect={zk_hosts}")
    run(capsys, *props, "--add", "--allow-principal", "User:alice", "--operation", "Read",
        "--topic", "t")
    terminal = io.StringIO(answer)
    terminal.isatty = lambda: True
    monkeypatch.setattr(sys, "stdin", terminal)
    code, out, _ = run(capsys, *props, "--remove", "--topic", "t")
    assert code == 0
    assert out.startswith("Are you sure you want to delete all ACLs for resource filter "
                          "`ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`?"
                          " (y/n)\n")
    assert (zk.exists("/kafka-acl/Topic/t") is None) == removed

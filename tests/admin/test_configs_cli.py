"""`replog configs` (kafka-configs): option checks with Kafka's messages as one `Error:` line,
Kafka's --add-config syntax, and Kafka's describe / alter output. Against a real cluster in
tests/cluster/test_dynamic_config.py."""

from __future__ import annotations

import pytest

from admin.configs_cmd import completed_message, describe_lines, parse_add_config
from client.admin_client import ConfigEntry, ConfigSynonym
from common.errors import ReplogError
from tests.admin.test_cli import assert_one_line_error, replog

B = ["--bootstrap-server", "127.0.0.1:1"]


def test_add_config_takes_lists_in_square_brackets():
    assert parse_add_config("min.insync.replicas=2,retention.ms=1000") == {
        "min.insync.replicas": "2", "retention.ms": "1000"}
    assert parse_add_config("leader.replication.throttled.replicas=[0:1,1:2],segment.ms=5") == {
        "leader.replication.throttled.replicas": "0:1,1:2", "segment.ms": "5"}
    with pytest.raises(ReplogError, match='format "key=val"'):
        parse_add_config("min.insync.replicas")


def _entry(name, value, source, *more):
    return ConfigEntry(name, value, source, False, False,
                       (ConfigSynonym(name, value, source), *more))


def test_describe_prints_kafkas_lines_and_only_dynamic_configs():
    entries = [
        _entry("min.insync.replicas", "2", "DYNAMIC_TOPIC_CONFIG",
               ConfigSynonym("min.insync.replicas", "1", "DEFAULT_CONFIG")),
        _entry("cleanup.policy", "delete", "DEFAULT_CONFIG"),
    ]
    assert describe_lines("topics", "orders", entries, describe_all=False) == [
        "Dynamic configs for topic orders are:",
        ("  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "min.insync.replicas=2, DEFAULT_CONFIG:min.insync.replicas=1}")]
    lines = describe_lines("topics", "orders", entries, describe_all=True)
    assert lines[0] == "All configs for topic orders are:"
    assert [x.split("=")[0] for x in lines[1:]] == ["  cleanup.policy", "  min.insync.replicas"]
    default = [_entry("min.insync.replicas", "2", "DYNAMIC_DEFAULT_BROKER_CONFIG")]
    assert describe_lines("brokers", "", default, False)[0] == \
        "Default configs for brokers in the cluster are:"
    assert describe_lines("brokers", "1", default, False) == ["Dynamic configs for broker 1 are:"]


def test_alter_messages_are_kafkas():
    assert completed_message("topics", "orders") == "Completed updating config for topic orders."
    assert completed_message("brokers", "1") == "Completed updating config for broker 1."
    assert completed_message("brokers", "") == \
        "Completed updating default config for brokers in the cluster."


@pytest.mark.parametrize("args,contains", [
    (["--entity-type", "topics", "--entity-name", "t"],
     "Command must include exactly one action: --describe, --alter"),
    (["--entity-type", "topics", "--entity-name", "t", "--describe", "--alter"],
     "exactly one action"),
    (["--entity-name", "t", "--describe"], "At least one --entity-type must be specified"),
    (["--entity-type", "users", "--describe"], "Invalid entity type users"),
    (["--entity-type", "topics", "--alter", "--add-config", "a=1"],
     "--entity-name must be specified with --alter of topics"),
    (["--entity-type", "brokers", "--alter", "--add-config", "a=1"],
     "--entity-name or --entity-default must be specified with --alter of brokers"),
    (["--entity-type", "topics", "--entity-name", "t", "--alter"],
     "At least one of --add-config or --delete-config must be specified with --alter"),
    (["--entity-type", "topics", "--entity-default", "--describe"],
     "--entity-default is not supported for topics"),
    (["--entity-type", "brokers", "--entity-name", "x", "--describe"],
     "must be a valid integer broker id, but it is: x"),
    (["--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "oops"],
     'all configs to be added must be in the format "key=val"'),
    (["--entity-type", "topics", "--entity-name", "t", "--describe", "--timeout-ms", "300"],
     "no broker answered"),
])
async def test_user_errors_are_one_line(args, contains):
    rc, _, err = await replog("configs", *B, *args)
    assert_one_line_error(rc, err, contains)

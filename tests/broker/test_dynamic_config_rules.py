"""Dynamic configs, the pure parts: key and value checks, Kafka's incremental alteration, the
description with sources and synonyms, the min ISR a leader enforces, and which change
notifications a broker acts on (min ISR never weaker than configured)."""

from __future__ import annotations

import pytest

from broker.config_changes import (
    affects_broker,
    changes_to_process,
    last_sequence,
    obsolete_changes,
)
from common import zk_layout as zl
from common.config import build_config
from common.dynamic_config import (
    Alteration,
    AlterOp,
    ConfigSource,
    InvalidRequestError,
    alter,
    check_broker_config,
    check_broker_entity_config,
    check_topic_config,
    configured_min_isr,
    describe_broker,
    describe_topic,
    effective_min_isr,
)
from common.errors import ConfigError, ErrorCode

STATIC = build_config([("broker.id", "1", "test")])


# ----------------------------------------------------------------------------- checks

@pytest.mark.parametrize("key,value,message", [
    ("min.insync.replica", "2", "Unknown topic config name: min.insync.replica"),
    ("min.insync.replicas", "0",
     "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    ("min.insync.replicas", "two",
     "Invalid value two for configuration min.insync.replicas: Not a number of type INT"),
    ("unclean.leader.election.enable", "yes", "Expected value to be either true or false"),
    ("unclean.recovery.strategy", "Eager", "String must be one of: Proactive, Balanced, Manual"),
    ("leader.replication.throttled.replicas", "0-1", "[partitionId]:[brokerId]"),
])
def test_topic_config_checks_refuse_with_kafkas_message(key, value, message):
    with pytest.raises(ConfigError) as info:
        check_topic_config(key, value)
    assert message in str(info.value)
    assert info.value.error_code == ErrorCode.INVALID_CONFIG


def test_topic_config_checks_accept_kafkas_keys():
    assert check_topic_config("min.insync.replicas", " 2 ") == "2"
    assert check_topic_config("unclean.recovery.strategy", "Manual") == "Manual"
    assert check_topic_config("leader.replication.throttled.replicas", "0:1,1:2") == "0:1,1:2"
    assert check_topic_config("retention.ms", "-1") == "-1"


@pytest.mark.parametrize("key,value,message", [
    ("log.dirs", "/x", "Cannot update these configs dynamically: log.dirs"),
    ("no.such.key", "1", "Unknown broker config name: no.such.key"),
    ("leader.replication.throttled.rate", "0", "must be at least 1"),
    ("min.insync.replicas", "x", "Invalid value x for configuration min.insync.replicas"),
])
def test_broker_dynamic_config_checks(key, value, message):
    with pytest.raises(ConfigError) as info:
        check_broker_config(key, value)
    assert message in str(info.value)
    assert check_broker_config("follower.replication.throttled.rate", "1048576") == "1048576"


# ----------------------------------------------------------------------------- alteration

def test_alter_sets_and_deletes():
    out = alter({"retention.ms": "1000", "min.insync.replicas": "1"},
                [Alteration("min.insync.replicas", AlterOp.SET, "2"),
                 Alteration("retention.ms", AlterOp.DELETE)], check_topic_config)
    assert out == {"min.insync.replicas": "2"}


def test_alter_applies_nothing_when_one_operation_is_invalid():
    current = {"min.insync.replicas": "1"}
    with pytest.raises(ConfigError):
        alter(current, [Alteration("min.insync.replicas", AlterOp.SET, "3"),
                        Alteration("segment.bytes", AlterOp.SET, "1")], check_topic_config)
    assert current == {"min.insync.replicas": "1"}


def test_alter_refuses_duplicate_keys_and_append_to_a_scalar():
    with pytest.raises(InvalidRequestError) as info:
        alter({}, [Alteration("retention.ms", AlterOp.SET, "1"),
                   Alteration("retention.ms", AlterOp.DELETE)], check_topic_config)
    assert info.value.error_code == ErrorCode.INVALID_REQUEST
    with pytest.raises(ConfigError, match="append is not allowed"):
        alter({}, [Alteration("min.insync.replicas", AlterOp.APPEND, "2")], check_topic_config)


def test_alter_appends_and_subtracts_list_values():
    key = "leader.replication.throttled.replicas"
    out = alter({key: "0:1"}, [Alteration(key, AlterOp.APPEND, "1:2,0:1")], check_topic_config)
    assert out == {key: "0:1,1:2"}
    out = alter(out, [Alteration(key, AlterOp.SUBTRACT, "0:1,1:2")], check_topic_config)
    assert out == {}


# ----------------------------------------------------------------------------- description

def _entry(entries, name):
    return next(e for e in entries if e.name == name)


def test_topic_description_lists_synonyms_most_specific_first():
    static = build_config([("broker.id", "1", "t"), ("log.segment.bytes", "4096", "t")])
    entries = describe_topic({"min.insync.replicas": "2"}, {"min.insync.replicas": "3"}, {},
                             static)
    e = _entry(entries, "min.insync.replicas")
    assert (e.value, e.source) == ("2", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [(s.source.name, s.value) for s in e.synonyms] == [
        ("DYNAMIC_TOPIC_CONFIG", "2"), ("DYNAMIC_BROKER_CONFIG", "3"), ("DEFAULT_CONFIG", "1")]
    seg = _entry(entries, "segment.bytes")
    assert (seg.value, seg.source) == ("4096", ConfigSource.STATIC_BROKER_CONFIG)
    assert [s.name for s in seg.synonyms] == ["log.segment.bytes", "log.segment.bytes"]
    assert _entry(entries, "cleanup.policy").source == ConfigSource.DEFAULT_CONFIG


def test_broker_description_default_entity_holds_only_its_dynamic_values():
    only = describe_broker(None, {"min.insync.replicas": "2"}, STATIC)
    assert [(e.name, e.value, e.source) for e in only] == [
        ("min.insync.replicas", "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    mine = describe_broker({"leader.replication.throttled.rate": "100"},
                           {"min.insync.replicas": "2"}, STATIC)
    rate = _entry(mine, "leader.replication.throttled.rate")
    assert (rate.value, rate.source, rate.read_only) == (
        "100", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert _entry(mine, "min.insync.replicas").source == \
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert _entry(mine, "log.dirs").read_only


# ----------------------------------------------------------------------------- min ISR

@pytest.mark.parametrize("topic,default,static,rf,expected", [
    ({"min.insync.replicas": "2"}, {"min.insync.replicas": "3"}, 1, 3, 2),  # override wins
    ({}, {"min.insync.replicas": "3"}, 1, 3, 3),  # then the dynamic broker default
    ({}, {}, 2, 3, 2),  # then server.properties
    (None, {}, 1, 3, 3),  # topic config unreadable: the replication factor, not 1
    ({}, None, 1, 3, 3),  # broker default unreadable: likewise
    ({"min.insync.replicas": "2"}, None, 1, 3, 2),  # ... unless the topic says
    ({"min.insync.replicas": "bogus"}, {}, 1, 3, 3),  # hand-written garbage: the strictest
    ({}, {}, 2, 1, 2),  # configured above RF: kept as configured (acks=all admission)
])
def test_configured_min_isr_never_falls_back_to_a_weaker_value(topic, default, static, rf,
                                                                expected):
    assert configured_min_isr(topic, default, static, rf) == expected


@pytest.mark.parametrize("configured, rf, expected", [(2, 1, 1), (3, 2, 2), (2, 3, 2),
                                                      (1, 3, 1), (5, 0, 1)])
def test_effective_min_isr_is_capped_at_the_replication_factor(configured, rf, expected):
    assert effective_min_isr(configured, rf) == expected


def test_min_insync_replicas_is_refused_on_one_brokers_entity():
    """A per-broker value would make that broker's rule differ from the
    controller's; only the cluster-wide default entity may set it."""
    with pytest.raises(ConfigError, match="only be set cluster-wide"):
        check_broker_entity_config("min.insync.replicas", "1")
    assert check_broker_entity_config("leader.replication.throttled.rate", "10") == "10"


# ----------------------------------------------------------------------------- notifications

def test_changes_above_the_last_processed_one_in_sequence_order():
    children = ["config_change_0000000012", "config_change_0000000003", "lock",
                "config_change_0000000010", "config_change_0000000011"]
    assert changes_to_process(children, 10) == [(11, "config_change_0000000011"),
                                                 (12, "config_change_0000000012")]
    assert changes_to_process(children, 12) == []
    assert [s for s, _ in changes_to_process(children, -1)] == [3, 10, 11, 12]
    assert last_sequence(children) == 12
    assert last_sequence(["lock"]) == -1


def test_only_processed_notifications_past_the_expiry_are_pruned():
    minute = 60_000
    created = [("config_change_0000000001", 0), ("config_change_0000000002", 10 * minute),
               ("config_change_0000000003", 0)]
    assert obsolete_changes(created, 20 * minute, last_seq=2) == ["config_change_0000000001"]


def test_broker_notifications_matter_for_this_broker_and_the_default():
    assert affects_broker("brokers", "1", 1)
    assert affects_broker("brokers", "<default>", 1)
    assert not affects_broker("brokers", "2", 1)
    assert not affects_broker("topics", "1", 1)


def test_notification_codec_is_kafkas_version_2():
    data = zl.encode_config_change("topics", "orders")
    assert data == b'{"entity_path":"topics/orders","version":2}'
    assert zl.decode_config_change(data) == ("topics", "orders")
    with pytest.raises(ValueError):
        zl.decode_config_change(b'{"version":1,"entity_path":"topics/orders"}')
    assert zl.config_change_seq("config_change_0000000042") == 42
    assert zl.config_change_seq("config_change_x") is None


@pytest.mark.parametrize(("static", "value", "source", "synonyms"), [
    ([], "604800000", "DEFAULT_CONFIG", [("log.retention.hours", "168")]),
    ([("log.retention.hours", "24")], "86400000", "STATIC_BROKER_CONFIG",
     [("log.retention.hours", "24"), ("log.retention.hours", "168")]),
    ([("log.retention.ms", "5000")], "5000", "STATIC_BROKER_CONFIG",
     [("log.retention.ms", "5000"), ("log.retention.hours", "168")]),
])
def test_retention_ms_follows_kafkas_synonym_chain(static, value, source, synonyms):
    """Kafka's LogConfig synonyms: retention.ms <- log.retention.ms, log.retention.minutes,
    log.retention.hours; a broker set in hours gives the topic its value in ms."""
    cfg = build_config([("broker.id", "1", "t"), *((k, v, "t") for k, v in static)])
    [e] = describe_topic({}, {}, {}, cfg, ["retention.ms"])
    assert (e.value, e.source.name) == (value, source)
    assert [(s.name, s.value) for s in e.synonyms] == synonyms

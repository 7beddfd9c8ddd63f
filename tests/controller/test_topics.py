"""CreateTopics validation: every error a client can get, with Kafka's messages."""

from __future__ import annotations

import random

import pytest

from common.assignment import BrokerMetadata
from common.errors import ErrorCode
from controller.create_topics import (
    TopicError,
    collides,
    new_topic_id,
    plan_topic,
    unclean_election_enabled,
    validate_topic_configs,
)

LIVE = [BrokerMetadata(1), BrokerMetadata(2), BrokerMetadata(3)]


def plan(name="t", n=None, rf=None, explicit=None, configs=None, existing=()):
    return plan_topic(name, n, rf, explicit, configs or {}, existing=set(existing),
                      live_brokers=LIVE, default_partitions=2, default_replication_factor=1,
                      rng=random.Random(1))


@pytest.mark.parametrize("kwargs,code,message", [
    ({"name": "a/b"}, ErrorCode.INVALID_TOPIC_EXCEPTION, "illegal"),
    ({"name": ".."}, ErrorCode.INVALID_TOPIC_EXCEPTION, "cannot be"),
    ({"name": ""}, ErrorCode.INVALID_TOPIC_EXCEPTION, "empty"),
    ({"name": "x" * 250}, ErrorCode.INVALID_TOPIC_EXCEPTION, "longer than 249"),
    ({"existing": ["t"]}, ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 't' already exists."),
    ({"name": "a.b", "existing": ["a_b"]}, ErrorCode.INVALID_TOPIC_EXCEPTION,
     "Topic 'a.b' collides with existing topic: a_b"),
    ({"n": 0}, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
    ({"rf": 4}, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor: 4 larger than available brokers: 3."),
    ({"rf": 0}, ErrorCode.INVALID_REPLICATION_FACTOR, "must be larger than 0"),
    ({"n": 1, "explicit": {0: [1]}}, ErrorCode.INVALID_REQUEST, "Both numPartitions"),
    ({"explicit": {0: [1, 7]}}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Unknown broker(s) in replica assignment: 7."),
    ({"configs": {"retention.ms": "abc"}}, ErrorCode.INVALID_CONFIG,
     "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ({"configs": {"min.insync.replicas": "0"}}, ErrorCode.INVALID_CONFIG, "at least 1"),
    ({"configs": {"no.such": "1"}}, ErrorCode.INVALID_CONFIG,
     "Unknown topic config name: no.such"),
    ({"configs": {"unclean.leader.election.enable": "yes"}}, ErrorCode.INVALID_CONFIG,
     "true or false"),
])
def test_errors(kwargs, code, message):
    with pytest.raises(TopicError) as e:
        plan(**kwargs)
    assert e.value.error_code == code
    assert message in e.value.message


def test_defaults_and_explicit():
    p = plan()
    assert len(p.assignment) == 2 and p.replication_factor == 1
    assert len(p.topic_id) == 22 and not p.topic_id.startswith("-")
    p = plan(n=-1, rf=-1, configs={"retention.ms": " 1000 "})
    assert len(p.assignment) == 2 and p.configs == {"retention.ms": "1000"}
    p = plan(explicit={0: [3, 1], 1: [1, 2]})
    assert p.assignment == {0: [3, 1], 1: [1, 2]} and p.replication_factor == 2


def test_topic_ids_are_kafka_uuids():
    rng = random.Random(3)
    ids = {new_topic_id(rng) for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and not i.startswith("-") and "=" not in i for i in ids)


def test_collision_and_unclean_override():
    assert collides("a.b", "a_b") and not collides("a.b", "a.b") and not collides("ab", "a_b")
    assert unclean_election_enabled({"unclean.leader.election.enable": "true"}, False)
    assert not unclean_election_enabled({"unclean.leader.election.enable": "false"}, True)
    assert unclean_election_enabled({}, True) and unclean_election_enabled(None, True)
    assert validate_topic_configs({"cleanup.policy": "delete,compact"})

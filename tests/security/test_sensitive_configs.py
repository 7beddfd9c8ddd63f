"""Secrets never leave a broker through DescribeConfigs (Kafka: PASSWORD configs are answered
``value=null, isSensitive=true``, synonyms included): the schema marks every credential key in
one place (common/config.py), and the pure describer (common/dynamic_config.py) that both
front-ends and the CLI print from withholds their values, static or dynamic, per broker or
cluster-wide, under a listener prefix too."""

from __future__ import annotations

import re

import pytest

from common.config import KEYS, build_config, is_sensitive
from common.dynamic_config import (
    ACCEPTED_WITHOUT_EFFECT,
    BROKER_DYNAMIC_CONFIGS,
    TOPIC_KEYS,
    describe_broker,
    describe_topic,
)

# A name that says it holds a secret; one naming where a secret is kept (a file, a location)
# or how it is encoded (a type, an algorithm) holds none itself.
SECRET_LIKE = re.compile(r"password|secret|digest|jaas|credential|token|\.key$|certificate")
NOT_A_SECRET = re.compile(r"\.(file|location|type|algorithm|class)$")

EVERY_NAME = sorted(set(KEYS) | set(ACCEPTED_WITHOUT_EFFECT) | set(BROKER_DYNAMIC_CONFIGS)
                    | set(TOPIC_KEYS))


@pytest.mark.parametrize("name", [n for n in EVERY_NAME
                                  if SECRET_LIKE.search(n) and not NOT_A_SECRET.search(n)])
def test_every_key_named_like_a_secret_is_sensitive_in_the_schema(name):
    assert is_sensitive(name)
    assert is_sensitive(f"listener.name.ssl.{name}")


def test_the_schema_marks_the_documented_inline_secrets():
    for name in ("zookeeper.auth.digest", "ssl.keystore.key", "ssl.key.password",
                 "ssl.keystore.certificate.chain", "ssl.truststore.certificates"):
        assert KEYS[name].sensitive, name
    for name in ("ssl.keystore.password", "ssl.truststore.password", "sasl.jaas.config",
                 "listener.name.sasl_ssl.plain.sasl.jaas.config", "some.plugin.password"):
        assert is_sensitive(name), name
    for name in ("ssl.keystore.location", "zookeeper.auth.digest.file", "min.insync.replicas",
                 "ssl.client.auth", "broker.id"):
        assert not is_sensitive(name), name


STATIC = build_config([
    ("broker.id", "1", "test"),
    ("zookeeper.auth.digest", "replog-cluster:s3cret", "test"),
    ("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----MIIE", "test"),
    ("ssl.key.password", "keypass", "test"),
    ("listener.name.ssl.ssl.key.password", "listenerpass", "test"),
])
SECRETS = ("s3cret", "MIIE", "keypass", "listenerpass", "dynpass", "jaaspass", "defpass")


def _leaks(entries) -> list[str]:
    out = []
    for e in entries:
        for v in (e.value, *(s.value for s in e.synonyms)):
            if v is not None and any(s in v for s in SECRETS):
                out.append(f"{e.name}={v}")
    return out


def test_a_brokers_description_withholds_every_secret_static_and_dynamic():
    per_broker = {"listener.name.ssl.ssl.keystore.password": "dynpass",
                  "listener.name.ssl.ssl.key.password": "dynpass",
                  "sasl.jaas.config": "x required password=jaaspass;",
                  "leader.replication.throttled.rate": "100"}
    default = {"leader.replication.throttled.rate": "50"}
    entries = describe_broker(per_broker, default, STATIC)
    assert _leaks(entries) == []
    by_name = {e.name: e for e in entries}
    for name in ("zookeeper.auth.digest", "ssl.keystore.key", "ssl.key.password",
                 "listener.name.ssl.ssl.key.password",
                 "listener.name.ssl.ssl.keystore.password", "sasl.jaas.config"):
        e = by_name[name]
        assert e.sensitive and e.value is None, name
        assert e.synonyms and all(s.value is None for s in e.synonyms), name
    # the rest is described as before
    rate = by_name["leader.replication.throttled.rate"]
    assert not rate.sensitive and rate.value == "100"
    assert [s.value for s in rate.synonyms][:2] == ["100", "50"]
    assert by_name["broker.id"].value == "1" and not by_name["broker.id"].sensitive


def test_the_cluster_wide_default_entity_withholds_its_secrets():
    default = {"sasl.jaas.config": "x required password=defpass;",
               "some.plugin.password": "defpass", "min.insync.replicas": "2"}
    entries = {e.name: e for e in describe_broker(None, default, STATIC)}
    assert _leaks(entries.values()) == []
    assert entries["sasl.jaas.config"].sensitive
    assert entries["some.plugin.password"].sensitive
    assert entries["min.insync.replicas"].value == "2"


def test_a_value_of_no_known_type_is_withheld():
    # written around the checks (by hand in ZooKeeper): Kafka's maybeSensitive treats a config
    # whose type it does not know as sensitive
    [e] = describe_broker({"custom.thing": "dynpass"}, {}, STATIC, ["custom.thing"])
    assert e.sensitive and e.value is None


def test_topic_configs_are_not_secrets():
    assert not any(e.sensitive for e in describe_topic({"retention.ms": "1"}, {}, {}, STATIC))

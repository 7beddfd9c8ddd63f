"""Which listeners speak Kafka's protocol (kafka.listener.names) and the rules around them:
replication stays on gRPC, so the inter-broker listener is never a Kafka one."""
from __future__ import annotations

import pytest

from common.config import build_config
from common.errors import ConfigError
from common.listeners import listener_config


def config(**props: str):
    return build_config([(k, v, "test") for k, v in props.items()])


def test_a_listener_named_kafka_speaks_kafka_without_a_protocol_map():
    lc = listener_config(config(listeners="PLAINTEXT://127.0.0.1:9092,KAFKA://127.0.0.1:9093"))
    assert [e.listener for e in lc.listeners if lc.is_kafka(e.listener)] == ["KAFKA"]
    assert lc.inter_broker_listener_name == "PLAINTEXT"
    assert config()["socket.request.max.bytes"] == 100 * 1024 * 1024  # Kafka's default


def test_the_default_inter_broker_listener_skips_kafka_listeners():
    lc = listener_config(config(**{
        "listeners": "EXTERNAL://127.0.0.1:9093,INTERNAL://127.0.0.1:9092",
        "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
        "kafka.listener.names": "external"}))
    assert lc.is_kafka("EXTERNAL") and not lc.is_kafka("INTERNAL")
    assert lc.inter_broker_listener_name == "INTERNAL"


def test_replication_cannot_use_a_kafka_listener():
    with pytest.raises(ConfigError, match="inter.broker.listener.name.*Kafka's protocol"):
        config(**{"listeners": "PLAINTEXT://127.0.0.1:9092,KAFKA://127.0.0.1:9093",
                  "inter.broker.listener.name": "KAFKA"})
    with pytest.raises(ConfigError, match="replication needs a gRPC one"):
        config(listeners="KAFKA://127.0.0.1:9093")

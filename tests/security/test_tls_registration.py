"""A broker registration's listener_security_protocol_map names each listener's protocol
(Kafka's /brokers/ids/<id> JSON), PLAINTEXT when not SSL; older registrations still read."""

from __future__ import annotations

import json

import pytest

from common.listeners import EndPoint
from common.zk_layout import BrokerRegistration, MalformedZnode, decode_broker, encode_broker


def test_the_protocol_map_is_written_and_read_back():
    reg = BrokerRegistration(1, "h", 9092, endpoints=(
        EndPoint("SSL", "h", 9092), EndPoint("KAFKA", "h", 9093), EndPoint("EXT", "h", 9094)),
        security_protocols=(("KAFKA", "SSL"), ("SSL", "SSL")))
    data = encode_broker(reg)
    assert json.loads(data)["listener_security_protocol_map"] == {
        "SSL": "SSL", "KAFKA": "SSL", "EXT": "PLAINTEXT"}
    assert decode_broker(1, data) == reg


def test_a_plaintext_registration_is_unchanged():
    reg = BrokerRegistration(1, "h", 9092, endpoints=(EndPoint("PLAINTEXT", "h", 9092),))
    data = encode_broker(reg)
    assert json.loads(data)["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert decode_broker(1, data) == reg
    o = json.loads(data)
    del o["listener_security_protocol_map"]  # written by something older
    assert decode_broker(1, json.dumps(o).encode()) == reg


@pytest.mark.parametrize("bad", [[], "SSL", {"SSL": 1}])
def test_a_malformed_protocol_map_is_refused(bad):
    o = json.loads(encode_broker(BrokerRegistration(1, "h", 9092)))
    o["listener_security_protocol_map"] = bad
    with pytest.raises(MalformedZnode):
        decode_broker(1, json.dumps(o).encode())

"""Listeners (KIP-103): config parsing and validation, the registration and /controller JSON
with one endpoint per listener, and the endpoints the controller sends to brokers."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from broker.servicer import update_metadata_request
from common import zk_layout as zl
from common.config import build_config, load_config
from common.controller_requests import BrokerNode
from common.errors import ConfigError
from common.listeners import EndPoint, advertised_endpoints, listener_config
from common.rpc import replog_pb2 as pb
from controller.request_pb import broker_endpoint, controller_endpoint, endpoint_on_listener

REPO = Path(__file__).resolve().parents[1]
TWO = {"listeners": "INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092",
       "advertised.listeners": "INTERNAL://broker-1:9092,EXTERNAL://127.0.0.1:19092",
       "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"}


def config(**props: str):
    return build_config([(k.replace("_", "."), v, "test") for k, v in props.items()])


def two(**extra: str):
    return build_config([(k, v, "test") for k, v in {**TWO, **extra}.items()])


# ----------------------------------------------------------------------------- config

def test_the_unnamed_form_is_one_plaintext_listener():
    for cfg in (config(), config(listeners="127.0.0.1:9092"),
                config(listeners="PLAINTEXT://127.0.0.1:9092")):
        lc = listener_config(cfg)
        assert lc.listeners == (EndPoint("PLAINTEXT", "127.0.0.1", 9092),)
        assert lc.advertised == lc.listeners
        assert lc.inter_broker_listener_name == "PLAINTEXT"
    assert listener_config(config(listeners=":0")).listeners == (
        EndPoint("PLAINTEXT", "0.0.0.0", 0),)


def test_named_listeners_with_advertised_addresses_and_inter_broker_listener():
    lc = listener_config(two())
    assert [str(e) for e in lc.listeners] == ["INTERNAL://0.0.0.0:9092",
                                              "EXTERNAL://0.0.0.0:19092"]
    assert lc.advertised_for("EXTERNAL") == EndPoint("EXTERNAL", "127.0.0.1", 19092)
    # No PLAINTEXT listener: the first advertised one carries inter-broker traffic.
    assert lc.inter_broker_listener_name == "INTERNAL"
    assert listener_config(two(**{"inter.broker.listener.name": "external"})) \
        .inter_broker_listener_name == "EXTERNAL"
    # Kafka's default: the listener named PLAINTEXT, wherever it is in the list.
    lc = listener_config(config(listeners="EXTERNAL://:19092,PLAINTEXT://:9092",
                                listener_security_protocol_map="EXTERNAL:PLAINTEXT,"
                                                               "PLAINTEXT:PLAINTEXT"))
    assert lc.inter_broker_listener_name == "PLAINTEXT"


def test_advertised_endpoints_fill_port_zero_and_wildcard_hosts():
    lc = listener_config(config(listeners="INTERNAL://0.0.0.0:0,EXTERNAL://127.0.0.1:0",
                                advertised_listeners="INTERNAL://:0,EXTERNAL://ext:19092",
                                listener_security_protocol_map="INTERNAL:PLAINTEXT,"
                                                               "EXTERNAL:PLAINTEXT"))
    assert advertised_endpoints(lc, {"INTERNAL": 4000, "EXTERNAL": 4001}, "box") == (
        EndPoint("INTERNAL", "box", 4000), EndPoint("EXTERNAL", "ext", 19092))


@pytest.mark.parametrize("props, key, words", [
    ({"listeners": "A://:1,A://:2"}, "listeners", "listener name A is used more than once"),
    ({"listeners": "a://:1,A://:2"}, "listeners", "listener name A is used more than once"),
    ({"listeners": "INTERNAL://:1,EXTERNAL://:1",
      "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"},
     "listeners", "port 1 is used by more than one listener"),
    ({"listeners": "INTERNAL://host"}, "listeners", "not of the form [NAME://]host:port"),
    ({"listeners": "INTERNAL://:9092"}, "listener.security.protocol.map",
     "no security protocol for listener INTERNAL"),
    ({"listeners": "SASL_SSL://:9093"}, "listener.security.protocol.map",
     "listener SASL_SSL uses security protocol SASL_SSL; replog serves PLAINTEXT and SSL"),
    ({"listeners": "INTERNAL://:9092",
      "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT"},
     "listener.security.protocol.map", "security protocol SASL_PLAINTEXT is not supported"),
    ({"listeners": "SSL://:9093"}, "ssl.keystore.location",
     "listener SSL is SSL but has no keystore"),
    ({"listeners": "INTERNAL://:9092", "listener.security.protocol.map": "INTERNAL:SSL"},
     "ssl.keystore.location", "listener INTERNAL is SSL but has no keystore"),
    ({"listeners": "INTERNAL://:9092", "listener.security.protocol.map": "INTERNAL:TLS"},
     "listener.security.protocol.map", "unknown security protocol 'TLS'"),
    ({**TWO, "advertised.listeners": "INTERNAL://b:9092,OUTSIDE://h:1"},
     "advertised.listeners", "listener OUTSIDE is not in listeners (INTERNAL, EXTERNAL)"),
    ({**TWO, "advertised.listeners": "b:9092"},
     "advertised.listeners", "listener PLAINTEXT is not in listeners (INTERNAL, EXTERNAL)"),
    ({**TWO, "advertised.listeners": "A://h:1,A://h:2"},
     "advertised.listeners", "listener name A is used more than once"),
    ({**TWO, "inter.broker.listener.name": "REPLICATION"}, "inter.broker.listener.name",
     "REPLICATION is not a listener in advertised.listeners (INTERNAL, EXTERNAL)"),
    ({**TWO, "advertised.listeners": "EXTERNAL://h:1", "inter.broker.listener.name": "INTERNAL"},
     "inter.broker.listener.name", "INTERNAL is not a listener in advertised.listeners"),
])
def test_bad_listener_settings_are_one_line_naming_the_key(props, key, words):
    with pytest.raises(ConfigError) as e:
        build_config([(k, v, "f.properties:3") for k, v in props.items()])
    message = str(e.value)
    assert f"'{key}'" in message and words in message, message
    assert "\n" not in message


def test_a_bad_listener_config_stops_the_broker_with_one_line(tmp_path):
    path = tmp_path / "broker.properties"
    path.write_text("broker.id=1\nlisteners=INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0\n"
                    "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT\n"
                    "inter.broker.listener.name=REPLICATION\n")
    p = subprocess.run([sys.executable, "-m", "admin.cli", "broker", "--config", str(path)],
                       capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "'inter.broker.listener.name'" in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def test_listener_settings_load_from_a_properties_file(tmp_path):
    path = tmp_path / "b.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in TWO.items()))
    cfg = load_config(str(path), overrides=["inter.broker.listener.name=EXTERNAL"])
    assert listener_config(cfg).inter_broker_listener_name == "EXTERNAL"


# ----------------------------------------------------------------------------- ZooKeeper JSON

def test_registration_has_one_endpoint_per_listener_in_kafkas_shape():
    eps = (EndPoint("INTERNAL", "broker-1", 9092), EndPoint("EXTERNAL", "127.0.0.1", 19092))
    reg = zl.BrokerRegistration(1, "broker-1", 9092, "r1", endpoints=eps)
    o = json.loads(zl.encode_broker(reg))
    assert o["endpoints"] == ["INTERNAL://broker-1:9092", "EXTERNAL://127.0.0.1:19092"]
    assert o["listener_security_protocol_map"] == {"INTERNAL": "PLAINTEXT",
                                                   "EXTERNAL": "PLAINTEXT"}
    assert (o["host"], o["port"], o["version"]) == ("broker-1", 9092, 5)
    back = zl.decode_broker(1, zl.encode_broker(reg), epoch=7)
    assert back.endpoints == eps and back.address == "broker-1:9092" and back.epoch == 7


def test_old_and_kafka_written_registrations_still_decode():
    # replog before named listeners: one PLAINTEXT endpoint (its encoder never changed shape).
    old = zl.decode_broker(2, json.dumps({
        "version": 5, "host": "h", "port": 9092, "endpoints": ["PLAINTEXT://h:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}}).encode())
    assert old.address == "h:9092"
    assert old.listener_endpoints == (EndPoint("PLAINTEXT", "h", 9092),)
    # No endpoints at all: host/port are the one PLAINTEXT listener.
    bare = zl.decode_broker(3, b'{"version":4,"host":"h","port":1}')
    assert bare.endpoints == () and bare.listener_endpoints == (EndPoint("PLAINTEXT", "h", 1),)
    # Kafka writes host null / port -1 when no listener is PLAINTEXT.
    kafka = zl.decode_broker(4, json.dumps({
        "version": 5, "host": None, "port": -1, "endpoints": ["CLIENT://c:9092"]}).encode())
    assert kafka.address == "c:9092"
    # An unchanged registration without named listeners encodes as before.
    plain = zl.BrokerRegistration(5, "127.0.0.1", 4000)
    assert json.loads(zl.encode_broker(plain))["endpoints"] == ["PLAINTEXT://127.0.0.1:4000"]


def test_controller_znode_carries_its_listeners():
    eps = (EndPoint("INTERNAL", "controller-1", 9093), EndPoint("EXTERNAL", "127.0.0.1", 19095))
    info = zl.ControllerInfo(1, "controller-1", 9093, 5, eps)
    assert zl.decode_controller(zl.encode_controller(info)) == info
    old = zl.decode_controller(b'{"version":1,"brokerid":2,"timestamp":"1","host":"h","port":3}')
    assert old.endpoints == () and old.address == "h:3"
    assert "endpoints" not in json.loads(zl.encode_controller(old))


# ----------------------------------------------------------------------------- controller -> broker

def test_update_metadata_carries_every_listener_and_the_cache_picks_one():
    eps = (EndPoint("INTERNAL", "broker-1", 9092), EndPoint("EXTERNAL", "127.0.0.1", 19092))
    reg = zl.BrokerRegistration(1, "broker-1", 9092, "r1", endpoints=eps)
    ctl = zl.ControllerInfo(9, "controller-1", 9093, 0,
                            (EndPoint("INTERNAL", "controller-1", 9093),))
    wire = pb.UpdateMetadataRequest(controller_id=9, controller_epoch=1, broker_epoch=1,
                                    live_brokers=[broker_endpoint(reg)],
                                    controller=controller_endpoint(ctl))
    wire = pb.UpdateMetadataRequest.FromString(wire.SerializeToString())
    assert wire.live_brokers[0].listener == "INTERNAL"
    req = update_metadata_request(wire)
    b = req.live_brokers[0]
    # host/port stay the inter-broker listener's: followers fetch there.
    assert b.address == "broker-1:9092"
    assert b.for_listener("EXTERNAL") == BrokerNode(1, "127.0.0.1", 19092, "r1",
                                                      listener="EXTERNAL")
    assert b.for_listener("OTHER") is None
    assert req.controller.for_listener("INTERNAL").address == "controller-1:9093"
    assert req.controller.for_listener("EXTERNAL") is None
    # From a controller that predates listener names: one endpoint for every listener.
    legacy = BrokerNode(2, "h", 1)
    assert legacy.for_listener("EXTERNAL") is legacy


def test_describe_cluster_endpoint_on_a_listener():
    eps = (EndPoint("INTERNAL", "broker-1", 9092), EndPoint("EXTERNAL", "127.0.0.1", 19092))
    e = endpoint_on_listener(1, eps, "EXTERNAL", "r1")
    assert (e.host, e.port, e.listener, e.rack) == ("127.0.0.1", 19092, "EXTERNAL", "r1")
    assert endpoint_on_listener(1, eps, "PLAINTEXT") is None

"""Every znode JSON the controller and the brokers read, fuzzed (common/zk_layout.py).

Property: a decoder returns its value or raises MalformedZnode (a ValueError), never anything
else - the reader logs that znode and skips or refuses it, so no znode content stops a
controller or a broker. Inputs: arbitrary bytes, arbitrary JSON, and each valid encoding with
one value replaced or removed (the near misses random bytes rarely reach). A decoded value holds
only what a request can carry (int32 ids and partitions), and what encodes decodes to itself.

The controller-level test with a real ZooKeeper is tests/security/test_fuzz_controller_znodes.py.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from common import zk_layout as L
from common.listeners import EndPoint
from tests.security.fuzzing import FUZZ, JSON_VALUES, byte_mutations, mutations

INT32 = range(2**31)

_BROKER = L.BrokerRegistration(
    1, "h1", 9092, "r1", (L.LogDirInfo("/d0", "id0"), L.LogDirInfo("/d1", "id1", False)),
    False, "http://h1:9404/metrics", 17, -1,
    (EndPoint("INTERNAL", "h1", 9092), EndPoint("EXTERNAL", "h2", 19092)))
_TOPIC = L.TopicAssignment("t", "tid", {0: [1, 2, 3], 1: [2, 3, 1]}, {0: [3]}, {1: [1]})
_STATE = L.LeaderAndIsr(1, 4, (1, 2), 3, 0, (3,), (4,), L.LEADER_RECOVERING)
_RESTART = L.RestartEntry(1, "/d0", (("t", 0), ("u", 2)), 77, (4, 9))

# (name, decoder of bytes, one valid encoding)
DECODERS = [
    ("cluster_id", L.decode_cluster_id, L.encode_cluster_id("abc")),
    ("controller", L.decode_controller,
     L.encode_controller(L.ControllerInfo(3, "h", 9093, 5, (EndPoint("INTERNAL", "h", 9093),)))),
    ("controller_epoch", L.decode_controller_epoch, L.encode_controller_epoch(12)),
    ("broker", lambda d: L.decode_broker(1, d, 5), L.encode_broker(_BROKER)),
    ("topic", lambda d: L.decode_topic("t", d), L.encode_topic(_TOPIC)),
    ("partition_state", lambda d: L.decode_partition_state(d, 7, "t-0"),
     L.encode_partition_state(_STATE)),
    ("topic_config", L.decode_topic_config,
     L.encode_topic_config({"min.insync.replicas": "2", "retention.ms": "100"})),
    ("config_change", L.decode_config_change, L.encode_config_change("topics", "t")),
    ("reassignment", L.decode_reassignment,
     L.encode_reassignment([("t", 0, [1, 2]), ("u", 3, [3])])),
    ("restart_entry", L.decode_restart_entry, L.encode_restart_entry(_RESTART)),
    ("lost_replicas", L.decode_lost_replicas,
     L.encode_lost_replicas({"/d0": {("t", 0), ("t", 1)}, "/d1": set()})),
]
IDS = [d[0] for d in DECODERS]


def _decodes_or_refuses(decode, data: bytes):
    try:
        out = decode(data)
    except L.MalformedZnode as e:
        assert str(e), "a refusal names what is wrong"
        return None
    _holds_only_request_values(out)
    return out


def _holds_only_request_values(out) -> None:
    """Ids, partitions and epochs that fit the int32 fields of the requests they go into."""
    if isinstance(out, L.TopicAssignment):
        for m in (out.partitions, out.adding_replicas, out.removing_replicas):
            for p, r in m.items():
                assert p in INT32 and all(b in INT32 for b in r)
    elif isinstance(out, L.LeaderAndIsr):
        assert out.leader in range(-1, 2**31) and out.leader_epoch in INT32
        assert all(b in INT32 for b in out.isr + out.elr + out.last_known_elr)
        assert out.controller_epoch in INT32
    elif isinstance(out, L.BrokerRegistration):
        assert 0 <= out.port <= 65535 and isinstance(out.host, str)
        assert all(isinstance(d.path, str) for d in out.log_dirs)
    elif isinstance(out, L.ControllerInfo):
        assert out.controller_id in INT32
    elif isinstance(out, L.RestartEntry):
        assert out.broker in INT32 and all(p in INT32 for _, p in out.partitions)
    elif isinstance(out, list):  # reassignment
        for _t, p, r in out:
            assert p in INT32 and all(b in INT32 for b in r)
    elif isinstance(out, dict) and out and isinstance(next(iter(out.values())), str):
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in out.items())


@pytest.mark.parametrize("name,decode,valid", DECODERS, ids=IDS)
def test_the_valid_encoding_decodes(name, decode, valid):
    assert _decodes_or_refuses(decode, valid) is not None


@pytest.mark.parametrize("name,decode,valid", DECODERS, ids=IDS)
@FUZZ
@given(data=st.binary(max_size=256))
@example(data=b"[" * 100_000)  # deeper than the interpreter's stack
@example(data=b'{"a":' * 50_000)
@example(data=b"\xff\xfe")
@example(data=b"1e999")
def test_arbitrary_bytes(name, decode, valid, data):
    _decodes_or_refuses(decode, data)


@pytest.mark.parametrize("name,decode,valid", DECODERS, ids=IDS)
@FUZZ
@given(value=JSON_VALUES)
def test_arbitrary_json(name, decode, valid, value):
    _decodes_or_refuses(decode, json.dumps(value).encode())


@pytest.mark.parametrize("name,decode,valid", DECODERS, ids=IDS)
@FUZZ
@given(data=st.data())
def test_valid_encoding_with_one_value_changed(name, decode, valid, data):
    doc = json.loads(valid)
    if not isinstance(doc, (dict, list)):
        doc = {"value": doc}
    _decodes_or_refuses(decode, json.dumps(data.draw(mutations(doc))).encode())


@pytest.mark.parametrize("name,decode,valid", DECODERS, ids=IDS)
@FUZZ
@given(data=st.data())
def test_valid_encoding_with_bytes_changed(name, decode, valid, data):
    _decodes_or_refuses(decode, data.draw(byte_mutations(valid)))


# ------------------------------------------------------------------ what the fuzzing found

@pytest.mark.parametrize("topic", ["a b", "..", "x" * 250, "t/../u", "é"])
def test_a_topic_znode_with_an_illegal_name_is_refused(topic):
    with pytest.raises(L.MalformedZnode, match="illegal|cannot"):
        L.decode_topic(topic, L.encode_topic(_TOPIC))


_TOPIC_CASES = [  # a string for replicas, no number, negative, beyond int32, a broker
    # twice, no replicas, a list for the map, no partitions, a bool, a float
    b'{"version":3,"partitions":{"0":"123"}}',
    b'{"version":3,"partitions":{"x":[1]}}',
    b'{"version":3,"partitions":{"-1":[1]}}',
    b'{"version":3,"partitions":{"0":[2147483648]}}',
    b'{"version":3,"partitions":{"0":[1,1]}}',
    b'{"version":3,"partitions":{"0":[]}}',
    b'{"version":3,"partitions":[]}',
    b'{"version":3}',
    b'{"version":3,"partitions":{"0":[true]}}',
    b'{"version":3,"partitions":{"0":[1.5]}}',
]
_STATE_CASES = [
    b'{"leader":1,"leader_epoch":1,"isr":"12","controller_epoch":1}',
    b'{"leader":1,"leader_epoch":1,"isr":[1],"controller_epoch":1e999}',
    b'{"leader":-5,"leader_epoch":1,"isr":[1],"controller_epoch":1}',
    b'{"leader":1,"leader_epoch":1,"isr":[1],"controller_epoch":1,"elr":null}',
    b'{"leader":1,"leader_epoch":1,"isr":[1],"controller_epoch":1,"leader_recovery_state":7}',
    b'{"leader":1,"leader_epoch":99999999999,"isr":[1],"controller_epoch":1}',
]


def _topic(d):
    return L.decode_topic("t", d)


def _state(d):
    return L.decode_partition_state(d, 0)


@pytest.mark.parametrize("decode,data", [(_topic, d) for d in _TOPIC_CASES] + [
    (_state, d) for d in _STATE_CASES] + [
    (L.decode_controller_epoch, b"x"),
    (L.decode_controller_epoch, b"\xff"),
    (L.decode_controller_epoch, b"-3"),
    (L.decode_cluster_id, b'{"version":"1"}'),
    (L.decode_cluster_id, b'{"id":null}'),
    (L.decode_controller, b'{"brokerid":"x"}'),
    (L.decode_controller, b'{"brokerid":1,"endpoints":[1]}'),
    (lambda d: L.decode_broker(1, d), b'{"host":"h","port":"99999"}'),
    (lambda d: L.decode_broker(1, d), b'{"host":"h","port":1,"log_dirs":[{"x":1}]}'),
    (lambda d: L.decode_broker(1, d), b'{"host":"h","port":1,"offline_log_dirs":[[]]}'),
    (L.decode_topic_config, b'{"config":[]}'),
    (L.decode_topic_config, b'{"config":{"a":{"b":1}}}'),
    (L.decode_config_change, b'{"version":2,"entity_path":["topics"]}'),
    (L.decode_reassignment, b'{"partitions":[{"topic":"t","partition":0,"replicas":[-1]}]}'),
    (L.decode_reassignment, b'{"partitions":[{"topic":"a b","partition":0,"replicas":[1]}]}'),
    (L.decode_restart_entry, b'{"broker":"\xc2\xb2","partitions":[]}'),
    (L.decode_restart_entry, b'{"broker":1,"partitions":[{"topic":"t","partitions":["\xc2\xb2"]}]}'),
    (L.decode_lost_replicas, b'{"log_dirs":{"/d":[{"topic":"t","partitions":[1e5]}]}}'),
], ids=range(34))
def test_what_the_fuzzing_found_is_refused(decode, data):
    with pytest.raises(L.MalformedZnode):
        decode(data)


def test_a_partition_state_without_elr_still_decodes():
    """Readers of the state written before ELR (and Kafka's own) keep working."""
    s = L.decode_partition_state(
        b'{"version":1,"leader":2,"leader_epoch":3,"isr":[2,1],"controller_epoch":4}', 9)
    assert (s.leader, s.leader_epoch, s.isr, s.elr, s.partition_epoch) == (2, 3, (2, 1), (), 9)


def test_roundtrips():
    assert L.decode_broker(1, L.encode_broker(_BROKER), -1) == _BROKER
    assert L.decode_topic("t", L.encode_topic(_TOPIC)) == _TOPIC
    assert L.decode_partition_state(L.encode_partition_state(_STATE), 0) == _STATE
    assert L.decode_restart_entry(L.encode_restart_entry(_RESTART)) == _RESTART


@pytest.mark.parametrize("node", ["config_change_²", "config_change_١", "config_change_",
                                  "config_change_-1", "other_1"])
def test_what_the_fuzzing_found_a_change_notification_name_that_is_no_sequence(node):
    """A /config/changes child any client can create: '²' passed str.isdigit() and int()
    raised; '١' was read as sequence 1."""
    assert L.config_change_seq(node) is None


def test_quoted_numbers_in_a_restart_entry_are_ascii_digits():
    e = L.decode_restart_entry(
        b'{"broker":"2","log_dir":"/d","partitions":[{"topic":"t","partitions":["3"]}]}')
    assert (e.broker, e.partitions) == (2, (("t", 3),))
    for bad in ('"\\u0661"', '"\\u00b2"'):  # '١' and '²'
        with pytest.raises(L.MalformedZnode):
            L.decode_restart_entry(b'{"broker":' + bad.encode() + b',"partitions":[]}')

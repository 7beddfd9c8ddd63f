"""__consumer_offsets records (broker/group/records.py) against bytes built by hand from Kafka's
schemas (group-coordinator/src/main/resources/common/message/OffsetCommitKey.json, ...), every
value version, tombstones, and Kafka's partitionFor with Java's String.hashCode."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.group import consumer_protocol as cp
from broker.group.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    UnknownKey,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
    java_string_hash,
    partition_for,
)


def s16(s: str) -> bytes:  # a non-flexible string: int16 length, UTF-8
    return struct.pack(">h", len(s.encode())) + s.encode()


def cs(s: str | None) -> bytes:  # a compact (flexible) string: uvarint length + 1
    return b"\x00" if s is None else bytes([len(s.encode()) + 1]) + s.encode()


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


# ------------------------------------------------------------------------------------ keys

def test_offset_commit_key_v1_bytes():
    raw = i16(1) + s16("g1") + s16("orders") + i32(3)
    assert encode_key(OffsetCommitKey("g1", "orders", 3)) == raw
    assert decode_key(raw) == OffsetCommitKey("g1", "orders", 3)


def test_offset_commit_key_v0_reads_as_v1_layout():
    raw = i16(0) + s16("g") + s16("t") + i32(0)
    assert decode_key(raw) == OffsetCommitKey("g", "t", 0, version=0)
    assert encode_key(OffsetCommitKey("g", "t", 0, version=0)) == raw


def test_group_metadata_key_v2_bytes():
    raw = i16(2) + s16("my-group")
    assert encode_key(GroupMetadataKey("my-group")) == raw
    assert decode_key(raw) == GroupMetadataKey("my-group")


def test_a_kip848_record_key_is_unknown_and_skipped():
    # ConsumerGroupMetadataKey is key version 3: not a classic-protocol record
    raw = i16(3) + s16("g")
    assert decode_key(raw) == UnknownKey(3)
    assert decode_record(raw, b"\x00\x00whatever") == UnknownKey(3)


# ------------------------------------------------------------------------------------ values

def test_offset_commit_value_v3_is_what_replog_writes():
    v = OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1_700_000_000_000,
                          leader_epoch=7)
    raw = i16(3) + i64(42) + i32(7) + s16("m") + i64(1_700_000_000_000)
    assert encode_value(v) == raw
    assert decode_value(OffsetCommitKey("g", "t", 0), raw) == v


@pytest.mark.parametrize("version,raw,expected", [
    (0, i16(0) + i64(5) + s16("") + i64(100),
     OffsetCommitValue(5, "", 100, version=0)),
    (1, i16(1) + i64(5) + s16("x") + i64(100) + i64(200),
     OffsetCommitValue(5, "x", 100, expire_timestamp=200, version=1)),
    (2, i16(2) + i64(5) + s16("x") + i64(100),
     OffsetCommitValue(5, "x", 100, version=2)),
    (4, i16(4) + i64(5) + i32(2) + cs("x") + i64(100) + b"\x00",
     OffsetCommitValue(5, "x", 100, leader_epoch=2, version=4)),
])
def test_offset_commit_value_every_version(version, raw, expected):
    assert decode_value(OffsetCommitKey("g", "t", 0), raw) == expected
    assert encode_value(expected) == raw


def test_flexible_value_skips_unknown_tagged_fields():
    # v4 with one tagged field (tag 9, 3 bytes) a newer Kafka may add (KIP-915)
    raw = i16(4) + i64(5) + i32(-1) + cs("") + i64(1) + b"\x01" + b"\x09\x03abc"
    assert decode_value(OffsetCommitKey("g", "t", 0), raw) == \
        OffsetCommitValue(5, "", 1, version=4)


def _member_v3(instance: str | None) -> bytes:
    return (s16("c-1") + (i16(-1) if instance is None else s16(instance)) + s16("c")
            + s16("/10.0.0.1") + i32(300000) + i32(45000)
            + i32(3) + b"sub" + i32(2) + b"as")


def test_group_metadata_value_v3_bytes():
    v = GroupMetadataValue(
        protocol_type="consumer", generation=4, protocol="range", leader="c-1",
        current_state_timestamp=1234,
        members=(MemberMetadata("c-1", "c", "/10.0.0.1", 45000, b"sub", b"as", "i-1", 300000),))
    raw = (i16(3) + s16("consumer") + i32(4) + s16("range") + s16("c-1") + i64(1234)
           + i32(1) + _member_v3("i-1"))
    assert encode_value(v) == raw
    assert decode_value(GroupMetadataKey("g"), raw) == v


def test_empty_group_metadata_has_null_protocol_and_leader():
    # newEmptyGroupMetadataRecord / a group that went Empty: protocol and leader null
    v = GroupMetadataValue("consumer", 5, None, None, (), 99)
    raw = i16(3) + s16("consumer") + i32(5) + i16(-1) + i16(-1) + i64(99) + i32(0)
    assert encode_value(v) == raw
    assert decode_value(GroupMetadataKey("g"), raw) == v


def test_group_metadata_value_v0_v1_v2():
    m0 = s16("m") + s16("c") + s16("h") + i32(10000) + i32(1) + b"s" + i32(1) + b"a"
    raw0 = i16(0) + s16("consumer") + i32(1) + s16("range") + s16("m") + i32(1) + m0
    assert decode_value(GroupMetadataKey("g"), raw0) == GroupMetadataValue(
        "consumer", 1, "range", "m", (MemberMetadata("m", "c", "h", 10000, b"s", b"a"),),
        version=0)
    m1 = s16("m") + s16("c") + s16("h") + i32(60000) + i32(10000) + i32(1) + b"s" + i32(0)
    raw1 = i16(1) + s16("consumer") + i32(1) + s16("range") + s16("m") + i32(1) + m1
    v1 = decode_value(GroupMetadataKey("g"), raw1)
    assert v1.members[0].rebalance_timeout == 60000 and v1.members[0].assignment == b""
    raw2 = i16(2) + s16("") + i32(0) + i16(-1) + i16(-1) + i64(77) + i32(0)
    assert decode_value(GroupMetadataKey("g"), raw2) == GroupMetadataValue(
        "", 0, None, None, (), 77, version=2)
    for raw in (raw0, raw1, raw2):
        assert encode_value(decode_value(GroupMetadataKey("g"), raw)) == raw


def test_group_metadata_value_v4_flexible():
    member = (cs("m") + cs(None) + cs("c") + cs("h") + i32(-1) + i32(10000)
              + b"\x02s" + b"\x01" + b"\x00")
    raw = (i16(4) + cs("consumer") + i32(2) + cs("range") + cs("m") + i64(5)
           + b"\x02" + member + b"\x00")
    v = decode_value(GroupMetadataKey("g"), raw)
    assert v == GroupMetadataValue("consumer", 2, "range", "m",
                                   (MemberMetadata("m", "c", "h", 10000, b"s", b""),), 5,
                                   version=4)
    assert encode_value(v) == raw


# ------------------------------------------------------------------------------------ tombstones

def test_tombstones_have_no_value():
    rec = CoordinatorRecord(OffsetCommitKey("g", "t", 1))
    assert rec.tombstone and rec.encode() == (i16(1) + s16("g") + s16("t") + i32(1), None)
    assert decode_record(*CoordinatorRecord(GroupMetadataKey("g")).encode()) == \
        CoordinatorRecord(GroupMetadataKey("g"), None)


# ------------------------------------------------------------------------------------ bad bytes

@pytest.mark.parametrize("raw,message", [
    (b"\x00", "version runs past the end"),
    (i16(1) + s16("g") + i16(5) + b"ab", "topic runs past the end"),
    (i16(-2) + s16("g"), "negative version"),
])
def test_bad_keys_get_one_line(raw, message):
    with pytest.raises(RecordFormatError, match=message):
        decode_key(raw)


@pytest.mark.parametrize("raw,message", [
    (i16(5) + i64(1), "unsupported version 5"),
    (i16(3) + i64(1) + i32(0) + i16(-1) + i64(0), "metadata is null"),
    (i16(4) + i64(1) + i32(0) + b"\xff\xff\xff\xff\xff\x01", "longer than 5 bytes"),
    (i16(3) + i64(1) + i32(0) + s16("x"), "commitTimestamp runs past the end"),
])
def test_bad_offset_values_get_one_line(raw, message):
    with pytest.raises(RecordFormatError, match=message):
        decode_value(OffsetCommitKey("g", "t", 0), raw)
    assert "\n" not in message


def test_bad_group_value_gets_one_line():
    raw = i16(3) + s16("consumer") + i32(1) + i16(-1) + i16(-1) + i64(0) + i32(1) + s16("m")
    with pytest.raises(RecordFormatError, match="GroupMetadataValue: groupInstanceId runs past"):
        decode_value(GroupMetadataKey("g"), raw)


# ------------------------------------------------------------------------------------ round trips

_text = st.text(max_size=12)


@given(st.builds(OffsetCommitValue, offset=st.integers(-1, 2**63 - 1), metadata=_text,
                 commit_timestamp=st.integers(0, 2**62), leader_epoch=st.integers(-1, 2**31 - 1),
                 expire_timestamp=st.integers(-1, 2**62), version=st.integers(0, 4)))
def test_offset_values_round_trip(v):
    got = decode_value(OffsetCommitKey("g", "t", 0), encode_value(v))
    # fields a version lacks read back as their defaults
    assert got.offset == v.offset and got.metadata == v.metadata and got.version == v.version
    assert got.leader_epoch == (v.leader_epoch if v.version >= 3 else -1)
    assert got.expire_timestamp == (v.expire_timestamp if v.version == 1 else -1)


_member = st.builds(MemberMetadata, member_id=_text, client_id=_text, client_host=_text,
                    session_timeout=st.integers(0, 2**31 - 1), subscription=st.binary(max_size=20),
                    assignment=st.binary(max_size=20),
                    group_instance_id=st.none() | _text, rebalance_timeout=st.integers(-1, 10**6))


@given(_text, st.integers(0, 2**31 - 1), st.none() | _text, st.none() | _text,
       st.lists(_member, max_size=3), st.integers(-1, 2**40))
def test_group_values_round_trip_at_v3_and_v4(ptype, gen, protocol, leader, members, ts):
    for version in (3, 4):
        v = GroupMetadataValue(ptype, gen, protocol, leader, tuple(members), ts, version=version)
        assert decode_value(GroupMetadataKey("g"), encode_value(v)) == v


# ------------------------------------------------------------------------------------ partitionFor

def test_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2**31   # the famous Integer.MIN_VALUE
    # outside the BMP: two UTF-16 code units (0xD83D, 0xDE00), as Java counts them
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00


def test_partition_for_is_kafkas():
    # "my-group".hashCode() = -1906497762; Utils.abs -> 1906497762; % 50 = 12 (masking the
    # sign bit instead, as some ports do, would give 36)
    assert partition_for("my-group", 50) == 12
    assert partition_for("console-consumer-1", 50) == 35782224 % 50
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    with pytest.raises(ValueError, match="offsets.topic.num.partitions"):
        partition_for("g", 0)


# ------------------------------------------------------------------------------------ consumer protocol

def test_subscription_topics_parse_from_every_version():
    for version in (0, 1, 2, 3):
        data = cp.encode_subscription(["a", "b"], b"ud", owned={"a": [0]}, version=version)
        assert cp.subscribed_topics(data) == {"a", "b"}
    raw = i16(0) + i32(1) + s16("orders") + i32(-1)  # v0 by hand, null user data
    assert cp.encode_subscription(["orders"], version=0) == raw
    assert cp.subscribed_topics(b"\x00") is None
    assert cp.subscribed_topics(b"") is None


def test_subscription_decodes_owned_partitions():
    data = cp.encode_subscription(["t"], b"x", owned={"t": [1, 2]}, generation=4, version=2)
    assert cp.decode_subscription(data) == (["t"], {"t": [1, 2]})
    assert cp.decode_subscription(cp.encode_subscription(["t"], version=0)) == (["t"], {})
    assert cp.decode_subscription(b"\x00\x01") is None


def test_assignment_round_trip():
    data = cp.encode_assignment({"t": [0, 2]})
    assert data == i16(1) + i32(1) + s16("t") + i32(2) + i32(0) + i32(2) + i32(-1)
    assert cp.decode_assignment(data) == {"t": [0, 2]}
    assert cp.decode_assignment(b"") == {}
    assert cp.decode_assignment(b"\x00\x01\x00") is None

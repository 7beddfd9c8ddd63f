"""`__consumer_offsets` records in Kafka's own schemas, so Kafka's tools read replog's log and
replog reads Kafka's (group-coordinator/src/main/resources/common/message/*.json).

A record's key and value each start with an int16 version (Kafka's CoordinatorRecordSerde,
MessageUtil.toVersionPrefixedBytes). The key version names the record type:

    key version 0, 1   OffsetCommitKey     group, topic, partition          (same layout)
    key version 2      GroupMetadataKey    group
    key version 3+     the KIP-848 consumer-group records: not the classic protocol's, read
                       as `UnknownKey` and skipped on load (as Kafka's readMessageKey does)

Values:

    OffsetCommitValue   v0 offset, metadata, commitTimestamp
                        v1 + expireTimestamp (only v1: a commit with retention_time_ms, KIP-211)
                        v2 offset, metadata, commitTimestamp
                        v3 offset, leaderEpoch, metadata, commitTimestamp (KIP-320)
                        v4 as v3, flexible (compact strings, tagged fields; KIP-915)
    GroupMetadataValue  v0 protocolType, generation, protocol?, leader?, members
                        v1 + member rebalanceTimeout    v2 + currentStateTimestamp
                        v3 + member groupInstanceId? (KIP-345)    v4 as v3, flexible

A value of None is a tombstone: the key's offset or group is deleted (compaction keeps the
tombstone for delete.retention.ms, then drops it). Kafka writes OffsetCommitValue v3 (v1 for a
commit with an expire timestamp) and GroupMetadataValue v3 - MetadataVersion's
offsetCommitValueVersion / groupMetadataValueVersion, "the highest non-flexible version" - and
so does replog; every version decodes. Bad bytes raise RecordFormatError with one line naming
the field.

`partition_for` is Kafka's `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`, with
Java's String.hashCode over UTF-16 code units, so a group lives on the same partition in replog
and in Kafka.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Union

OFFSET_COMMIT_KEY_VERSION = 1   # GroupCoordinatorRecordHelpers.newOffsetCommitRecord
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3  # MetadataVersion.offsetCommitValueVersion(false)
OFFSET_COMMIT_VALUE_EXPIRE_VERSION = 1  # ... (true): the only version with expireTimestamp
GROUP_METADATA_VALUE_VERSION = 3  # MetadataVersion.groupMetadataValueVersion()
MAX_OFFSET_COMMIT_VALUE_VERSION = 4
MAX_GROUP_METADATA_VALUE_VERSION = 4
FLEXIBLE_VERSION = 4  # both values: "flexibleVersions": "4+"


class RecordFormatError(ValueError):
    """A __consumer_offsets key or value that does not decode (truncated, bad length, unknown
    value version)."""


# ============================================================================ the records

@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int
    version: int = OFFSET_COMMIT_KEY_VERSION


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str
    version: int = GROUP_METADATA_KEY_VERSION


@dataclass(frozen=True)
class UnknownKey:
    """A key of another record type (KIP-848's consumer-group records, key version 3+)."""

    version: int


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1      # v3+ (RecordBatch.NO_PARTITION_LEADER_EPOCH when absent)
    expire_timestamp: int = -1  # v1 only
    version: int = OFFSET_COMMIT_VALUE_VERSION


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None  # v3+
    rebalance_timeout: int = -1           # v1+ (-1: read as the session timeout)


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadata, ...] = ()
    current_state_timestamp: int = -1  # v2+
    version: int = GROUP_METADATA_VALUE_VERSION


Key = Union[OffsetCommitKey, GroupMetadataKey]
Value = Union[OffsetCommitValue, GroupMetadataValue]


@dataclass(frozen=True)
class CoordinatorRecord:
    """One record of __consumer_offsets: a key and a value, or a tombstone (value None)."""

    key: Key
    value: Value | None = field(default=None)

    @property
    def tombstone(self) -> bool:
        return self.value is None

    def encode(self) -> tuple[bytes, bytes | None]:
        return encode_key(self.key), encode_value(self.value)


# ============================================================================ partitioning

def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, in
    int32 arithmetic."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition of a group (GroupMetadataManager.partitionFor).
    Kafka's Utils.abs maps Integer.MIN_VALUE to 0 (Math.abs would leave it negative)."""
    if num_partitions <= 0:
        raise ValueError(f"offsets.topic.num.partitions must be positive, got {num_partitions}")
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# ============================================================================ encoding

class _Writer:
    def __init__(self, flexible: bool) -> None:
        self.out = bytearray()
        self.flexible = flexible

    def int16(self, v: int) -> None:
        self.out += struct.pack(">h", v)

    def int32(self, v: int) -> None:
        self.out += struct.pack(">i", v)

    def int64(self, v: int) -> None:
        self.out += struct.pack(">q", v)

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def string(self, s: str | None, nullable: bool = False) -> None:
        if s is None:
            if not nullable:
                raise ValueError("a non-nullable string field is None")
            self.uvarint(0) if self.flexible else self.int16(-1)
            return
        b = s.encode("utf-8")
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            if len(b) > 0x7FFF:
                raise ValueError(f"a string of {len(b)} bytes does not fit an int16 length")
            self.int16(len(b))
        self.out += b

    def bytes_(self, b: bytes) -> None:
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.int32(len(b))
        self.out += b

    def array_len(self, n: int) -> None:
        self.uvarint(n + 1) if self.flexible else self.int32(n)

    def tagged_fields(self) -> None:
        if self.flexible:
            self.uvarint(0)  # replog writes no tagged fields


def encode_key(key: Key) -> bytes:
    w = _Writer(flexible=False)  # keys: "flexibleVersions": "none"
    w.int16(key.version)
    if isinstance(key, OffsetCommitKey):
        if key.version not in (0, 1):
            raise ValueError(f"OffsetCommitKey has versions 0-1, not {key.version}")
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
    else:
        if key.version != GROUP_METADATA_KEY_VERSION:
            raise ValueError(f"GroupMetadataKey has version 2 only, not {key.version}")
        w.string(key.group)
    return bytes(w.out)


def encode_value(value: Value | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        return _encode_offset_commit_value(value)
    return _encode_group_metadata_value(value)


def _encode_offset_commit_value(v: OffsetCommitValue) -> bytes:
    if not 0 <= v.version <= MAX_OFFSET_COMMIT_VALUE_VERSION:
        raise ValueError(f"OffsetCommitValue has versions 0-4, not {v.version}")
    w = _Writer(flexible=v.version >= FLEXIBLE_VERSION)
    w.int16(v.version)
    w.int64(v.offset)
    if v.version >= 3:
        w.int32(v.leader_epoch)
    w.string(v.metadata)
    w.int64(v.commit_timestamp)
    if v.version == 1:
        w.int64(v.expire_timestamp)
    w.tagged_fields()
    return bytes(w.out)


def _encode_group_metadata_value(v: GroupMetadataValue) -> bytes:
    if not 0 <= v.version <= MAX_GROUP_METADATA_VALUE_VERSION:
        raise ValueError(f"GroupMetadataValue has versions 0-4, not {v.version}")
    w = _Writer(flexible=v.version >= FLEXIBLE_VERSION)
    w.int16(v.version)
    w.string(v.protocol_type)
    w.int32(v.generation)
    w.string(v.protocol, nullable=True)
    w.string(v.leader, nullable=True)
    if v.version >= 2:
        w.int64(v.current_state_timestamp)
    w.array_len(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        if v.version >= 3:
            w.string(m.group_instance_id, nullable=True)
        w.string(m.client_id)
        w.string(m.client_host)
        if v.version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tagged_fields()
    w.tagged_fields()
    return bytes(w.out)


# ============================================================================ decoding

class _Reader:
    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = memoryview(buf)
        self.pos = 0
        self.what = what
        self.flexible = False

    def _take(self, n: int, name: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError(f"{self.what}: {name} runs past the end "
                                    f"({len(self.buf)} bytes)")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def int16(self, name: str) -> int:
        return int(struct.unpack(">h", self._take(2, name))[0])

    def int32(self, name: str) -> int:
        return int(struct.unpack(">i", self._take(4, name))[0])

    def int64(self, name: str) -> int:
        return int(struct.unpack(">q", self._take(8, name))[0])

    def uvarint(self, name: str) -> int:
        v = shift = 0
        for _ in range(5):
            b = self._take(1, name)[0]
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7
        raise RecordFormatError(f"{self.what}: {name} has a varint longer than 5 bytes")

    def string(self, name: str, nullable: bool = False) -> str | None:
        n = self.uvarint(name) - 1 if self.flexible else self.int16(name)
        if n < 0:
            if not nullable:
                raise RecordFormatError(f"{self.what}: {name} is null, which its schema forbids")
            return None
        try:
            return bytes(self._take(n, name)).decode("utf-8")
        except UnicodeDecodeError:
            raise RecordFormatError(f"{self.what}: {name} is not UTF-8") from None

    def required_string(self, name: str) -> str:
        s = self.string(name)
        assert s is not None
        return s

    def bytes_(self, name: str) -> bytes:
        n = self.uvarint(name) - 1 if self.flexible else self.int32(name)
        if n < 0:  # nullable in no version of these schemas; Kafka would read it as empty
            raise RecordFormatError(f"{self.what}: {name} is null, which its schema forbids")
        return bytes(self._take(n, name))

    def array_len(self, name: str) -> int:
        n = self.uvarint(name) - 1 if self.flexible else self.int32(name)
        if n < 0:
            raise RecordFormatError(f"{self.what}: {name} is null, which its schema forbids")
        return n

    def tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint("tagged fields")):
            self.uvarint("tag")
            self._take(self.uvarint("tagged field size"), "tagged field")  # unknown: skipped


def decode_key(buf: bytes) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    r = _Reader(buf, "__consumer_offsets key")
    version = r.int16("version")
    if version in (0, 1):
        return OffsetCommitKey(r.required_string("group"), r.required_string("topic"),
                               r.int32("partition"), version=version)
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(r.required_string("group"), version=version)
    if version < 0:
        raise RecordFormatError(f"__consumer_offsets key: negative version {version}")
    return UnknownKey(version)


def decode_value(key: Key, buf: bytes | None) -> Value | None:
    """The value for `key` (None: a tombstone)."""
    if buf is None:
        return None
    if isinstance(key, OffsetCommitKey):
        return decode_offset_commit_value(buf)
    return decode_group_metadata_value(buf)


def decode_offset_commit_value(buf: bytes) -> OffsetCommitValue:
    r = _Reader(buf, "OffsetCommitValue")
    version = r.int16("version")
    if not 0 <= version <= MAX_OFFSET_COMMIT_VALUE_VERSION:
        raise RecordFormatError(f"OffsetCommitValue: unsupported version {version} (0-4)")
    r.flexible = version >= FLEXIBLE_VERSION
    offset = r.int64("offset")
    leader_epoch = r.int32("leaderEpoch") if version >= 3 else -1
    metadata = r.required_string("metadata")
    commit_timestamp = r.int64("commitTimestamp")
    expire_timestamp = r.int64("expireTimestamp") if version == 1 else -1
    r.tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp,
                             version=version)


def decode_group_metadata_value(buf: bytes) -> GroupMetadataValue:
    r = _Reader(buf, "GroupMetadataValue")
    version = r.int16("version")
    if not 0 <= version <= MAX_GROUP_METADATA_VALUE_VERSION:
        raise RecordFormatError(f"GroupMetadataValue: unsupported version {version} (0-4)")
    r.flexible = version >= FLEXIBLE_VERSION
    protocol_type = r.required_string("protocolType")
    generation = r.int32("generation")
    protocol = r.string("protocol", nullable=True)
    leader = r.string("leader", nullable=True)
    timestamp = r.int64("currentStateTimestamp") if version >= 2 else -1
    members = []
    for _ in range(r.array_len("members")):
        member_id = r.required_string("memberId")
        instance = r.string("groupInstanceId", nullable=True) if version >= 3 else None
        client_id = r.required_string("clientId")
        client_host = r.required_string("clientHost")
        rebalance = r.int32("rebalanceTimeout") if version >= 1 else -1
        session = r.int32("sessionTimeout")
        subscription = r.bytes_("subscription")
        assignment = r.bytes_("assignment")
        r.tagged_fields()
        members.append(MemberMetadata(member_id, client_id, client_host, session, subscription,
                                      assignment, instance, rebalance))
    r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, tuple(members),
                              timestamp, version=version)


def decode_record(key: bytes, value: bytes | None) -> CoordinatorRecord | UnknownKey:
    """A record read from the log: the classic protocol's records, or the UnknownKey of a
    record of another type (the loader skips it)."""
    k = decode_key(key)
    if isinstance(k, UnknownKey):
        return k
    return CoordinatorRecord(k, decode_value(k, value))

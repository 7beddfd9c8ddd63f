"""The embedded consumer protocol (protocol type "consumer"): what a JoinGroup's protocol
metadata and a SyncGroup's assignment hold for the Java, librdkafka, kafka-python and aiokafka
consumers (clients/src/main/resources/common/message/ConsumerProtocolSubscription.json and
ConsumerProtocolAssignment.json, non-flexible, versions 0-3).

The coordinator never interprets an assignment and passes every byte through untouched - the
assignors (range, roundrobin, sticky, cooperative-sticky) run in the group leader. It reads one
thing: the topics a consumer group subscribes to (GroupMetadata.computeSubscribedTopics), which
decide OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC and which offsets of a Stable group may expire.
It parses them with version 0's layout, the prefix of every version ("new versions cannot
remove or reorder any of the existing fields"); metadata that does not parse makes the topics
unknown (None), which keeps every offset (isSubscribedToTopic answers true).

The encoders build what clients send, for tests, scripts and the consumer-groups CLI.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence

PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE


class _Cursor:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("consumer protocol data runs past its end")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def string(self) -> str:
        return self.take(self.int16()).decode("utf-8")


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version), or None if it does not
    parse."""
    try:
        c = _Cursor(metadata)
        c.int16()  # version: every version starts with version 0's fields
        n = c.int32()
        if n < 0:
            return None
        return frozenset(c.string() for _ in range(n))
    except (ValueError, UnicodeDecodeError, struct.error):
        return None


def decode_subscription(metadata: bytes) -> tuple[list[str], dict[str, list[int]]] | None:
    """The topics and (v1+) owned partitions of a ConsumerProtocolSubscription, or None if it
    does not parse."""
    try:
        c = _Cursor(metadata)
        version = c.int16()
        topics = [c.string() for _ in range(c.int32())]
        n = c.int32()  # user data
        if n > 0:
            c.take(n)
        owned: dict[str, list[int]] = {}
        if version >= 1:
            for _ in range(c.int32()):
                topic = c.string()
                owned[topic] = [c.int32() for _ in range(c.int32())]
        return topics, owned
    except (ValueError, UnicodeDecodeError, struct.error):
        return None


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def _nullable_bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def _partitions(tps: Mapping[str, Sequence[int]]) -> bytes:
    out = struct.pack(">i", len(tps))
    for topic, parts in tps.items():
        out += _string(topic) + struct.pack(">i", len(parts))
        out += b"".join(struct.pack(">i", p) for p in parts)
    return out


def encode_subscription(topics: Iterable[str], user_data: bytes | None = None, *,
                        owned: Mapping[str, Sequence[int]] | None = None,
                        generation: int = -1, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription (v1+: owned partitions, which cooperative-sticky sends;
    v2+: the generation; v3 adds a rack id, written here as null)."""
    topics = list(topics)
    out = struct.pack(">h", version) + struct.pack(">i", len(topics))
    out += b"".join(_string(t) for t in topics) + _nullable_bytes(user_data)
    if version >= 1:
        out += _partitions(owned or {})
    if version >= 2:
        out += struct.pack(">i", generation)
    if version >= 3:
        out += struct.pack(">h", -1)
    return out


def encode_assignment(partitions: Mapping[str, Sequence[int]],
                      user_data: bytes | None = None, version: int = 1) -> bytes:
    """A ConsumerProtocolAssignment."""
    return struct.pack(">h", version) + _partitions(partitions) + _nullable_bytes(user_data)


def decode_assignment(data: bytes) -> dict[str, list[int]] | None:
    """The partitions of a ConsumerProtocolAssignment (None if it does not parse; an empty
    assignment - what the coordinator fills in for a member the leader left out - is {})."""
    if not data:
        return {}
    try:
        c = _Cursor(data)
        c.int16()
        out: dict[str, list[int]] = {}
        for _ in range(c.int32()):
            topic = c.string()
            out[topic] = [c.int32() for _ in range(c.int32())]
        return out
    except (ValueError, UnicodeDecodeError, struct.error):
        return None

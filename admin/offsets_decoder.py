"""``replog dump-log --offsets-decoder``: the records of a ``__consumer_offsets`` segment as
kafka-dump-log's ``--offsets-decoder`` (DumpLogSegments.OffsetsMessageParser) prints them - the
key as ``{"type":"<key version>","data":{...}}``, the value as ``{"version":"<value
version>","data":{...}}`` with the fields of that version under the schemas' camelCase names
(broker/group/records.py reads them), a tombstone as ``<DELETE>``.

Where replog differs: bytes fields (a member's subscription and assignment) are printed in
base64, as Kafka's generated JSON converters write bytes; Kafka's parser decodes them further
for the consumer protocol.
"""

from __future__ import annotations

import base64
import json

from broker.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_key,
    decode_value,
)


def _json(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _offset_commit_value(v: OffsetCommitValue) -> dict:
    out: dict = {"offset": v.offset}
    if v.version >= 3:
        out["leaderEpoch"] = v.leader_epoch
    out["metadata"] = v.metadata
    out["commitTimestamp"] = v.commit_timestamp
    if v.version == 1:
        out["expireTimestamp"] = v.expire_timestamp
    return out


def _group_metadata_value(v: GroupMetadataValue) -> dict:
    out: dict = {"protocolType": v.protocol_type, "generation": v.generation,
                 "protocol": v.protocol, "leader": v.leader}
    if v.version >= 2:
        out["currentStateTimestamp"] = v.current_state_timestamp
    members = []
    for m in v.members:
        member: dict = {"memberId": m.member_id}
        if v.version >= 3:
            member["groupInstanceId"] = m.group_instance_id
        member["clientId"] = m.client_id
        member["clientHost"] = m.client_host
        if v.version >= 1:
            member["rebalanceTimeout"] = m.rebalance_timeout
        member["sessionTimeout"] = m.session_timeout
        member["subscription"] = base64.b64encode(m.subscription).decode()
        member["assignment"] = base64.b64encode(m.assignment).decode()
        members.append(member)
    out["members"] = members
    return out


def decode(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """(key, payload) as kafka-dump-log --offsets-decoder prints them."""
    if key is None:
        return "null", "<unreadable: a __consumer_offsets record has no key>"
    try:
        k = decode_key(key)
    except RecordFormatError as e:
        return f"<unreadable: {e}>", "<unreadable>"
    if isinstance(k, OffsetCommitKey):
        key_text = _json({"type": str(k.version), "data": {
            "group": k.group, "topic": k.topic, "partition": k.partition}})
    elif isinstance(k, GroupMetadataKey):
        key_text = _json({"type": str(k.version), "data": {"group": k.group}})
    else:  # KIP-848's record types: not the classic protocol's
        return f"unknown::version={k.version}", "<unknown record type>"
    if value is None:
        return key_text, "<DELETE>"
    try:
        v = decode_value(k, value)
    except RecordFormatError as e:
        return key_text, f"<unreadable: {e}>"
    data = _offset_commit_value(v) if isinstance(v, OffsetCommitValue) \
        else _group_metadata_value(v)
    return key_text, _json({"version": str(v.version), "data": data})

"""One Kafka API as replog's listener serves it: its key, name, the versions listed in the
ApiVersions answer, and the request/response messages (common/kafka_protocol/schema.py)."""

from __future__ import annotations

from dataclasses import dataclass

from common.kafka_protocol.schema import Message, Struct, Versions, versions


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    served: Versions
    request: Message
    response: Message


def make_api(key: int, name: str, served: str, flexible: str, request: Struct,
             response: Struct) -> Api:
    """``served`` and ``flexible`` are version ranges as in Kafka's message JSON files
    ("0-4", "9+"): ``flexible`` is the JSON's ``flexibleVersions``."""
    v, fl = versions(served), versions(flexible)
    return Api(key, name, v, Message(f"{name}Request", key, v, fl, request),
               Message(f"{name}Response", key, v, fl, response))

"""The metadata of Kafka's messages, as the generated codec (common/kafka_protocol/generated/,
tools/gen_kafka_messages.py) records it for each struct from Kafka's message JSON: each
field's name, type, versions, nullable versions, tag and default. The codec itself is the
generated code; this is for the code that walks messages generically (the hostile-frame
harness, the tests' value generators, the budget benchmark).

Rules from the message definitions (KIP-482 for flexible versions):
- a field absent from a version is neither read nor written; a decoded message still has it,
  set to its default, so the code using it need not know the version;
- in a flexible version strings, bytes, records and arrays use the compact forms, and every
  struct ends with a tagged-field section: ``count``, then per field ``tag``, ``size``, value,
  in tag order; a tagged field equal to its default is left out, an unknown tag is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common.kafka_protocol.primitives import ZERO_UUID


@dataclass(frozen=True)
class Versions:
    """A version range as the JSON files write it: "3+", "0-9", "5" or "none"."""
    lo: int
    hi: int  # inclusive; 0x7FFF for "N+"

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi


NONE = Versions(1, 0)


def versions(text: str | None) -> Versions:
    if text is None or text == "none":
        return NONE
    if text.endswith("+"):
        return Versions(int(text[:-1]), 0x7FFF)
    lo, _, hi = text.partition("-")
    return Versions(int(lo), int(hi or lo))


@dataclass(frozen=True, eq=False)
class Struct:
    fields: tuple[Field, ...]
    name: str = ""
    cls: Any = None  # the generated class (common/kafka_protocol/generated/)


@dataclass(frozen=True)
class Array:
    element: str | Struct  # a primitive type name or a struct


_UNSET = object()


@dataclass(frozen=True)
class Field:
    name: str
    type: str | Struct | Array
    versions: Versions
    nullable: Versions = NONE
    tag: int | None = None
    tagged: Versions = NONE
    default: Any = _UNSET

    def default_value(self) -> Any:
        if self.default is not _UNSET:
            return self.default
        t = self.type
        if isinstance(t, Array):
            return []
        if isinstance(t, Struct):
            # A tagged struct that is absent is None; an untagged one has its fields' defaults.
            return None if self.tag is not None else defaults(t)
        return _TYPE_DEFAULTS[t]


_TYPE_DEFAULTS: dict[str, Any] = {
    "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0, "float64": 0.0,
    "bool": False, "string": "", "bytes": b"", "records": None, "uuid": ZERO_UUID,
}


def defaults(s: Struct) -> dict:
    """A struct's fields at their defaults, as a dict (``to_dict``'s form)."""
    return {fd.name: fd.default_value() for fd in s.fields}


_FIXED_SIZES = {"int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
                "float64": 8, "bool": 1, "uuid": 16}
_MIN_SIZES: dict[tuple[int, int, bool], int] = {}


def min_size(t: str | Struct | Array, version: int, flexible: bool) -> int:
    """The fewest bytes a value of type ``t`` takes in ``version``: an empty or null string,
    bytes or array, a struct of such fields and an empty tagged-field section. An array of N
    elements needs N times its element's, or it cannot be honest (Kafka's generated readers
    check the same before allocating)."""
    if isinstance(t, str):
        if t in _FIXED_SIZES:
            return _FIXED_SIZES[t]
        if t == "string":
            return 1 if flexible else 2
        return 1 if flexible else 4  # bytes, records
    if isinstance(t, Array):
        return 1 if flexible else 4
    key = (id(t), version, flexible)
    n = _MIN_SIZES.get(key)
    if n is None:
        n = sum(min_size(fd.type, version, flexible) for fd in t.fields
                if fd.tag is None and version in fd.versions) + (1 if flexible else 0)
        _MIN_SIZES[key] = n
    return n

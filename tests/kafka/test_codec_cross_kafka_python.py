"""The generated codec against an implementation it does not share code with: kafka-python 3's
own message classes (``kafka.protocol``, its JSON-driven encoder and decoder).

test_codec_golden.py proves that the generated codec agrees with the hand-transcribed one it
replaced, but both were written here. This test takes every served (API, version, request or
response), encodes replog's sample value (every field the version has, tagged ones included)
and its all-defaults value with the generated codec, decodes those bytes with kafka-python's
class for that API and version, and encodes kafka-python's value again: the bytes must come
back identical. A field that replog writes where Kafka's definition does not have it, in a
different order or width, or a tagged field written wrong, makes kafka-python read something
else, and its bytes differ or its decode fails.
"""
from __future__ import annotations

import importlib
import pkgutil

import kafka.protocol
import pytest
from kafka.protocol.api_message import ApiMessage

from common.kafka_protocol.api import ApiKey
from tests.kafka import codec_values as cv


def _kafka_python_classes() -> dict[tuple[int, str], type]:
    out: dict[tuple[int, str], type] = {}
    for mod_info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        # kafka.protocol.old holds the pre-JSON hand-written structs; schemas is the engine
        if ".old" in mod_info.name or ".schemas" in mod_info.name:
            continue
        mod = importlib.import_module(mod_info.name)
        for obj in vars(mod).values():
            if (isinstance(obj, type) and issubclass(obj, ApiMessage) and obj is not ApiMessage
                    and getattr(obj, "_json", None)):
                out[(obj.API_KEY, obj.type)] = obj
    return out


CLASSES = _kafka_python_classes()
CASES = [(k, kind, v) for k, kind, v in cv.served_cases()
         if (k, kind) in CLASSES and v <= CLASSES[(k, kind)].max_version]


def test_kafka_python_covers_most_served_cases():
    # if kafka-python renamed its modules the cross-check would silently shrink to nothing
    assert len(CASES) >= 0.9 * len(list(cv.served_cases()))


@pytest.mark.parametrize("which", ["sample", "defaults"])
@pytest.mark.parametrize(("api_key", "kind", "version"), CASES,
                         ids=[f"{cv.name(k, kind)}-v{v}" for k, kind, v in CASES])
def test_kafka_python_reads_what_replog_writes(api_key, kind, version, which):
    value = cv.value(api_key, kind, version, which)
    if api_key == ApiKey.API_VERSIONS and kind == "response":
        # Kafka's rule, which kafka-python keeps: an ApiVersions answer with an error is read
        # at v0 whatever version was asked (the broker may not know the asked one)
        value["error_code"] = 0
    ours = cv.encode(api_key, kind, value, version)
    theirs = CLASSES[(api_key, kind)].decode(ours, version=version)
    theirs._header = None  # decode leaves it unset; encode without a header reads it
    assert bytes(theirs.encode(version=version)) == ours

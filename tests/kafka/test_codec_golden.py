"""Golden bytes for every served (API, version, request/response): the codec must encode each
fixture's value to exactly its bytes, and decode those bytes back to the value.

The fixtures (testdata/kafka_codec_golden.json) were written by the hand-transcribed codec that
the generated one replaced (issue 41 item 1), so this test is the proof that the two agree byte
for byte at every served version, flexible versions and tagged fields included. Two values per
case: ``sample`` (every field the version has, none at its default, so every tagged field is
written) and ``defaults`` (every field at its default, so the tagged ones are left out).

Values are as the fixture stores them: only the fields the version has, bytes as
``{"hex": ...}``. ``REPLOG_WRITE_GOLDEN=1`` rewrites the file from the current codec: only do
that for a new API or version, and say so in the commit.
"""
from __future__ import annotations

import functools
import json
import os
import pathlib

import pytest

from tests.kafka import codec_values as cv

GOLDEN = pathlib.Path(__file__).parent / "testdata" / "kafka_codec_golden.json"


@functools.cache
def _load() -> dict:
    return json.loads(GOLDEN.read_text())


def write_golden() -> None:
    out = {}
    for api_key, kind, version in cv.served_cases():
        for which in ("sample", "defaults"):
            value = cv.value(api_key, kind, version, which)
            out[f"{cv.name(api_key, kind)}-v{version}-{which}"] = {
                "api_key": api_key, "kind": kind, "version": version,
                "value": cv.to_json(value),
                "hex": cv.encode(api_key, kind, value, version).hex()}
    GOLDEN.parent.mkdir(exist_ok=True)
    # one case a line: a changed case is a one-line diff
    GOLDEN.write_text("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}"
                                         for k, v in sorted(out.items())) + "\n}\n")
    _load.cache_clear()


if os.environ.get("REPLOG_WRITE_GOLDEN") == "1":
    write_golden()


def _cases():
    return [pytest.param(k, id=k) for k in sorted(_load())]


@pytest.mark.parametrize("case", _cases())
def test_golden_bytes(case):
    entry = _load()[case]
    api_key, kind, version = entry["api_key"], entry["kind"], entry["version"]
    value = cv.from_json(entry["value"])
    data = bytes.fromhex(entry["hex"])
    assert cv.encode(api_key, kind, value, version) == data
    assert cv.decode_in_version(api_key, kind, data, version) == value


def test_every_served_version_has_golden_bytes():
    have = {(e["api_key"], e["kind"], e["version"]) for e in _load().values()}
    assert set(cv.served_cases()) <= have

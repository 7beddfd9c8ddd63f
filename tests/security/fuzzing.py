"""What the fuzz tests of tests/security share: the example budget and JSON strategies.

REPLOG_FUZZ_EXAMPLES sets the examples per property (default 60: the whole of tests/security's
hypothesis tests stays within a few seconds of ``make test``); ``make soak`` runs them with many
more, as it does tests/kafka/test_kafka_fuzz.py.
"""
from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("REPLOG_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])

_SCALARS = (st.none() | st.booleans()
            | st.integers(min_value=-2**70, max_value=2**70)
            | st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, -2**31 - 1, 2**63])
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(max_size=12) | st.sampled_from(["0", "1", "-1", "t", "", "²", "../x"]))

JSON_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)


def mutations(obj: object) -> st.SearchStrategy:
    """``obj`` (decoded JSON) with one value somewhere in it replaced by an arbitrary one, a key
    removed, or left alone: the near-miss documents a random byte string rarely reaches."""
    paths: list[tuple] = []

    def walk(o, path):
        paths.append(path)
        if isinstance(o, dict):
            for k, v in o.items():
                walk(v, path + (k,))
        elif isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, path + (i,))
    walk(obj, ())

    def apply(path: tuple, value: object, delete: bool) -> object:
        root = json.loads(json.dumps(obj))
        if not path:
            return value
        parent = root
        for k in path[:-1]:
            parent = parent[k]
        if delete and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
        return root
    return st.builds(apply, st.sampled_from(paths), JSON_VALUES, st.booleans())


def byte_mutations(data: bytes) -> st.SearchStrategy[bytes]:
    """``data`` with bytes flipped, cut or spliced in: what a torn write or a bit flip leaves."""
    def flip(d: bytes, i: int, b: int) -> bytes:
        if not d:
            return bytes([b])
        i %= len(d)
        return d[:i] + bytes([b]) + d[i + 1:]

    def cut(d: bytes, i: int) -> bytes:
        return d[:i % (len(d) + 1)]

    def splice(d: bytes, i: int, extra: bytes) -> bytes:
        i %= len(d) + 1
        return d[:i] + extra + d[i:]
    idx = st.integers(min_value=0, max_value=2**20)
    one = st.one_of(st.builds(flip, st.just(data), idx, st.integers(0, 255)),
                    st.builds(cut, st.just(data), idx),
                    st.builds(splice, st.just(data), idx, st.binary(max_size=16)))
    return one | one.flatmap(byte_mutations_once)


def byte_mutations_once(data: bytes) -> st.SearchStrategy[bytes]:
    idx = st.integers(min_value=0, max_value=2**20)
    return st.builds(lambda i, b: data[:i % (len(data) + 1)] + bytes([b]) +
                     data[i % (len(data) + 1) + 1:], idx, st.integers(0, 255))

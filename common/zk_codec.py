"""The checked JSON readers every ZooKeeper codec shares (common/zk_layout.py,
common/zk_restarts.py): a znode replog cannot read raises :class:`MalformedZnode`, naming the
znode and what is wrong, and nothing else - the controller and the brokers log such a znode and
skip or refuse it. Kafka's JSON conventions (KafkaZkClient / ZkData): compact JSON, ints that
may arrive as decimal strings, int32 ids and epochs, int64 timestamps.
"""

from __future__ import annotations

import functools
import json
import re

from common.errors import InvalidTopicError
from common.names import validate_topic


def dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


class MalformedZnode(ValueError):
    """A znode replog cannot read: the one error every ZooKeeper decoder raises (a ValueError, as
    callers written before it catch)."""


def decode_at(path: str, data: bytes, decode):
    """``decode(data)``, a MalformedZnode naming ``path`` when it cannot be read (the decoders
    name the kind of znode, not which one)."""
    try:
        return decode(data)
    except MalformedZnode as e:
        raise MalformedZnode(f"{path}: {e}") from None


def loads(data: bytes, what: str) -> dict:
    try:
        obj = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MalformedZnode(f"{what}: not JSON ({e})") from None
    except RecursionError:  # nesting deeper than the interpreter's stack (a hostile znode)
        raise MalformedZnode(f"{what}: JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise MalformedZnode(f"{what}: expected a JSON object")
    return obj


# Every decoder below raises MalformedZnode, and only that, for a znode it cannot read: the
# controller and the brokers log such a znode and skip or refuse it (a hostile or corrupt znode
# never stops a process). Kafka's ints are int32 (broker ids, partitions, epochs) or int64
# (timestamps): a larger number would only fail later, when it is put in a request.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def decoder(what: str):
    """Turn the KeyError/TypeError/AttributeError/OverflowError of reading a JSON value of the
    wrong shape into ValueError naming ``what`` (the znode)."""
    def wrap(fn):
        @functools.wraps(fn)
        def decode(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except MalformedZnode as e:
                if str(e).startswith(what):
                    raise
                raise MalformedZnode(f"{what}: {e}") from None
            except ValueError as e:  # int(), endpoint parsing, ...
                raise MalformedZnode(f"{what}: {e}") from None
            except KeyError as e:
                raise MalformedZnode(f"{what}: missing field {e}") from None
            except (TypeError, AttributeError, OverflowError, RecursionError) as e:
                raise MalformedZnode(f"{what}: malformed ({type(e).__name__}: {e})") from None
        return decode
    return wrap


def int_in(x: object, what: str, lo: int = 0, hi: int = INT32_MAX) -> int:
    """A JSON integer (or a string of decimal digits, as Kafka writes timestamps and versions)
    in [lo, hi]; ValueError otherwise (a bool, a float, null, out of range)."""
    if isinstance(x, str) and re.fullmatch(r"-?[0-9]{1,19}", x.strip()):
        x = int(x)
    if not isinstance(x, int) or isinstance(x, bool):
        raise MalformedZnode(f"{what} must be an integer, not {short(x)}")
    if not lo <= x <= hi:
        raise MalformedZnode(f"{what} {x} is out of range [{lo}, {hi}]")
    return x


def ids(xs: object, what: str, lo: int = 0) -> tuple[int, ...]:
    """A list of distinct int32 ids >= lo (replicas, an ISR, an ELR)."""
    if not isinstance(xs, list):
        raise MalformedZnode(f"{what} must be a list, not {short(xs)}")
    out = tuple(int_in(x, what, lo) for x in xs)
    if len(set(out)) != len(out):
        raise MalformedZnode(f"{what} {list(out)} names a broker twice")
    return out


def string(x: object, what: str) -> str:
    if not isinstance(x, str):
        raise MalformedZnode(f"{what} must be a string, not {short(x)}")
    return x


def short(x: object) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def topic_name(topic: object, what: str) -> str:
    try:
        return validate_topic(topic)  # type: ignore[arg-type]
    except InvalidTopicError as e:
        raise MalformedZnode(f"{what}: {e}") from None


def strs(xs: object, what: str) -> list[str]:
    if not isinstance(xs, list) or not all(isinstance(x, str) for x in xs):
        raise MalformedZnode(f"{what} must be a list of strings, not {short(xs)}")
    return xs


def int_or(x: object, default: int) -> int:
    ok = isinstance(x, int) and not isinstance(x, bool) and -1 <= x <= INT64_MAX
    return x if ok else default  # type: ignore[return-value]

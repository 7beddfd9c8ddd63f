"""atheris target: the Kafka request decoder (common/kafka_protocol) on arbitrary and on valid
but enormous requests, with each API's element budget (common/kafka_protocol/limits.py).

The input picks a served API version and one of: the rest as the request (header and body, as
the listener reads a frame), or a valid request whose widest array holds a number of minimal
elements drawn on a log scale up to twice the budget (harness/hostile_frames.py), with some of
its bytes then overwritten or appended. Decoding must return a request of at most the budget's
elements or raise ProtocolError; anything else is a crash (the listener would log
kafka_request_failed, or decode without bound: issue 42).

    python tools/fuzz/fuzz_kafka_requests.py [libFuzzer flags, e.g. -max_total_time=60 CORPUS]
"""
from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from common.kafka_protocol.api import APIS
    from common.kafka_protocol.headers import read_request_header
    from common.kafka_protocol.limits import element_budget
    from common.kafka_protocol.primitives import ProtocolError, Reader
    from harness.hostile_frames import enormous_body, request_frame, served_versions

SERVED = served_versions()


def _elements(value) -> int:
    if isinstance(value, dict):
        return sum(_elements(v) for v in value.values())
    if isinstance(value, list):
        return len(value) + sum(_elements(v) for v in value)
    return 0


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    api_key, version = SERVED[fdp.ConsumeIntInRange(0, len(SERVED) - 1)]
    budget = element_budget(api_key)
    mode = fdp.ConsumeIntInRange(0, 2)
    if mode == 0:
        frame = fdp.ConsumeBytes(fdp.remaining_bytes())
    else:
        n = fdp.ConsumeIntInRange(0, min(2 * budget, 1 << fdp.ConsumeIntInRange(0, 18)))
        b = bytearray(request_frame(api_key, version, enormous_body(api_key, version, 0, n))[4:])
        for _ in range(fdp.ConsumeIntInRange(0, 4)):
            if mode == 1 and b:
                b[fdp.ConsumeIntInRange(0, len(b) - 1)] = fdp.ConsumeInt(1) & 0xFF
            else:
                b += fdp.ConsumeBytes(8)
        frame = bytes(b)
    r = Reader(frame)
    try:
        header = read_request_header(r)
        api = APIS.get(header.api_key)
        if api is None or header.api_version not in api.served:
            return
        request = api.request.decode(r, header.api_version, element_budget(header.api_key))
    except ProtocolError:
        return
    got = _elements(request)
    assert got <= element_budget(header.api_key), \
        f"{api.name} v{header.api_version}: {got} elements decoded past the budget"


def seeds() -> list[bytes]:
    """Inputs for the corpus: each mode on a few APIs (the provider's first bytes pick)."""
    return [bytes([i, m, 10, 3]) + bytes(16) for i in (0, 3, 15, 40) for m in (0, 1, 2)]


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()

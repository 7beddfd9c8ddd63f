"""atheris target: every znode decoder of common/zk_layout.py on arbitrary bytes.

The first input byte picks the decoder, the rest is the znode's data. A decoder returns or
raises MalformedZnode; anything else is a crash (the controller or broker reading that znode
would have stopped, or resigned, on it).

    python tools/fuzz/fuzz_znodes.py [libFuzzer flags, e.g. -max_total_time=60 CORPUS_DIR]
"""
from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from common import zk_layout as zl

DECODERS = [
    zl.decode_cluster_id, zl.decode_controller, zl.decode_controller_epoch,
    lambda d: zl.decode_broker(1, d, 5), lambda d: zl.decode_topic("t", d),
    lambda d: zl.decode_partition_state(d, 0), zl.decode_topic_config, zl.decode_config_change,
    zl.decode_reassignment, zl.decode_restart_entry, zl.decode_lost_replicas,
]


def test_one_input(data: bytes) -> None:
    if not data:
        return
    decode = DECODERS[data[0] % len(DECODERS)]
    try:
        decode(data[1:])
    except zl.MalformedZnode:
        pass


def seeds() -> list[bytes]:
    """One valid encoding per decoder, prefixed with its selector byte."""
    from common.listeners import EndPoint
    valid = [
        zl.encode_cluster_id("abc"),
        zl.encode_controller(zl.ControllerInfo(1, "h", 1, 2, (EndPoint("INTERNAL", "h", 1),))),
        zl.encode_controller_epoch(3),
        zl.encode_broker(zl.BrokerRegistration(1, "h", 2, "r", (zl.LogDirInfo("/d", "i"),))),
        zl.encode_topic(zl.TopicAssignment("t", "id", {0: [1, 2]}, {0: [2]})),
        zl.encode_partition_state(zl.LeaderAndIsr(1, 2, (1, 2), 3, 0, (3,))),
        zl.encode_topic_config({"retention.ms": "1"}),
        zl.encode_config_change("topics", "t"),
        zl.encode_reassignment([("t", 0, [1, 2])]),
        zl.encode_restart_entry(zl.RestartEntry(1, "/d", (("t", 0),), 4, (5,))),
        zl.encode_lost_replicas({"/d": {("t", 1)}}),
    ]
    return [bytes([i]) + v for i, v in enumerate(valid)]


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()

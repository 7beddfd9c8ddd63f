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
    from common import zk_layout as L

DECODERS = [
    L.decode_cluster_id, L.decode_controller, L.decode_controller_epoch,
    lambda d: L.decode_broker(1, d, 5), lambda d: L.decode_topic("t", d),
    lambda d: L.decode_partition_state(d, 0), L.decode_topic_config, L.decode_config_change,
    L.decode_reassignment, L.decode_restart_entry, L.decode_lost_replicas,
]


def test_one_input(data: bytes) -> None:
    if not data:
        return
    decode = DECODERS[data[0] % len(DECODERS)]
    try:
        decode(data[1:])
    except L.MalformedZnode:
        pass


def seeds() -> list[bytes]:
    """One valid encoding per decoder, prefixed with its selector byte."""
    from common.listeners import EndPoint
    valid = [
        L.encode_cluster_id("abc"),
        L.encode_controller(L.ControllerInfo(1, "h", 1, 2, (EndPoint("INTERNAL", "h", 1),))),
        L.encode_controller_epoch(3),
        L.encode_broker(L.BrokerRegistration(1, "h", 2, "r", (L.LogDirInfo("/d", "i"),))),
        L.encode_topic(L.TopicAssignment("t", "id", {0: [1, 2]}, {0: [2]})),
        L.encode_partition_state(L.LeaderAndIsr(1, 2, (1, 2), 3, 0, (3,))),
        L.encode_topic_config({"retention.ms": "1"}),
        L.encode_config_change("topics", "t"),
        L.encode_reassignment([("t", 0, [1, 2])]),
        L.encode_restart_entry(L.RestartEntry(1, "/d", (("t", 0),), 4, (5,))),
        L.encode_lost_replicas({"/d": {("t", 1)}}),
    ]
    return [bytes([i]) + v for i, v in enumerate(valid)]


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()

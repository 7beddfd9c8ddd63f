"""harness/ports: listener ports for child processes come from outside the ephemeral range.

A CI run failed because a controller's port, picked by binding port 0, was taken by an outgoing
connection before the controller bound it ("Address already in use")."""
from __future__ import annotations

import random
import socket

from harness import ports


def test_ports_are_outside_the_ephemeral_range_bindable_and_never_repeated():
    lo, hi = ports.ephemeral_range()
    handed = [ports.free_port() for _ in range(200)]
    assert len(set(handed)) == len(handed)
    for p in handed:
        assert not lo <= p <= hi, (p, lo, hi)
        assert p >= 10000
    with socket.socket() as s:
        s.bind(("127.0.0.1", handed[-1]))


def test_a_seeded_global_random_does_not_repeat_another_process_picks():
    # The soak seeds `random` per test; two processes seeded alike must not pick alike. The
    # picks use a private RNG, so reseeding the global one does not replay them.
    random.seed(7)
    first = [ports.free_port() for _ in range(5)]
    random.seed(7)
    state = random.getstate()
    second = [ports.free_port() for _ in range(5)]
    assert random.getstate() == state  # the global RNG was not consumed
    assert set(first).isdisjoint(second)


def test_excluded_and_listening_ports_are_skipped(monkeypatch):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = listener.getsockname()[1]
        # Only two ports to choose from: one listening, one excluded -> the third one.
        monkeypatch.setattr(ports, "candidate_ranges",
                            lambda: [range(taken, taken + 1), range(taken + 1, taken + 3)])
        monkeypatch.setattr(ports, "_handed", set())
        got = ports.free_port(exclude=[taken + 1])
    assert got not in (taken, taken + 1)


def test_pick_is_uniform_over_the_ranges_end_to_end():
    rs = [range(10, 13), range(20, 22)]
    assert [ports._pick(rs, i) for i in range(5)] == [10, 11, 12, 20, 21]

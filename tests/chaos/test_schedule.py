"""The chaos schedule is a pure function of the seed: same seed, same faults at the same
offsets; the rules it keeps hold for every seed."""

from __future__ import annotations

import itertools

import pytest

from chaos.schedule import (
    NEMESES,
    Timeouts,
    Topology,
    make_schedule,
    parse_log_dir,
    parse_nemeses,
)

ALL = tuple(NEMESES)


def test_same_seed_same_schedule():
    a = make_schedule(7, 120, ALL)
    b = make_schedule(7, 120, ALL)
    assert a == b
    assert a.to_json() == b.to_json()
    assert a.describe() == b.describe()


def test_different_seeds_differ():
    assert make_schedule(1, 120, ALL).faults != make_schedule(2, 120, ALL).faults


@pytest.mark.parametrize("seed", range(50))
def test_rules_hold_for_every_seed(seed):
    t = Timeouts(session_timeout_s=4.0, lag_time_max_s=2.0)
    s = make_schedule(seed, 90, ALL, Topology((1, 2, 3), 2, own_zookeeper=False), t)
    assert s.faults, "a 90 s run has faults"
    windows = [f for f in s.faults if f.nemesis != "elect"]
    for f in s.faults:
        assert f.end_s <= 90 or f.nemesis == "elect"
        assert "zookeeper" not in f.target or f.nemesis == "partition", \
            "ZooKeeper is killed only when the cluster runs its own"
    for prev, nxt in itertools.pairwise(windows):
        assert nxt.at_s >= prev.end_s, f"faults overlap: {prev} {nxt}"
    for f in windows:
        if f.nemesis in ("pause", "expire"):
            assert f.duration_s > t.session_timeout_s, "nothing expires otherwise"
        if f.nemesis in ("partition", "slow"):
            assert f.duration_s > t.lag_time_max_s, "the ISR never shrinks otherwise"
    for f in s.faults:
        if f.nemesis == "elect" and f.index > 0:
            prev = s.faults[f.index - 1]
            if prev.duration_s > 0:
                assert prev.at_s <= f.at_s <= prev.end_s, "an election lands mid-fault"


def test_only_the_chosen_nemeses():
    s = make_schedule(3, 120, ("kill", "pause"))
    assert {f.nemesis for f in s.faults} <= {"kill", "pause"}
    assert s.nemeses == ("kill", "pause")


def test_log_dirs_to_mount_are_those_of_disk_faults():
    s = make_schedule(11, 200, ("ext4", "enospc", "eio"))
    want = {parse_log_dir(f.target[0]) for f in s.faults if f.nemesis in ("ext4", "enospc")}
    assert set(s.log_dirs_to_mount()) == want


def test_parse_nemeses():
    assert parse_nemeses("kill, pause,kill") == ("kill", "pause")
    assert parse_nemeses("all") == ALL
    with pytest.raises(ValueError, match="unknown nemesis nope"):
        parse_nemeses("kill,nope")

"""Follower truncation by leader epochs (pure), and against real logs that diverged."""

import pytest

from broker.storage.log import Log
from broker.truncation import OUT_OF_RANGE, Divergence, follower_truncation, leader_divergence
from common.names import TopicPartition
from common.records import decode_all
from tests.storage.helpers import batch


@pytest.mark.parametrize("last_epoch, fetch_offset, leader_answer, expected", [
    (None, 10, (-1, -1), None),               # empty follower: nothing to compare
    (3, 10, (3, 15), None),                   # same epoch, leader has more
    (3, 10, (3, 10), None),
    (3, 12, (3, 10), Divergence(3, 10)),      # follower wrote past the leader's end of epoch 3
    (5, 12, (3, 10), Divergence(3, 10)),      # leader never had epoch 5
    (5, 12, (-1, -1), OUT_OF_RANGE),          # leader cannot place the epoch at all
])
def test_leader_divergence(last_epoch, fetch_offset, leader_answer, expected):
    assert leader_divergence(last_epoch, fetch_offset, leader_answer) == expected


def test_fetch_below_log_start_is_out_of_range_before_any_divergence():
    # Kafka checks the log start before comparing epochs: a divergence answer here would
    # make the follower truncate nothing and fetch the same offset again.
    assert leader_divergence(3, 4, (3, 2), log_start_offset=10) is OUT_OF_RANGE
    assert leader_divergence(3, 12, (3, 10), log_start_offset=10) == Divergence(3, 10)


@pytest.mark.parametrize("div, own, leo, hw, expected", [
    (Divergence(3, 10), (3, 12), 12, 5, (10, True)),
    (Divergence(3, 10), (2, 8), 12, 5, (8, False)),   # follower lacks epoch 3: another round
    (Divergence(-1, -1), (-1, -1), 12, 5, (5, True)),  # no epoch information: keep the HW
    (Divergence(3, 20), (3, 12), 12, 5, (12, True)),  # never truncate past our own end
])
def test_follower_truncation(div, own, leo, hw, expected):
    assert tuple(follower_truncation(div, own, leo, hw)) == expected


def test_two_diverged_logs_end_identical_after_truncation(tmp_path):
    """Leader A wrote epochs 1 and 3; follower B led epoch 2 and wrote records A never had.
    After the diverging-epoch exchange B holds exactly A's records at every offset."""
    tp = TopicPartition("t", 0)
    a = Log.open(str(tmp_path / "a"), tp, needs_recovery=False)
    b = Log.open(str(tmp_path / "b"), tp, needs_recovery=False)
    a.append_as_leader(batch(3, tag="x"), 1)
    b.append_as_follower(a.read(0, 1 << 20))
    b.append_as_leader(batch(4, tag="lost"), 2)       # B alone in epoch 2
    a.append_as_leader(batch(2, tag="y"), 3)          # A leads epoch 3
    for _ in range(3):
        div = leader_divergence(b.latest_epoch, b.log_end_offset,
                                a.end_offset_for_epoch(b.latest_epoch))
        if div is None:
            break
        own = b.end_offset_for_epoch(div.epoch)
        d = follower_truncation(div, own, b.log_end_offset, b.high_watermark)
        b.truncate_to(d.offset)
    assert b.log_end_offset == 3  # B's epoch-2 records are gone
    b.append_as_follower(a.read(b.log_end_offset, 1 << 20))
    assert [(r.offset, r.key) for r in decode_all(b.read(0, 1 << 20))] == \
        [(r.offset, r.key) for r in decode_all(a.read(0, 1 << 20))]
    assert b.read(0, 1 << 20) == a.read(0, 1 << 20)  # byte-identical
    assert b.epoch_cache.entries == a.epoch_cache.entries == [(1, 0), (3, 3)]

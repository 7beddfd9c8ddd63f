"""Which copy of a partition wins when a re-created replica meets the stale copy of a log dir
that came back (storage/placement.py): the rule table, and LogManager's startup applying it."""

import errno

import pytest

from broker.storage import placement
from broker.storage.fileops import FaultInjectingFileOps
from broker.storage.log_manager import LogManager
from broker.storage.placement import Copy, Placement, Winner, newer_copy
from common.names import TopicPartition as TP
from tests.storage.helpers import batch

D0, D1 = "/data/d0", "/data/d1"


@pytest.mark.parametrize("existing, candidate, winner", [
    # rule 1: a copy re-created because the other dir was offline supersedes it
    (Copy(D0, None), Copy(D1, Placement((D0,), 7, 100)), Winner.CANDIDATE),
    (Copy(D0, Placement((D1,), 7, 100)), Copy(D1, None), Winner.EXISTING),
    # ... even against an older record of its own that names some other dir
    (Copy(D0, Placement(("/data/d2",), 9, 500)), Copy(D1, Placement((D0,), 7, 100)),
     Winner.CANDIDATE),
    # rule 2: a record beats no record (a copy without one predates every re-creation)
    (Copy(D0, None), Copy(D1, Placement(("/data/d2",), 7, 100)), Winner.CANDIDATE),
    (Copy(D0, Placement(("/data/d2",), 7, 100)), Copy(D1, None), Winner.EXISTING),
    # rule 3: both supersede each other: the later incarnation, then the later creation
    (Copy(D0, Placement((D1,), 7, 900)), Copy(D1, Placement((D0,), 8, 100)), Winner.CANDIDATE),
    (Copy(D0, Placement((D1,), 8, 100)), Copy(D1, Placement((D0,), 8, 50)), Winner.EXISTING),
    # rule 4: nothing says which is newer
    (Copy(D0, None), Copy(D1, None), Winner.UNDECIDED),
    (Copy(D0, Placement((D1,), 8, 100)), Copy(D1, Placement((D0,), 8, 100)), Winner.UNDECIDED),
])
def test_newer_copy(existing, candidate, winner):
    assert newer_copy(existing, candidate) is winner


def test_the_record_round_trips_and_a_torn_one_counts_as_none():
    p = Placement((D0, D1), 4294967321, 17000)
    assert placement.decode(placement.encode(p)) == p
    assert placement.decode(b'{"version":1,"supers') is None
    assert placement.decode(b'{"version":1}') is None


def _manager(tmp_path, fileops=None, online=(0, 1)):
    lm = LogManager([str(tmp_path / f"d{i}") for i in range(2)], broker_id=1, cluster_id="c",
                    fileops=fileops)
    lm.startup()
    return lm


async def test_a_dir_back_after_a_restart_loses_its_stale_copy_to_the_recreated_one(tmp_path):
    """d0 held t-0 and failed; t-0 was re-created in d1 (superseding d0) and written to; the
    broker restarts with d0 readable again: the copy in d1 is loaded, d0's is deleted."""
    tp = TP("t", 0)
    lm = _manager(tmp_path)
    old = lm.get_or_create_log(tp, log_dir=lm.dirs[0].path)
    await lm.run(tp, old.append_as_leader, batch(3, tag="stale"), 0)
    lm.checkpoint()
    lm.mark_offline(lm.dirs[0].path, "EIO")  # the dir's files stay where they are
    new = lm.get_or_create_log(tp, broker_epoch=42)
    assert new.log_dir == lm.dirs[1].path
    assert placement.read(new.dir, lm.fileops).supersedes == (lm.dirs[0].path,)
    await lm.run(tp, new.append_as_leader, batch(5, tag="fresh"), 1)
    lm.shutdown()

    lm = _manager(tmp_path)  # d0 loads first, then d1's copy supersedes it
    assert lm.log_dir_of(tp) is lm.dirs[1] and lm.get_log(tp).log_end_offset == 5
    assert not (tmp_path / "d0" / "t-0").exists()
    assert not [p for p in (tmp_path / "d0").iterdir() if p.name.startswith("t-0")]
    assert lm.stale_copies_deleted == [(tp, lm.dirs[0].path, lm.dirs[1].path)]
    lm.checkpoint()
    assert "t 0" not in (tmp_path / "d0" / "recovery-point-offset-checkpoint").read_text()
    lm.shutdown()


def test_two_copies_without_records_keep_the_refusal(tmp_path):
    tp = TP("t", 0)
    lm = _manager(tmp_path)
    lm.get_or_create_log(tp, log_dir=lm.dirs[0].path)
    lm.shutdown()
    (tmp_path / "d1" / "t-0").mkdir()
    lm = _manager(tmp_path)
    assert not lm.dirs[1].online and "duplicate log directories" in lm.dirs[1].error
    assert lm.log_dir_of(tp) is lm.dirs[0]
    lm.shutdown()


def test_no_record_is_written_when_no_copy_can_exist_elsewhere(tmp_path):
    lm = _manager(tmp_path)
    log = lm.get_or_create_log(TP("t", 0))
    assert placement.read(log.dir, lm.fileops) is None
    lm.shutdown()


def test_a_recreated_log_avoids_the_dir_its_log_failed_in(tmp_path):
    fo = FaultInjectingFileOps()
    lm = _manager(tmp_path, fileops=fo)
    tp = TP("t", 0)
    log = lm.get_or_create_log(tp, log_dir=lm.dirs[0].path)
    fo.fail(log.dir, errno.EIO)
    assert lm.take_log_offline(tp, "EIO") == lm.dirs[0].path
    lm.get_or_create_log(TP("u", 0), log_dir=lm.dirs[1].path)  # d1 now holds more
    again = lm.get_or_create_log(tp)
    assert again.log_dir == lm.dirs[1].path
    assert placement.read(again.dir, fo).supersedes == (lm.dirs[0].path,)
    fo.clear()
    lm.shutdown()

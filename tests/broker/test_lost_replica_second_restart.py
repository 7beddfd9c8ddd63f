"""A replica set aside as lost at one start must still count as lost at the next start, until a
LeaderAndIsr re-creates it (is_new). Found by the whole-cluster simulation's jbod profile
(seeds 565 and 996 of `python -m tests.sim cluster --seeds 0-1499 --steps 60 --profile jbod`):

1. broker 5's log dir d0 fails and loses t2-0; the notifier records the copy lost
   (/brokers/lost_replicas/5) and writes a /restart_partitions entry;
2. the broker restarts before the controller handled the entry: LogManager sets the copy in d0
   aside (``-stray``) and BrokerServer forgets the record for every dir it read;
3. the broker restarts once more, still before the restart reached it: nothing says t2-0 was
   lost - no log, no record, no offline dir - so the controller's LeaderAndIsr (not is_new:
   the broker is still its leader and ISR member) creates an EMPTY log, and the broker leads
   it cleanly: every committed record of t2-0 is gone (seed 996: "broker 2 became leader at
   epoch 15 without committed offsets [0, 1, 2, 3, 4]").

The fix (broker/storage/log_manager.py): at startup, a ``-stray`` copy
of a partition no dir holds a log of is a replica lost here and not re-created since -
``_load_dir`` notes the partition of each ``<tp>.<id>-stray`` dir it skips, and ``startup`` adds
``(tp, dir)`` to ``set_aside`` for each one with no log loaded (so ReplicaManager counts it in
``offline_replicas`` and refuses a LeaderAndIsr without is_new, which writes a fresh restart
entry). A stray of a deleted topic only costs a refused request for a topic that no longer
sends any; a re-created replica has a log, so its old strays no longer count.
"""

from __future__ import annotations

from broker.storage.log import LogConfig
from broker.storage.log_manager import LogManager
from common import records as rec
from common.names import TopicPartition

TP = TopicPartition("t2", 0)


def _manager(tmp_path, lost=None) -> LogManager:
    lm = LogManager([str(tmp_path / "d0"), str(tmp_path / "d1")], 5, LogConfig(),
                    cluster_id="c", lost_replicas=lost)
    lm.startup()
    return lm


def test_a_copy_set_aside_as_lost_still_counts_as_lost_at_the_next_start(tmp_path) -> None:
    lm = _manager(tmp_path)
    log = lm.get_or_create_log(TP, str(tmp_path / "d0"))
    log.append_as_leader(rec.build_batch([rec.ProducerRecord(None, b"committed")], now_ms=0), 0)
    lm.shutdown()
    # the dir failed and the copy was recorded lost; the next start sets it aside
    d0 = str(tmp_path / "d0")
    again = _manager(tmp_path, lost={d0: {TP}})
    assert again.get_log(TP) is None and again.set_aside == [(TP, d0)]
    again.shutdown()
    # BrokerServer forgot the record once d0 was read; no LeaderAndIsr re-created the replica
    third = _manager(tmp_path)
    try:
        assert third.get_log(TP) is None
        assert third.set_aside == [(TP, d0)], \
            "the lost replica is forgotten: a LeaderAndIsr without is_new would create it empty"
    finally:
        third.shutdown()

"""Each transform of analytics/transforms.py on a small hand-built frame, with exact rows."""
# ruff: noqa: C408 - dict(ts=..., event=...) reads as an event record

from __future__ import annotations

from analytics import transforms as T
from tests.analytics.conftest import rows


def _no_scrapes(scrapes):
    """Only an unrelated process's: no transitions, no failed scrapes."""
    return scrapes(dict(ts=0.0, process="broker-9", ok=True))


def _no_transitions(scrapes):
    return T.process_transitions(_no_scrapes(scrapes))


def _losses(ev, sc):
    return T.leader_losses(ev, T.process_transitions(sc), sc)


def test_process_transitions_midpoint_of_the_two_scrapes(scrapes):
    s = scrapes(dict(ts=1.0, process="broker-1", ok=True), dict(ts=2.0, process="broker-1", ok=True),
                dict(ts=3.0, process="broker-1", ok=False), dict(ts=4.0, process="broker-1", ok=False),
                dict(ts=5.0, process="broker-1", ok=True), dict(ts=1.0, process="broker-2", ok=True))
    got = rows(T.process_transitions(s).orderBy("ts"))
    assert got == [
        dict(process="broker-1", role="broker", node_id=1, kind="down", before_ts=2.0,
             after_ts=3.0, ts=2.5, uncertainty_s=0.5),
        dict(process="broker-1", role="broker", node_id=1, kind="up", before_ts=4.0,
             after_ts=5.0, ts=4.5, uncertainty_s=0.5),
    ]


def test_failover_from_broker_failed_detection(events, scrapes):
    # The example: a leader lost at t=10.000, a new leader serving at t=13.250.
    ev = events(
        dict(ts=10.0, event="broker_failed", broker=1),
        dict(ts=10.5, event="leader_election", partition="t-0", old_leader=1, new_leader=2,
             leader_epoch=3, reason="offline", unclean=False),
        dict(ts=13.25, event="become_leader", partition="t-0", leader_epoch=3, node=2))
    losses = _losses(ev, _no_scrapes(scrapes))
    got = rows(T.failovers(losses, ev))
    assert got == [dict(partition="t-0", cause="broker_down", old_leader=1, new_leader=2,
                        leader_epoch=3, loss_ts=10.0, loss_source="detection",
                        loss_uncertainty_s=0.0, serving_ts=13.25, failover_s=3.25)]


def test_failover_loss_from_scrapes_beats_detection(events, scrapes):
    # The exporter saw broker 1 answer at 9.0 and not at 9.5: lost at 9.25 (+-0.25), before
    # the controller's detection at 12.0.
    sc = scrapes(dict(ts=9.0, process="broker-1", ok=True),
                 dict(ts=9.5, process="broker-1", ok=False))
    ev = events(
        dict(ts=12.0, event="broker_failed", broker=1),
        dict(ts=12.1, event="leader_election", partition="t-0", old_leader=1, new_leader=3,
             leader_epoch=5, reason="offline"),
        dict(ts=12.2, event="leader_election", partition="t-1", old_leader=2, new_leader=3,
             leader_epoch=1, reason="preferred"),
        dict(ts=12.3, event="become_leader", partition="t-0", leader_epoch=5, node=3))
    got = rows(T.failovers(_losses(ev, sc), ev))
    assert got == [dict(partition="t-0", cause="broker_down", old_leader=1, new_leader=3,
                        leader_epoch=5, loss_ts=9.25, loss_source="scrape",
                        loss_uncertainty_s=0.25, serving_ts=12.3, failover_s=3.05)]


def _failed_then_detected(events):
    return events(
        dict(ts=12.0, event="broker_failed", broker=1),
        dict(ts=12.1, event="leader_election", partition="t-0", old_leader=1, new_leader=3,
             leader_epoch=5, reason="offline"),
        dict(ts=12.3, event="become_leader", partition="t-0", leader_epoch=5, node=3))


def _loss(events, sc):
    ev = _failed_then_detected(events)
    [r] = rows(T.failovers(_losses(ev, sc), ev))
    return r["loss_source"], r["loss_ts"], r["loss_uncertainty_s"], r["failover_s"]


def test_failover_loss_from_a_first_scrape_that_failed(events, scrapes):
    # The exporter started after broker 1 died: it never saw it answer, but it was refused at
    # 10.0, so the leader was lost then or earlier - not at the detection at 12.0.
    sc = scrapes(dict(ts=10.0, process="broker-1", ok=False),
                 dict(ts=10.5, process="broker-1", ok=False),
                 dict(ts=10.0, process="broker-2", ok=True))
    assert _loss(events, sc) == ("first_scrape", 10.0, 0.0, 2.3)


def test_failover_first_scrape_only_when_it_says_more_than_detection(events, scrapes):
    # Started after the detection: broker_failed is the earlier bound.
    late = scrapes(dict(ts=12.05, process="broker-1", ok=False))
    assert _loss(events, late) == ("detection", 12.0, 0.0, 0.3)
    # Answered between the failed first scrape and the election (not yet started, a pause):
    # the failure is not this loss.
    came_back = scrapes(dict(ts=10.0, process="broker-1", ok=False),
                        dict(ts=10.5, process="broker-1", ok=True))
    assert _loss(events, came_back) == ("detection", 12.0, 0.0, 0.3)
    # A failed scrape after an answer is a transition: the midpoint, not the failed scrape.
    seen = scrapes(dict(ts=9.5, process="broker-1", ok=True),
                   dict(ts=10.0, process="broker-1", ok=False))
    assert _loss(events, seen) == ("scrape", 9.75, 0.25, 2.55)
    # Over MAX_DETECTION_S before the election: not its cause.
    old = scrapes(dict(ts=12.1 - T.MAX_DETECTION_S - 1, process="broker-1", ok=False))
    assert _loss(events, old) == ("detection", 12.0, 0.0, 0.3)


def test_failover_causes_and_unserved(events, scrapes):
    ev = events(
        dict(ts=20.0, event="log_dir_offline", node=1, log_dir="/d1", partitions=["t-0"]),
        dict(ts=20.5, event="leader_election", partition="t-0", old_leader=1, new_leader=2,
             leader_epoch=4, reason="restarted"),
        dict(ts=21.0, event="become_leader", partition="t-0", leader_epoch=4, node=2),
        dict(ts=30.0, event="leader_election", partition="t-1", old_leader=2, new_leader=3,
             leader_epoch=7, reason="relinquished"),
        dict(ts=30.5, event="become_leader", partition="t-1", leader_epoch=7, node=3),
        # No eligible leader: leaderless until the next election's leader serves.
        dict(ts=40.0, event="leader_election", partition="t-2", old_leader=3, new_leader=-1,
             leader_epoch=2, reason="offline"),
        dict(ts=45.0, event="leader_election", partition="t-2", old_leader=-1, new_leader=1,
             leader_epoch=3, reason="offline"),
        dict(ts=45.5, event="become_leader", partition="t-2", leader_epoch=3, node=1),
        dict(ts=50.0, event="leader_election", partition="t-3", old_leader=3, new_leader=-1,
             leader_epoch=9, reason="offline"))
    f = T.failovers(_losses(ev, _no_scrapes(scrapes)), ev)
    got = [(r["partition"], r["cause"], r["loss_source"], r["new_leader"], r["failover_s"])
           for r in f.collect()]
    assert got == [("t-0", "log_dir_offline", "log_dir_offline", 2, 1.0),
                   ("t-1", "relinquished", "election", 3, 0.5),
                   ("t-2", "broker_down", "election", 1, 5.5),
                   ("t-3", "broker_down", "election", -1, None)]
    summary = rows(T.failover_summary(f))
    assert summary == [
        dict(cause="broker_down", count=2, unserved=1, p50_s=5.5, p90_s=5.5, p99_s=5.5,
             max_s=5.5),
        dict(cause="log_dir_offline", count=1, unserved=0, p50_s=1.0, p90_s=1.0, p99_s=1.0,
             max_s=1.0),
        dict(cause="relinquished", count=1, unserved=0, p50_s=0.5, p90_s=0.5, p99_s=0.5,
             max_s=0.5),
    ]
    avail = rows(T.availability(f, T.partitions(ev).union(
        T.partitions(events(dict(ts=1.0, event="become_leader", partition="t-9", node=1)))),
        span_start=0.0, span_end=100.0))
    assert avail == [
        dict(partition="t-0", windows=1, open_windows=0, total_leaderless_s=1.0,
             longest_leaderless_s=1.0, availability_pct=99.0),
        dict(partition="t-1", windows=1, open_windows=0, total_leaderless_s=0.5,
             longest_leaderless_s=0.5, availability_pct=99.5),
        dict(partition="t-2", windows=1, open_windows=0, total_leaderless_s=5.5,
             longest_leaderless_s=5.5, availability_pct=94.5),
        dict(partition="t-3", windows=1, open_windows=1, total_leaderless_s=50.0,
             longest_leaderless_s=50.0, availability_pct=50.0),
        dict(partition="t-9", windows=0, open_windows=0, total_leaderless_s=0.0,
             longest_leaderless_s=0.0, availability_pct=100.0),
    ]


def test_skew_bound_from_causality(events):
    ev = events(
        dict(ts=10.0, event="leader_election", partition="t-0", old_leader=1, new_leader=2,
             leader_epoch=3, reason="offline"),
        dict(ts=9.8, event="become_leader", partition="t-0", leader_epoch=3, node=2),
        dict(ts=11.0, event="leader_election", partition="t-1", old_leader=1, new_leader=3,
             leader_epoch=1, reason="offline"),
        dict(ts=11.1, event="become_leader", partition="t-1", leader_epoch=1, node=3))
    assert rows(T.skew_bound(ev)) == [dict(skew_bound_s=0.2, pairs=2)]


def _isr_events(events):
    return events(
        # One write, seen by the controller and by the leader: one change.
        dict(ts=10.0, event="isr_change", partition="t-0", old_isr=[1, 2, 3], new_isr=[1, 2],
             partition_epoch=5),
        dict(ts=10.1, event="isr_shrink", partition="t-0", node=1, old_isr=[1, 2, 3],
             isr=[1, 2], partition_epoch=5),
        dict(ts=20.0, event="broker_started", node=3),
        dict(ts=22.0, event="isr_expand", partition="t-0", node=1, old_isr=[1, 2],
             isr=[1, 2, 3], partition_epoch=6),
        dict(ts=30.0, event="isr_shrink", partition="t-0", node=1, old_isr=[1, 2, 3],
             isr=[1, 3], partition_epoch=7),
        dict(ts=35.0, event="isr_expand", partition="t-0", node=1, old_isr=[1, 3],
             isr=[1, 3, 2], partition_epoch=8),
        dict(ts=40.0, event="isr_shrink", partition="t-1", node=2, old_isr=[2, 3],
             isr=[2], partition_epoch=2))


def test_isr_changes_dedup_and_churn(events):
    ch = T.isr_changes(_isr_events(events))
    assert [(r["partition"], r["ts"], r["kind"]) for r in ch.orderBy("ts").collect()] == [
        ("t-0", 10.0, "shrink"), ("t-0", 22.0, "expand"), ("t-0", 30.0, "shrink"),
        ("t-0", 35.0, "expand"), ("t-1", 40.0, "shrink")]
    assert rows(T.isr_churn_by_partition(ch)) == [
        dict(partition="t-0", shrinks=2, expands=2), dict(partition="t-1", shrinks=1, expands=0)]
    rc = T.isr_replica_changes(ch)
    assert rows(T.isr_churn_by_broker(rc)) == [
        dict(broker=2, shrinks=1, expands=1), dict(broker=3, shrinks=2, expands=1)]
    assert rows(T.flapping_partitions(ch, window_s=30.0, min_changes=4)) == [
        dict(partition="t-0", changes=4, max_changes_in_window=4, first_flap_ts=35.0)]
    assert rows(T.flapping_partitions(ch, window_s=20.0, min_changes=4)) == []


def test_replica_recoveries(events, scrapes):
    ev = _isr_events(events)
    # Broker 2 paused: no answer from 29.0, answering again at 33.0 (midpoint 32.5).
    sc = scrapes(dict(ts=28.0, process="broker-2", ok=True),
                 dict(ts=29.0, process="broker-2", ok=False),
                 dict(ts=32.0, process="broker-2", ok=False),
                 dict(ts=33.0, process="broker-2", ok=True))
    rc = T.isr_replica_changes(T.isr_changes(ev))
    got = rows(T.replica_recoveries(rc, ev, T.process_transitions(sc)))
    assert got == [
        dict(partition="t-0", broker=3, cause="restart", out_ts=10.0, back_ts=20.0,
             rejoin_ts=22.0, recovery_s=2.0, out_of_isr_s=12.0),
        dict(partition="t-0", broker=2, cause="resumed", out_ts=30.0, back_ts=32.5,
             rejoin_ts=35.0, recovery_s=2.5, out_of_isr_s=5.0),
    ]


def test_recovery_of_a_replica_resumed_within_one_sampling_interval(events, scrapes):
    # SIGSTOPped broker 2 answers again between the scrapes at 32.0 and 33.0; it was back in
    # the ISR at 32.4, before the transition's midpoint: it resumed in [32.0, 32.4].
    ev = events(
        dict(ts=30.0, event="isr_shrink", partition="t-0", node=1, old_isr=[1, 2], isr=[1],
             partition_epoch=3),
        dict(ts=32.4, event="isr_expand", partition="t-0", node=1, old_isr=[1], isr=[1, 2],
             partition_epoch=4))
    sc = scrapes(dict(ts=28.0, process="broker-2", ok=True),
                 dict(ts=29.0, process="broker-2", ok=False),
                 dict(ts=32.0, process="broker-2", ok=False),
                 dict(ts=33.0, process="broker-2", ok=True))
    rc = T.isr_replica_changes(T.isr_changes(ev))
    assert rows(T.replica_recoveries(rc, ev, T.process_transitions(sc))) == [
        dict(partition="t-0", broker=2, cause="resumed", out_ts=30.0, back_ts=32.2,
             rejoin_ts=32.4, recovery_s=0.2, out_of_isr_s=2.4)]


def test_recovery_of_a_recreated_replica_and_lagging_one(events, scrapes):
    ev = events(
        dict(ts=1.0, event="isr_shrink", partition="t-0", node=1, old_isr=[1, 2], isr=[1],
             partition_epoch=1),
        dict(ts=2.0, event="replica_recreated", partition="t-0", node=2, log_dir="/d0"),
        dict(ts=2.0, event="broker_started", node=2),
        dict(ts=4.5, event="isr_expand", partition="t-0", node=1, old_isr=[1], isr=[1, 2],
             partition_epoch=2),
        dict(ts=5.0, event="isr_shrink", partition="t-1", node=1, old_isr=[1, 3], isr=[1],
             partition_epoch=1),
        dict(ts=8.0, event="isr_expand", partition="t-1", node=1, old_isr=[1], isr=[1, 3],
             partition_epoch=2))
    rc = T.isr_replica_changes(T.isr_changes(ev))
    got = [(r["partition"], r["broker"], r["cause"], r["recovery_s"], r["out_of_isr_s"])
           for r in T.replica_recoveries(rc, ev, _no_transitions(scrapes)).collect()]
    assert got == [("t-0", 2, "recreated", 2.5, 3.5), ("t-1", 3, "caught_up", 3.0, 3.0)]


def test_unclean_elections_and_recoveries(events):
    # Field for field as controller/core.py emits them (copied from the event log), with
    # controller_epoch and the fields the analysis does not read.
    ev = events(
        # A blind unclean election (unclean.leader.election.enable, ELR off): what it
        # discarded is what the followers truncated at its leader epoch.
        dict(ts=5.0, event="leader_election", partition="t-0", old_leader=1, new_leader=3,
             leader_epoch=4, unclean=True, reason="offline", isr=[3], partition_epoch=6,
             controller_epoch=1),
        dict(ts=6.0, event="truncated", partition="t-0", node=1, leader=3, leader_epoch=4,
             diverging_epoch=3, diverging_end_offset=100, from_offset=120, to_offset=100,
             complete=True),
        dict(ts=6.1, event="truncated", partition="t-0", node=2, leader=3, leader_epoch=4,
             diverging_epoch=3, diverging_end_offset=100, from_offset=110, to_offset=100,
             complete=True),
        dict(ts=6.2, event="truncated", partition="t-0", node=2, leader=3, leader_epoch=3,
             diverging_epoch=2, diverging_end_offset=0, from_offset=500, to_offset=0,
             complete=True),
        # KIP-966 recoveries: p-0 elected (3 has the newest leader epoch, 2 the longest log:
        # 5 offsets discarded by the controller's count, whatever the followers truncate).
        dict(ts=7.0, event="unclean_recovery_started", partition="p-0", strategy="Proactive",
             forced=False, replicas=[3, 1, 2], last_known_elr=[], controller_epoch=1),
        dict(ts=11.5, event="leader_election", partition="p-0", old_leader=-1, new_leader=3,
             leader_epoch=4, unclean=True, reason="unclean_recovery", isr=[3],
             partition_epoch=5, controller_epoch=1),
        dict(ts=11.5, event="unclean_recovery_finished", partition="p-0", strategy="Proactive",
             forced=False, outcome="elected", candidates=[3, 1, 2],
             answers={"1": {"last_written_leader_epoch": 2, "log_end_offset": 10,
                            "error": "NONE"},
                      "2": {"last_written_leader_epoch": 2, "log_end_offset": 40,
                            "error": "NONE"},
                      "3": {"last_written_leader_epoch": 3, "log_end_offset": 35,
                            "error": "NONE"}},
             waited_ms=4500, leader=3, leader_epoch=4, offsets_discarded=5, controller_epoch=1),
        dict(ts=12.0, event="truncated", partition="p-0", node=2, leader=3, leader_epoch=4,
             diverging_epoch=2, diverging_end_offset=35, from_offset=40, to_offset=35,
             complete=True),
        # b-0: dropped (its LastKnownELR member died mid-query); b-1: still running at the end.
        dict(ts=7.0, event="unclean_recovery_started", partition="b-0", strategy="Balanced",
             forced=False, replicas=[1, 2, 3], last_known_elr=[2, 3], controller_epoch=1),
        dict(ts=7.0, event="unclean_recovery_started", partition="b-1", strategy="Balanced",
             forced=False, replicas=[2, 3, 1], last_known_elr=[2, 3], controller_epoch=1),
        dict(ts=8.0, event="unclean_recovery_finished", partition="b-0", strategy="Balanced",
             forced=False, outcome="dropped", candidates=[1, 2, 3], answers={}, waited_ms=1000,
             reason="waiting for LastKnownELR members 3 (Balanced)", controller_epoch=1),
        # m-0: ElectLeaders(UNCLEAN) under Manual; no live replica could report its log.
        dict(ts=9.0, event="unclean_recovery_started", partition="m-0", strategy="Manual",
             forced=True, replicas=[1, 2], last_known_elr=[], controller_epoch=1),
        dict(ts=19.0, event="unclean_recovery_finished", partition="m-0", strategy="Manual",
             forced=True, outcome="failed", candidates=[1, 2],
             answers={"2": {"last_written_leader_epoch": -1, "log_end_offset": -1,
                            "error": "KAFKA_STORAGE_ERROR"}},
             waited_ms=10000, reason="no live replica answered usably", controller_epoch=1),
        # Clean: not listed.
        dict(ts=8.0, event="leader_election", partition="t-2", old_leader=1, new_leader=2,
             leader_epoch=1, unclean=False, reason="offline", isr=[2], partition_epoch=2,
             controller_epoch=1))
    rec = dict(kind="recovery", old_leader=None, chosen_replica=None, leader_epoch=None,
               candidates=None, answered=None, waited_ms=None, offsets_discarded=None)
    assert rows(T.unclean_elections(ev)) == [
        dict(partition="t-0", ts=5.0, kind="election", strategy=None, outcome=None,
             old_leader=1, chosen_replica=3, leader_epoch=4, candidates=None, answered=None,
             waited_ms=None, offsets_discarded=30),
        {**rec, "partition": "b-1", "ts": 7.0, "strategy": "Balanced", "outcome": "running"},
        {**rec, "partition": "b-0", "ts": 8.0, "strategy": "Balanced", "outcome": "dropped",
         "candidates": [1, 2, 3], "answered": 0, "waited_ms": 1000},
        {**rec, "partition": "p-0", "ts": 11.5, "strategy": "Proactive", "outcome": "elected",
         "old_leader": -1, "chosen_replica": 3, "leader_epoch": 4, "candidates": [3, 1, 2],
         "answered": 3, "waited_ms": 4500, "offsets_discarded": 5},
        {**rec, "partition": "m-0", "ts": 19.0, "strategy": "Manual", "outcome": "failed",
         "candidates": [1, 2], "answered": 0, "waited_ms": 10000},
    ]


def test_log_dir_failures_time_to_rereplicate(events):
    ev = events(
        dict(ts=10.0, event="log_dir_offline", node=2, log_dir="/d1", partitions=["t-0", "t-1"]),
        dict(ts=10.2, event="isr_change", partition="t-0", old_isr=[1, 2], new_isr=[1],
             partition_epoch=3),
        dict(ts=17.5, event="isr_expand", partition="t-0", node=1, old_isr=[1], isr=[1, 2],
             partition_epoch=4))
    rc = T.isr_replica_changes(T.isr_changes(ev))
    assert rows(T.log_dir_failures(ev, rc)) == [
        dict(broker=2, log_dir="/d1", ts=10.0, partition="t-0", rereplicated_ts=17.5,
             time_to_rereplicate_s=7.5),
        dict(broker=2, log_dir="/d1", ts=10.0, partition="t-1", rereplicated_ts=None,
             time_to_rereplicate_s=None),
    ]


def _moves(events):
    """Reassignments as controller/core.py logs them (with controller_epoch, the steps and the
    fields the analysis does not read)."""
    def started(ts, tp, original, target, adding, removing, source="rpc",
                event="reassignment_started"):
        return dict(ts=ts, event=event, partition=tp, source=source, original=original,
                    target=target, adding=adding, removing=removing, controller_epoch=1)

    def step(ts, tp, n, **kw):
        return dict(ts=ts, event="reassignment_step", partition=tp, step=n, controller_epoch=1,
                    **kw)

    def completed(ts, tp, replicas, added, removed):
        return dict(ts=ts, event="reassignment_completed", partition=tp, replicas=replicas,
                    removed=removed, added=added, controller_epoch=1)
    return events(
        started(1.5, "t-0", [1, 2, 3], [2, 3, 4], [4], [1]),
        step(1.5, "t-0", 1, replicas=[2, 3, 4, 1]),
        step(1.5, "t-0", 2, adding=[4]),
        # A new controller resumes it: the same reassignment.
        started(3.0, "t-0", [1, 2, 3], [2, 3, 4], [4], [1], source="failover"),
        step(4.5, "t-0", 3, isr=[2, 3, 1, 4]),
        step(4.5, "t-0", 4, leader=2),
        step(4.5, "t-0", 5, removed=[1]),
        step(4.5, "t-0", 6, replicas=[2, 3, 4]),
        step(4.5, "t-0", 7),
        completed(4.5, "t-0", [2, 3, 4], [4], [1]),
        # Adds to broker 4 too, in a sampling interval t-0's last one shares.
        started(4.8, "t-1", [1, 2], [4, 1], [4], [2]),
        completed(6.5, "t-1", [4, 1], [4], [2]),
        started(10.2, "t-2", [1, 2], [5, 2], [5], [1]),
        completed(12.0, "t-2", [5, 2], [5], [1]),
        # Cancelled: back to the original replicas (broker 3's counter was not exported).
        started(13.0, "t-3", [1, 2], [1, 3], [3], [2]),
        started(14.0, "t-3", [1, 2], [1, 2], [], [3], event="reassignment_cancelled"),
        completed(14.5, "t-3", [1, 2], [], [3]),
        # A reorder: nothing to copy. Then one still moving when the data ends.
        started(14.6, "t-4", [1, 2], [2, 1], [], []),
        completed(14.7, "t-4", [2, 1], [], []),
        started(15.0, "t-5", [1, 2], [1, 4], [4], [2]),
        # invalid_state_transition's "target" is a state name: read, not a reassignment.
        dict(ts=15.5, event="invalid_state_transition", kind="partition", key="t-9",
             current="NonExistentPartition", target="OnlinePartition", message="refused",
             controller_epoch=1, role="controller"))


def _reassignment_bytes(samples):
    m = T.REASSIGNMENT_BYTES_IN
    # broker 4: 10*k bytes in the interval ending at k s; broker 5 restarts before 12.0.
    b4, total = [], 0
    for k in range(17):
        total += 10 * k
        b4.append(dict(ts=float(k), process="broker-4", metric=m, value=float(total)))
    b5 = [dict(ts=ts, process="broker-5", metric=m, value=v)
          for ts, v in ((9.0, 1000.0), (10.0, 1000.0), (11.0, 1500.0), (12.0, 200.0),
                        (13.0, 300.0))]
    other = [dict(ts=float(k), process="broker-4",
                  metric="kafka_server_brokertopicmetrics_replicationbytesin_total",
                  value=1e6 * k) for k in range(17)]
    return samples(*b4, *b5, *other)


def test_reassignments_durations_outcomes_and_bytes(events, samples):
    got = rows(T.reassignments(_moves(events), _reassignment_bytes(samples)))
    keys = ("partition", "started_ts", "completed_ts", "duration_s", "outcome", "original",
            "target", "adding", "bytes_moved", "bytes_shared_with")
    assert got == [dict(zip(keys, r, strict=True)) for r in [
        # (1,2] .. (4,5]: 20+30+40+50; (4,5] is shared with t-1.
        ("t-0", 1.5, 4.5, 3.0, "completed", [1, 2, 3], [2, 3, 4], [4], 140, 1),
        ("t-1", 4.8, 6.5, 1.7, "completed", [1, 2], [4, 1], [4], 180, 1),
        # (10,11]: 500; (11,12]: restarted, 200 since.
        ("t-2", 10.2, 12.0, 1.8, "completed", [1, 2], [5, 2], [5], 700, 0),
        ("t-3", 13.0, 14.5, 1.5, "cancelled", [1, 2], [1, 2], [3], None, 0),
        ("t-4", 14.6, 14.7, 0.1, "completed", [1, 2], [2, 1], [], 0, 0),
        ("t-5", 15.0, None, None, None, [1, 2], [1, 4], [4], 160, 0),
    ]]


def test_empty_tables_without_log_dir_failures_reassignments_or_unclean_leaders(events,
                                                                                 samples):
    ev = events(dict(ts=1.0, event="become_leader", partition="t-0", leader_epoch=0, node=1))
    rc = T.isr_replica_changes(T.isr_changes(ev))
    assert rows(T.reassignments(ev, _reassignment_bytes(samples))) == []
    assert rows(T.log_dir_failures(ev, rc)) == []
    assert rows(T.unclean_elections(ev)) == []


def test_counter_rates_across_a_restart_and_lag(samples):
    b = "kafka_server_brokertopicmetrics_bytesin_total"
    s = samples(dict(ts=0.0, process="broker-1", metric=b, value=0.0),
                dict(ts=1.0, process="broker-1", metric=b, value=1000.0),
                dict(ts=2.0, process="broker-1", metric=b, value=3000.0),
                dict(ts=4.0, process="broker-1", metric=b, value=500.0),   # restarted
                dict(ts=1.0, process="broker-2", metric=T.MAX_LAG, labels={"clientId": "Replica"},
                     value=7.0),
                dict(ts=1.0, process="broker-2", metric=T.MAX_LAG,
                     labels={"clientId": "ReplicaAlterLogDirs"}, value=99.0))
    r = T.counter_rates(s)
    assert rows(r) == [
        dict(ts=1.0, process="broker-1", node_id=1, series="bytes_in", rate=1000.0,
             increase=1000.0),
        dict(ts=2.0, process="broker-1", node_id=1, series="bytes_in", rate=2000.0,
             increase=2000.0),
        dict(ts=4.0, process="broker-1", node_id=1, series="bytes_in", rate=250.0,
             increase=500.0),
    ]
    assert rows(T.throughput_by_broker(r)) == [
        dict(process="broker-1", series="bytes_in", mean_rate=1083.333, max_rate=2000.0,
             total=3500.0)]
    assert rows(T.follower_lag(s)) == [dict(ts=1.0, process="broker-2", node_id=2, max_lag=7.0)]


def test_normalize_events_from_raw_lines(spark):
    from analytics.schema import EVENT_SCHEMA
    names = [f.name for f in EVENT_SCHEMA.fields]
    raw = [dict(timestamp="2024-05-01T10:00:01.250000Z", event="become_leader", process="broker",
                broker=2, partition="t-0", leader_epoch=1),
           dict(timestamp="2024-05-01T10:00:00Z", event="broker_failed", process="controller",
                controller_id=100, broker=1),
           dict(timestamp=None, event=None, _corrupt_record='{"event": "trunc')]
    df = spark.createDataFrame([tuple(r.get(n) for n in names) for r in raw], EVENT_SCHEMA)
    got = [(r["ts"], r["role"], r["node"], r["source"], r["event"], r["broker"])
           for r in T.normalize_events(df).orderBy("ts").collect()]
    assert got == [(1714557600.0, "controller", 100, "controller-100", "broker_failed", 1),
                   (1714557601.25, "broker", 2, "broker-2", "become_leader", 2)]

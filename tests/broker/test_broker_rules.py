"""The broker's pure rules moved out of the replica manager and the servicer:
tables of inputs and the expected answer, no I/O."""

from types import SimpleNamespace as NS

import pytest

from broker import fencing, isr, partition_state
from broker.delayed_produce import ProduceWait, batch_intact, produce_wait
from broker.log_dirs import ReplicaInDir, describe_log_dir, offset_lag
from broker.metadata_cache import MetadataCache, PartitionInfo, offline_replicas, partition_error
from broker.servicer import leader_and_isr_request, stop_replica_request, update_metadata_request
from broker.truncation import leader_end_for_epoch
from common.errors import ErrorCode as E
from common.names import TopicPartition as TP
from common.rpc import replog_pb2 as pb


def replica(is_leader=True, leader_epoch=5, isr=(1, 2), min_isr=2):
    return NS(is_leader=is_leader, leader_epoch=leader_epoch, isr=isr, min_isr=min_isr)


# ---------------------------------------------------------------------- fencing

@pytest.mark.parametrize("requested, held, new", [(5, 5, False), (6, 5, True), (4, 5, True),
                                                  (0, None, True)])
def test_is_new_leader_epoch(requested, held, new):
    assert fencing.is_new_leader_epoch(requested, held) is new


@pytest.mark.parametrize("rep, known, requested, expected", [
    (None, True, None, E.NOT_LEADER_OR_FOLLOWER),        # the client's metadata is stale
    (None, False, None, E.UNKNOWN_TOPIC_OR_PARTITION),
    (replica(is_leader=False), True, 5, E.NOT_LEADER_OR_FOLLOWER),
    (replica(is_leader=False), True, 4, E.NOT_LEADER_OR_FOLLOWER),  # leader check first
    (replica(), True, 4, E.FENCED_LEADER_EPOCH),
    (replica(), True, 6, E.UNKNOWN_LEADER_EPOCH),
    (replica(), True, None, None),
    (replica(), True, 5, None),
])
def test_leader_request_error(rep, known, requested, expected):
    assert fencing.leader_request_error(rep, known, requested) == expected


@pytest.mark.parametrize("sent, recorded, stale", [(-1, 7, False), (6, 7, True), (7, 7, False),
                                                   (8, 7, False), (3, -1, False)])
def test_follower_fetch_is_stale_kip_903(sent, recorded, stale):
    assert fencing.follower_fetch_is_stale(sent, recorded) is stale


@pytest.mark.parametrize("broker_id, epoch, expected", [
    (1, 10, None), (1, -1, None), (2, 10, E.INVALID_REQUEST), (1, 9, E.STALE_BROKER_EPOCH),
    (1, 11, E.STALE_BROKER_EPOCH),  # KIP-966: exactly this incarnation
])
def test_replica_log_info_error(broker_id, epoch, expected):
    got = fencing.replica_log_info_error(broker_id, epoch, 1, 10)
    assert (got[0] if got else None) == expected


@pytest.mark.parametrize("acks, expected", [(-1, None), (0, None), (1, None),
                                            (2, E.INVALID_REQUIRED_ACKS),
                                            (-2, E.INVALID_REQUIRED_ACKS)])
def test_acks_error(acks, expected):
    assert fencing.acks_error(acks) == expected


@pytest.mark.parametrize("rep, known, acks, expected", [
    (None, True, -1, E.NOT_LEADER_OR_FOLLOWER),
    (None, False, 1, E.UNKNOWN_TOPIC_OR_PARTITION),
    (replica(is_leader=False), True, 1, E.NOT_LEADER_OR_FOLLOWER),
    (replica(isr=(1,)), True, -1, E.NOT_ENOUGH_REPLICAS),
    (replica(isr=(1,)), True, 1, None),
])
def test_produce_error(rep, known, acks, expected):
    assert fencing.produce_error(rep, known, acks) == expected


# ---------------------------------------------------------------------- LeaderAndIsr

def held_replica(stopped=False, log=True):
    return NS(leader_epoch=3, partition_epoch=7, replicas=[1, 2], stopped=stopped,
              log=object() if log else None)


@pytest.mark.parametrize("p, held", [
    (None, None),
    (held_replica(), partition_state.HeldState(3, 7, (1, 2))),
    (held_replica(stopped=True), None),
    (held_replica(log=False), None),  # offline dir
])
def test_held_epochs(p, held):
    assert partition_state.held_epochs(p) == held


@pytest.mark.parametrize("replicas, epochs, held, expected", [
    ((2, 3), (4, 0), None, E.UNKNOWN_TOPIC_OR_PARTITION),  # not a replica here
    ((1, 2), (4, 0), None, None),                          # nothing held: apply
    ((1, 2), (3, 8), (3, 7), None),                        # ISR change: apply
    ((1, 2), (3, 7), (3, 7), E.NONE),                      # resent by a new controller
    ((1, 2), (3, 7), (3, 7, (1, 2, 3)), None),             # the same, other replicas
    ((1, 2), (3, 6), (3, 7), E.STALE_CONTROLLER_EPOCH),
])
def test_admit_partition_state(replicas, epochs, held, expected):
    if held is not None:
        held = partition_state.HeldState(*held[:2], held[2] if len(held) > 2 else (1, 2))
    assert partition_state.admit_partition_state(1, replicas, *epochs, held) == expected


def test_a_resent_state_naming_other_replicas_is_applied():
    # design.md#sim-finding-b: a controller died while cancelling a move, after
    # writing the topic znode (replicas back to ORS) and before the new leader epoch. Its
    # successor resends the partition state at the same (leader epoch, partition epoch) - they
    # version the partition-state znode, not the replica set - and brokers acknowledged it
    # without applying it: the leader kept RS, so it and the controller disagreed on the RF
    # (and the effective min ISR). Kafka's Partition.makeLeader / makeFollower apply a state
    # whose partition epoch equals the one held; replog does when its replicas differ.
    held = NS(leader_epoch=3, partition_epoch=7, stopped=False, log=object(),
              replicas=(4, 1, 3))
    admit = partition_state.admit_partition_state
    assert admit(1, (3, 1), 3, 7, partition_state.held_epochs(held)) is None
    same = NS(**{**vars(held), "replicas": (3, 1)})
    assert admit(1, (3, 1), 3, 7, partition_state.held_epochs(same)) == E.NONE
    assert admit(1, (3, 1), 3, 6, partition_state.held_epochs(held)) == \
        E.STALE_CONTROLLER_EPOCH


@pytest.mark.parametrize("failed, epoch, held, retry", [
    (True, 4, 3, True), (True, 3, 3, False), (True, 0, None, True), (False, 4, 3, False)])
def test_retry_failed_log_kip_461(failed, epoch, held, retry):
    assert partition_state.retry_failed_log(failed, epoch, held) is retry


@pytest.mark.parametrize("leader, epoch, recovery, held, was_leader, expected", [
    # leader, new epoch: reset followers, write the epoch start
    (1, 4, 0, 3, False, {"new_epoch": True, "lead": True, "reset_followers": True,
                             "write_epoch_start": True, "follow": False, "fetch": False}),
    # leader, ISR-only update: followers' states kept
    (1, 3, 0, 3, True, {"new_epoch": False, "lead": True, "reset_followers": False,
                            "write_epoch_start": False, "follow": False}),
    # leader again in the same epoch after following: reset, no new epoch start
    (1, 3, 0, 3, False, {"reset_followers": True, "write_epoch_start": False}),
    # KIP-704: a RECOVERING leader reports RECOVERED
    (1, 4, partition_state.RECOVERING, 3, False, {"report_recovered": True}),
    (2, 4, partition_state.RECOVERING, 3, False, {"report_recovered": False}),
    # follower of a new epoch fetches; of no leader follows without fetching
    (2, 4, 0, 3, False, {"lead": False, "follow": True, "fetch": True}),
    (-1, 4, 0, 3, True, {"follow": True, "fetch": False}),
    # follower, same epoch, same role: nothing restarts
    (2, 3, 0, 3, False, {"follow": False, "fetch": False, "new_epoch": False}),
    # the leader moved away in the same epoch (was leader): follow
    (2, 3, 0, 3, True, {"follow": True, "fetch": True}),
])
def test_transition(leader, epoch, recovery, held, was_leader, expected):
    t = partition_state.transition(1, leader, epoch, recovery, held, was_leader)
    assert {k: getattr(t, k) for k in expected} == expected


@pytest.mark.parametrize("is_leader, epoch, written, applies", [
    (True, 4, 4, True), (True, 5, 4, False), (False, 4, 4, False)])
def test_epoch_start_applies(is_leader, epoch, written, applies):
    assert partition_state.epoch_start_applies(is_leader, epoch, written) is applies


# ---------------------------------------------------------------------- DelayedProduce

def leader(epoch=5, hw=0, leo=10, isr=(1, 2), min_isr=2, is_leader=True):
    return NS(is_leader=is_leader, leader_epoch=epoch, high_watermark=hw, log_end_offset=leo,
              isr=isr, min_isr=min_isr)


def never(_offset):
    raise AssertionError("the epoch cache is read only after an epoch change")


@pytest.mark.parametrize("p, epoch_at, remaining, expected", [
    (None, never, 1, ProduceWait.NOT_LEADER),
    (leader(is_leader=False), never, 1, ProduceWait.NOT_LEADER),
    (leader(hw=10), never, 1, ProduceWait.ACKNOWLEDGED),
    (leader(hw=10), never, -1, ProduceWait.ACKNOWLEDGED),        # done beats the timeout
    (leader(hw=9), never, 1, ProduceWait.WAIT),
    (leader(hw=9, isr=(1,)), never, 1, ProduceWait.ISR_TOO_SMALL),
    (leader(hw=9), never, 0, ProduceWait.TIMED_OUT),
    (leader(epoch=6, hw=10), lambda o: 5, 1, ProduceWait.ACKNOWLEDGED),  # bump, batch intact
    (leader(epoch=6, hw=10), lambda o: 6, 1, ProduceWait.TRUNCATED),     # rewritten in 6
    (leader(epoch=6, leo=8), lambda o: 5, 1, ProduceWait.TRUNCATED),     # cut below its end
])
def test_produce_wait(p, epoch_at, remaining, expected):
    assert produce_wait(p, 5, 10, epoch_at, remaining) is expected


def test_batch_intact_reads_the_epoch_cache_only_past_the_leo():
    assert batch_intact(9, 10, never, 5) is False
    assert batch_intact(10, 10, lambda o: 5 if o == 9 else -1, 5) is True


# ---------------------------------------------------------------------- isr, truncation

@pytest.mark.parametrize("is_leader, relinquished, epoch, isr_size, may", [
    (True, -1, 5, 2, True), (True, 5, 5, 2, False), (True, 4, 5, 1, False),
    (False, -1, 5, 3, False)])
def test_may_relinquish_seed_002(is_leader, relinquished, epoch, isr_size, may):
    assert isr.may_relinquish(is_leader, relinquished, epoch, isr_size) is may


@pytest.mark.parametrize("is_replica, stale, offset, leo, updates", [
    (True, False, 10, 10, True), (True, False, 11, 10, False), (True, True, 5, 10, False),
    (False, False, 5, 10, False)])
def test_fetch_updates_follower(is_replica, stale, offset, leo, updates):
    assert isr.fetch_updates_follower(is_replica, stale, offset, leo) is updates


def test_leader_end_for_epoch_looks_up_only_a_sent_epoch():
    assert leader_end_for_epoch(None, never) == (-1, -1)
    assert leader_end_for_epoch(-1, never) == (-1, -1)
    assert leader_end_for_epoch(3, lambda e: (e, 40)) == (3, 40)


# ---------------------------------------------------------------------- metadata, log dirs

@pytest.mark.parametrize("replicas, live, reported, expected", [
    ((1, 2, 3), {1, 2, 3}, (), []),
    ((1, 2, 3), {1, 3}, (3,), [2]),          # a dead broker's replica, not the report
    ((1, 2, 3), {1, 2, 3}, (3,), [3]),       # all live: the controller's offline replicas
])
def test_offline_replicas(replicas, live, reported, expected):
    assert offline_replicas(replicas, live, reported) == expected


def test_partition_error():
    assert partition_error(-1) == E.LEADER_NOT_AVAILABLE and partition_error(0) == E.NONE


def test_offset_lag():
    assert offset_lag(True, 10, 7) == 3 and offset_lag(True, 5, 7) == 0
    assert offset_lag(False, 10, 7) == 0


def test_describe_log_dir():
    reps = [ReplicaInDir(TP("a", 0), 100, True, 10, 7), ReplicaInDir(TP("b", 0), 50, False, 3, 3)]
    d = describe_log_dir("/d0", None, True, (1000, 400), reps)
    assert (d.error, d.directory_id, d.total_bytes, d.usable_bytes) == (E.NONE, "", 1000, 400)
    assert [(r.tp, r.size, r.offset_lag) for r in d.replicas] == [(TP("a", 0), 100, 3),
                                                                (TP("b", 0), 50, 0)]
    only_b = describe_log_dir("/d0", "id", True, None, reps, frozenset({("b", 0)}))
    assert [r.tp for r in only_b.replicas] == [TP("b", 0)]
    assert (only_b.total_bytes, only_b.usable_bytes) == (0, 0)  # usage unreadable
    off = describe_log_dir("/d1", "id", False, (1, 1), reps)
    assert (off.error, off.replicas, off.online) == (E.KAFKA_STORAGE_ERROR, (), False)


# ---------------------------------------------------------------------- wire translation

def test_leader_and_isr_translation():
    req = leader_and_isr_request(pb.LeaderAndIsrRequest(
        controller_id=0, controller_epoch=3, broker_epoch=77, topic_ids={"t": "id"},
        partition_states=[pb.LeaderAndIsrPartitionState(
            topic="t", partition=1, controller_epoch=3, leader=2, leader_epoch=4, isr=[2, 1],
            partition_epoch=9, replicas=[1, 2], leader_recovery_state=pb.RECOVERING)],
        live_leaders=[pb.BrokerEndpoint(broker_id=2, host="h", port=9, rack="r")]))
    [s] = req.partition_states
    assert (req.controller_epoch, req.broker_epoch, dict(req.topic_ids)) == (3, 77, {"t": "id"})
    assert (s.tp, s.leader, s.leader_epoch, s.partition_epoch, s.isr, s.replicas) == \
        (TP("t", 1), 2, 4, 9, (2, 1), (1, 2))
    assert s.leader_recovery_state == partition_state.RECOVERING
    assert [(e.broker_id, e.address, e.rack) for e in req.live_leaders] == [(2, "h:9", "r")]


def test_stop_replica_translation_keeps_an_absent_leader_epoch_absent():
    req = stop_replica_request(pb.StopReplicaRequest(controller_epoch=1, broker_epoch=5,
                                                     partition_states=[
        pb.StopReplicaPartitionState(topic="t", partition=0, delete_partition=True),
        pb.StopReplicaPartitionState(topic="t", partition=1, leader_epoch=-2)]))
    assert [(s.tp, s.leader_epoch, s.delete_partition) for s in req.partition_states] == \
        [(TP("t", 0), None, True), (TP("t", 1), -2, False)]


def test_update_metadata_translation_and_deletion():
    cache = MetadataCache()

    def um(leader):
        return update_metadata_request(pb.UpdateMetadataRequest(
            controller_epoch=2, topic_ids={"t": "id"},
            live_brokers=[pb.BrokerEndpoint(broker_id=1, host="h", port=1)],
            controller=pb.BrokerEndpoint(broker_id=9, host="c", port=2, rack="x"),
            partition_states=[pb.UpdateMetadataPartitionState(
                topic="t", partition=0, leader=leader, leader_epoch=1, isr=[1], replicas=[1, 2],
                offline_replicas=[2])]))
    cache.update(um(1))
    assert cache.partitions[TP("t", 0)] == PartitionInfo(1, 1, (1,), (1, 2), 0, (2,))
    assert cache.controller.rack is None and cache.brokers[1].address == "h:1"
    assert cache.topic_ids == {"t": "id"}
    cache.update(um(-2))  # the topic is being deleted
    assert cache.partitions == {} and cache.topic_ids == {}


@pytest.mark.parametrize("replicas, has_log, held, stray", [
    ((2, 3), True, None, True),                      # removed while down: its files go
    ((2, 3), True, NS(stopped=True, leader_epoch=0), True),   # stopped, no longer a replica
    ((2, 3), True, NS(stopped=False, leader_epoch=5), False),  # served at this epoch: the
                                                               # controller's StopReplica decides
    ((2, 3), True, NS(stopped=False, leader_epoch=4), True),   # the controller moved on without
                                                               # it (its StopReplica was lost)
    ((1, 3), True, None, False),                      # still a replica (adding included)
    ((1, 3), True, NS(stopped=False, leader_epoch=4), False),  # a replica at an older epoch
    ((2, 3), False, None, False),                     # nothing on disk
])
def test_stray_replica_rule(replicas, has_log, held, stray):
    assert partition_state.is_stray_replica(1, replicas, 5, has_log, held) is stray


@pytest.mark.parametrize("held", [None, NS(stopped=True, leader_epoch=0),
                                  NS(stopped=False, leader_epoch=4)])
def test_a_replica_still_in_the_isr_is_never_a_stray(held):
    """Reassignment step 4's UpdateMetadata (replicas = TRS, epoch E+1)
    reaches a removed replica the ISR still names; only step 5's StopReplica deletes it."""
    assert partition_state.is_stray_replica(1, (2, 3), 5, True, held, isr=(1, 2, 3)) is False
    assert partition_state.is_stray_replica(1, (2, 3), 5, True, held, isr=(2, 3)) is True

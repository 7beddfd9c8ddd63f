"""The controller's decisions: pure functions from the ControllerContext (and an event) to a
Decision - the partition states to write, the state-machine steps, and the requests to send.

Nothing here awaits, touches ZooKeeper or a socket, or reads a clock (callers pass `now_ms`).
The controller core (core.py) carries a Decision out in this order, which is the one rule that
binds:

    1. write `writes` to ZooKeeper (conditional on each znode version and the controller
       epoch's version, in batched transactions);
    2. `apply(ctx, decision, failed)` - only the partitions whose write succeeded change in
       memory, and only their state-machine steps are taken;
    3. send the requests (`leader_and_isr`, `update_metadata`, `stop_replica`), dropping the
       failed partitions: the controller writes ZooKeeper before it tells brokers.

One module per family:

    base.py       Decision types, the builder, `next_state` (the only place a leader, leader
                  epoch or ISR changes), `apply`
    elections.py  new partitions, `elect_offline` (the one offline election), ElectLeaders,
                  the automatic preferred-leader check
    new_partitions.py  new partitions of created topics (Kafka's onNewPartitionCreation)
    brokers.py    broker failure/startup/update, controlled shutdown, controller failover
    isr.py        AlterPartition (KIP-497, KIP-704, design.md#kip-501 relinquish)
    deletion.py   topic deletion
    reassignment.py  partition reassignment (design.md#reassignment + KIP-455): validation and the
                  partition-state steps of the seven (the core writes the znodes)

Rules, with where they come from:

- Every leader change bumps the leader epoch; so does every ISR change the controller makes
  (Kafka's ZK-mode removeReplicasFromIsr bumps it, fencing the old leader's view). ISR changes
  a leader asks for through AlterPartition keep the leader epoch (KIP-497).
- The partition epoch is the state znode's version: a conditional set bumps it by one, so a
  write's new state carries old.partition_epoch + 1 and a created znode 0.
- The ISR never becomes empty: when every member is gone the last one stays (Kafka keeps the
  last leader in the ISR, so a clean election can later pick it when it returns). With several
  members lost at once replog keeps the last leader if it was a member, else the first member.
- An unclean election (the new leader was not in the ISR) marks the leader RECOVERING
  (KIP-704, as Kafka's ZK controller does since 3.2); the leader sends AlterPartition with
  RECOVERED once it has rebuilt its state.
- AlterPartition validation follows Kafka's ZK controller (processAlterPartition) with KIP-841/
  KIP-903 eligibility: see `isr.alter_partition`.
- design.md#kip-501 (KIP-501 Solution 2): `relinquish_leadership` elects the first other eligible
  ISR member and records the sender; preferred elections (manual and automatic) skip it until
  `ControllerContext.relinquish_cooldown_ms` has passed. The cool-down defaults to
  leader.imbalance.check.interval.seconds: the automatic preferred election runs once per that
  interval, so a relinquishing leader is not handed its leadership back by the very next check,
  and at the latest one interval after the cool-down it is rebalanced normally.

- design.md#jbod: `restarts.restart_partitions` applies a /restart_partitions entry with the
  RestartedPartitionsLeaderSelector; see that module for where replog departs from the seed.

- design.md#kip-966: with eligible.leader.replicas.enable, `Builder.write` keeps every
  partition's ELR and LastKnownELR (controller/elr.py), an ISR may become empty, brokers that
  registered after an unclean shutdown leave every ISR and ELR (`brokers.remove_unclean_replicas`),
  and offline elections follow design.md#kip-966's order (`selectors.elr_leader`).
    recovery.py   the Unclean Recovery Manager: one task per leaderless partition that needs
                  a recovery (`Decision.recoveries`), the batched GetReplicaLogInfo queries,
                  when to choose, and the choice; core.py drives it
"""

from controller.decisions.base import (  # noqa: F401
    BrokerNotAvailable,
    Builder,
    Decision,
    ElectionRecord,
    ElectionType,
    Outcome,
    PartitionWrite,
    RequestRejected,
    StaleBrokerEpoch,
    apply,
    next_state,
    shrink_isr,
)
from controller.decisions.brokers import (  # noqa: F401
    BrokerDiff,
    check_controlled_shutdown,
    controlled_shutdown,
    diff_brokers,
    on_broker_modified,
    on_brokers_failed,
    on_brokers_started,
    on_controller_failover,
    remaining_leaderships,
    remove_replicas_from_isr,
)
from controller.decisions.deletion import (  # noqa: F401
    finish_topic_deletion,
    on_stop_replica_response,
    resume_topic_deletion,
    start_topic_deletion,
)
from controller.decisions.elections import (  # noqa: F401
    elect_leaders,
    elect_offline,
    elect_offline_partitions,
    imbalanced_partitions,
    on_min_isr_changed,
    on_topic_config_changed,
    reelect_after_refused_writes,
)
from controller.decisions.isr import AlterPartitionItem, alter_partition  # noqa: F401
from controller.decisions.new_partitions import on_new_partitions  # noqa: F401
from controller.decisions.reassignment import (  # noqa: F401
    ReplicaAssignment,
    admin_entries_to_start,
    metadata_for,
    move_leader_into_target,
    new_replicas,
    plan_reassignments,
    reassignment_complete,
    remove_replicas,
    replica_assignment,
    start_adding_replicas,
    targets_reached,
    with_partition,
)
from controller.decisions.recovery import (  # noqa: F401
    Choice,
    Query,
    RecoveryTask,
    ReplicaLogInfo,
    UncleanRecoveryManager,
    elect_recovered,
    obsolete,
)
from controller.decisions.restarts import (  # noqa: F401
    IsrRejoins,
    restart_partitions,
    restartable,
    stale_restart,
    stale_restarts,
)
from controller.selectors import ElectionReason  # noqa: F401

"""Eligible Leader Replicas (design.md#kip-966): the bookkeeping rules and the settings
they read. Pure: `next_elr` is called by the decisions' builder (decisions/base.py
`Builder.write`), the one place a partition state is written, so every ISR change - a broker's
death, AlterPartition, an election, a controlled shutdown, a reassignment or restart step -
keeps the ELR.

The rules (Kafka's PartitionChangeBuilder.maybePopulateTargetElr and maybeUpdateRecordElr):

- While the target ISR is below the effective min ISR, min(min.insync.replicas, RF):
      ELR          = (ELR ∪ ISR) − targetISR − uncleanShutdownReplicas
      LastKnownELR = ((ELR ∪ ISR) ∪ LastKnownELR) − targetISR − ELR
  The replicas that leave an ISR already below min ISR held every committed record when they
  left (acks=all could not complete without them), so they may lead cleanly later.
- At or above the effective min ISR both are cleared: the ISR alone is enough to elect from.
- An ELR member that is elected moves into the ISR (it is in the target ISR, so the formula
  drops it from the ELR).
- An unclean election clears both: the data the ELR vouched for may be gone.
- LastKnownELR takes the last leader the first time the ISR becomes empty. With the union rule
  the last leader (an ISR member) is already in ELR ∪ LastKnownELR then; the rule only adds it
  when it is in neither (a leader that was not in the ISR it led).

replog keeps LastKnownELR as KIP-966 designed it - the members that left the ELR because of an
unclean shutdown, which Balanced recovery must hear from - and not as Kafka's
`useLastKnownLeaderInBalancedRecovery` stop-gap (only the last leader, to elect it blindly), since
replog builds the recovery manager Kafka did not ship. ELR and LastKnownELR are disjoint, sorted
by broker id (Kafka's HashSet order), and hold only assigned replicas.

Switching `eligible.leader.replicas.enable` (cluster config, default false as in Kafka 3.x/4.0):
- off -> on: nothing is rewritten; each partition's ELR starts at its next ISR change below min
  ISR (a partition already under min ISR gets no ELR until its ISR changes again). Its empty
  ISRs come from then on: a partition whose last ISR member dies keeps an empty ISR.
- on -> off: ELR and LastKnownELR are cleared at each partition's next change. A leaderless
  partition whose ISR is empty takes its ELR back as the ISR at that change (the ELR members were
  the last in sync), so the old election - a clean one from the ISR - still finds them.

Settings (`ElrConfig.from_config`, the controller's own config; topics override in
/config/topics/<t>):
- `eligible.leader.replicas.enable` (cluster only);
- `min.insync.replicas`: the topic override, else /config/brokers/<default>, else the
  controller's value (the brokers' resolver, common.dynamic_config). A change of it, at either
  level, clears the ELR and LastKnownELR of every partition whose ISR now meets the new
  effective value (decisions/elections.py `recheck_elrs`: its HW may now advance on the ISR
  alone, design.md#sim-finding-d);
- `unclean.recovery.strategy` (Proactive | Balanced | Manual; per cluster and per topic) and the
  mapping from `unclean.leader.election.enable` (KIP-966's compatibility rule): when no strategy
  is set at a level, true means Proactive and false means Balanced. Most specific first: the
  topic's strategy, the topic's unclean.leader.election.enable, the cluster's strategy, the
  cluster's unclean.leader.election.enable. Setting both at the cluster level draws a warning at
  startup (`config_warnings`): the strategy wins.
- `unclean.recovery.timeout.ms` (Balanced's wait for replies; the recovery manager's).

The strategy only applies with ELR enabled; with ELR disabled the elections are Kafka's
ZooKeeper-era ones (unclean.leader.election.enable and nothing else).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common.zk_layout import NO_LEADER, LeaderAndIsr
from controller.selectors import UncleanRecoveryStrategy

ELR_ENABLE = "eligible.leader.replicas.enable"
MIN_ISR = "min.insync.replicas"
STRATEGY = "unclean.recovery.strategy"
UNCLEAN_ENABLE = "unclean.leader.election.enable"
RECOVERY_TIMEOUT = "unclean.recovery.timeout.ms"

_DEFAULTS = {ELR_ENABLE: False, MIN_ISR: 1, RECOVERY_TIMEOUT: 300_000}


def _is_set(config: Mapping[str, Any], key: str) -> bool:
    """Whether `key` was set explicitly (common.config.Config knows; a plain dict - the tests'
    and the simulation's - holds only what was set)."""
    is_set = getattr(config, "is_set", None)
    return is_set(key) if is_set is not None else key in config


def _bool(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() == "true"


@dataclass(frozen=True)
class ElrConfig:
    """The cluster-level KIP-966 settings the controller decides with."""

    enabled: bool = False
    min_insync_replicas: int = 1
    # None: not set explicitly, so it follows unclean.leader.election.enable
    strategy: UncleanRecoveryStrategy | None = None
    recovery_timeout_ms: int = 300_000

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ElrConfig:
        def get(key: str) -> Any:
            return config.get(key, _DEFAULTS[key]) if hasattr(config, "get") else config[key]

        return cls(
            enabled=_bool(get(ELR_ENABLE)),
            min_insync_replicas=max(1, int(get(MIN_ISR))),
            strategy=(UncleanRecoveryStrategy(config[STRATEGY]) if _is_set(config, STRATEGY)
                      else None),
            recovery_timeout_ms=int(get(RECOVERY_TIMEOUT)))


def config_warnings(config: Mapping[str, Any]) -> list[str]:
    """What the controller warns about at startup (a log line each)."""
    out = []
    if _is_set(config, STRATEGY) and _is_set(config, UNCLEAN_ENABLE):
        out.append(f"both {STRATEGY}={config[STRATEGY]} and {UNCLEAN_ENABLE}="
                   f"{str(_bool(config[UNCLEAN_ENABLE])).lower()} are set: {STRATEGY} wins "
                   f"(KIP-966); {UNCLEAN_ENABLE} only still allows the interim unclean election "
                   f"while the Unclean Recovery Manager is not wired")
    if _is_set(config, STRATEGY) and not _bool(config.get(ELR_ENABLE, False)):
        out.append(f"{STRATEGY} is set but {ELR_ENABLE} is false: the strategy applies only "
                   f"with ELR")
    return out


def recovery_strategy(topic_config: Mapping[str, str] | None, cluster: ElrConfig,
                      cluster_unclean: bool) -> UncleanRecoveryStrategy:
    """The strategy that applies to a topic (see the module docstring for the order)."""
    topic_config = topic_config or {}
    raw = topic_config.get(STRATEGY)
    if raw is not None:
        try:
            return UncleanRecoveryStrategy(raw.strip())
        except ValueError:
            pass  # validated at creation; a hand-written bad value is ignored, not obeyed
    if UNCLEAN_ENABLE in topic_config:
        return _from_unclean(_bool(topic_config[UNCLEAN_ENABLE]))
    if cluster.strategy is not None:
        return cluster.strategy
    return _from_unclean(cluster_unclean)


def _from_unclean(enabled: bool) -> UncleanRecoveryStrategy:
    # KIP-966: unclean.leader.election.enable=true -> Proactive (availability first, as the
    # old unclean election), false -> Balanced (KIP-966's default).
    return UncleanRecoveryStrategy.PROACTIVE if enabled else UncleanRecoveryStrategy.BALANCED


def next_elr(old: LeaderAndIsr, target_isr: Sequence[int], *, enabled: bool, min_isr: int,
             replicas: Collection[int], unclean_shutdown: Collection[int] = (),
             unclean_election: bool = False) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(ELR, LastKnownELR) of a partition going from `old` to `target_isr` (the rules of the
    module docstring)."""
    if not enabled or unclean_election or len(target_isr) >= min_isr:
        return (), ()
    assigned = set(replicas)
    isr, unclean = set(target_isr), set(unclean_shutdown)
    candidates = set(old.elr) | set(old.isr)
    elr = {r for r in candidates if r not in isr and r not in unclean and r in assigned}
    lke = {r for r in candidates | set(old.last_known_elr)
           if r not in isr and r not in elr and r in assigned}
    if (not target_isr and old.isr and old.leader != NO_LEADER and old.leader in assigned
            and old.leader not in elr and old.leader not in isr):
        lke.add(old.leader)
    return tuple(sorted(elr)), tuple(sorted(lke))


def assigned_only(members: Sequence[int], replicas: Collection[int]) -> tuple[int, ...]:
    """The ELR or LastKnownELR members still assigned. A move (or its cancel) changes the
    replicas without always rewriting the state, so a removed replica may linger there until
    the next write; it holds no log to lead from and is never asked for one, so an election
    or a recovery that waited for it would wait forever
    (tests/controller/test_elr_sim_findings.py::
    test_a_last_known_elr_member_a_move_removed_is_not_waited_for)."""
    return tuple(r for r in members if r in replicas)

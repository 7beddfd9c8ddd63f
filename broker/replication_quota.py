"""Replication throttles (KIP-73): Kafka's ReplicationQuotaManager, one for the leader side and
one for the follower side of a broker. Pure: no I/O, and time comes from an injected clock
(monotonic seconds), so tests drive it with a fake one.

Rules (Kafka's, followed here):
- A quota is a byte rate measured over sliding sample windows (Kafka's SampledStat with
  SimpleRate: ``replication.quota.window.num`` samples of ``replication.quota.window.size.seconds``;
  the rate is the bytes of the live samples over the time since the oldest one started, and
  never over less than one window). It is *exceeded* when that rate is above the bound
  (``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``, default
  Long.MAX: unlimited).
- A partition is *throttled* by a quota when the topic's ``leader.replication.throttled.replicas``
  (leader side) or ``follower.replication.throttled.replicas`` (follower side) is ``*``, or names
  ``partition:<this broker>`` (Kafka's ConfigHandler.parseThrottledPartitions keeps only the
  entries of the local broker: the leader list names the replicas that send, the follower list
  the replicas that receive).
- Bytes of throttled partitions are recorded whether or not their replica is in sync, so that all
  replication traffic of those partitions stays within the bound; but a fetch is held back only
  for a replica that is *not* in sync (``should_throttle``): throttling an in-sync replica would
  push it out of the ISR and make the ISR thrash, so only reassignment and catch-up traffic is
  ever held back (Kafka's shouldLeaderThrottle / shouldFollowerThrottle).
- Recording never refuses: a fetch that goes ahead is counted in full even past the bound; the
  next fetch is held back until the rate has fallen below it again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from common.names import TopicPartition, ascii_digits

UNLIMITED = (1 << 63) - 1  # Kafka's Long.MaxValue default rate: no throttle
ALL_PARTITIONS = frozenset({-1})  # "*" (Kafka's Constants.AllReplicas)
DEFAULT_WINDOW_NUM = 11  # Kafka's replication.quota.window.num
DEFAULT_WINDOW_SIZE_S = 1.0  # Kafka's replication.quota.window.size.seconds

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


@dataclass
class _Sample:
    start: float
    last_event: float
    value: float = 0.0

    def reset(self, now: float) -> None:
        self.start = self.last_event = now
        self.value = 0.0


class SampledRate:
    """A byte rate over ``samples`` windows of ``window_s`` seconds (Kafka's SampledStat and
    SimpleRate). One extra sample is kept for the window that overlaps the oldest edge."""

    def __init__(self, samples: int = DEFAULT_WINDOW_NUM,
                 window_s: float = DEFAULT_WINDOW_SIZE_S):
        if samples < 1 or window_s <= 0:
            raise ValueError(f"need at least one sample window of positive size, got "
                             f"{samples} x {window_s} s")
        self.samples = samples
        self.window_s = window_s
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now: float) -> None:
        if not self._samples:
            self._samples.append(_Sample(now, now))
        s = self._samples[self._current]
        if now - s.start >= self.window_s:
            s = self._advance(now)
        s.value += value
        s.last_event = now

    def _advance(self, now: float) -> _Sample:
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now, now))
        else:
            self._samples[self._current].reset(now)
        return self._samples[self._current]

    def measure(self, now: float) -> float:
        """Bytes per second now."""
        # Samples without an event within the whole monitored span are reset (Kafka's
        # purgeObsoleteSamples); one that started before the span but had events in it stays.
        expire = self.samples * self.window_s
        for s in self._samples:
            if now - s.last_event >= expire:
                s.reset(now)
        if not self._samples:
            return 0.0
        total = sum(s.value for s in self._samples)
        elapsed = now - min(s.start for s in self._samples)
        return total / max(elapsed, self.window_s)


def parse_throttled_partitions(value: str | None, broker_id: int) -> frozenset[int]:
    """The partitions a throttled-replicas value throttles on ``broker_id``: ALL_PARTITIONS for
    ``*``, else the partitions of the ``partition:broker`` entries naming this broker (Kafka's
    parseThrottledPartitions). The value was checked when it was written (common/dynamic_config);
    an entry that does not parse is skipped rather than failing the whole topic."""
    text = (value or "").strip()
    if text == "*":
        return ALL_PARTITIONS
    out = set()
    for item in text.split(","):
        p, sep, b = item.strip().partition(":")
        if sep and ascii_digits(p.strip()) and ascii_digits(b.strip()) and \
                int(b) == broker_id:
            out.add(int(p))
    return frozenset(out)


class ReplicationQuota:
    """One side's quota (Kafka's ReplicationQuotaManager): the bound, the throttled partitions
    and the measured rate of the bytes recorded on them."""

    def __init__(self, clock: Callable[[], float], bound: int = UNLIMITED,
                 samples: int = DEFAULT_WINDOW_NUM, window_s: float = DEFAULT_WINDOW_SIZE_S):
        self.clock = clock
        self.bound = bound
        self._rate = SampledRate(samples, window_s)
        self._throttled: dict[str, frozenset[int]] = {}

    def update_quota(self, bound: int) -> None:
        self.bound = bound

    def mark_throttled(self, topic: str, partitions: frozenset[int]) -> None:
        """Replace the topic's throttled partitions (ALL_PARTITIONS: every one)."""
        if partitions:
            self._throttled[topic] = partitions
        else:
            self._throttled.pop(topic, None)

    def remove_throttle(self, topic: str) -> None:
        self._throttled.pop(topic, None)

    def throttled_topics(self) -> Mapping[str, frozenset[int]]:
        return dict(self._throttled)

    def is_throttled(self, tp: TopicPartition) -> bool:
        parts = self._throttled.get(tp.topic)
        return parts is not None and (parts is ALL_PARTITIONS or tp.partition in parts)

    def record(self, nbytes: int) -> None:
        """Count bytes sent or received on a throttled partition, even past the bound."""
        self._rate.record(nbytes, self.clock())

    def rate(self) -> float:
        return self._rate.measure(self.clock())

    def is_quota_exceeded(self) -> bool:
        return self.bound < UNLIMITED and self.rate() > self.bound


def should_throttle(quota: ReplicationQuota, tp: TopicPartition, replica_in_sync: bool) -> bool:
    """Hold back this partition's fetch now? Never for an in-sync replica (Kafka's
    shouldLeaderThrottle / shouldFollowerThrottle: no ISR thrashing)."""
    return not replica_in_sync and quota.is_throttled(tp) and quota.is_quota_exceeded()


def rate_from(dynamic: Mapping[str, str] | None, static: Mapping[str, object], key: str
              ) -> int | None:
    """The bound a broker config gives for ``key``: the dynamic value (``/config/brokers/<id>``
    over ``<default>``), else the static one; None while the dynamic configs are unknown (the
    bound in force is kept)."""
    if dynamic is None:
        return None
    value = dynamic.get(key)
    if value is None:
        value = static.get(key, UNLIMITED)
    try:
        return int(str(value).strip())
    except ValueError:
        return None  # refused when written; never expected here


class ReplicationQuotas:
    """The broker's two quotas (Kafka's QuotaFactory ``quotas.leader`` / ``quotas.follower``),
    shared by the fetch path of the replica manager and the replica fetchers."""

    def __init__(self, broker_id: int, clock: Callable[[], float],
                 samples: int = DEFAULT_WINDOW_NUM, window_s: float = DEFAULT_WINDOW_SIZE_S):
        self.broker_id = broker_id
        self.leader = ReplicationQuota(clock, UNLIMITED, samples, window_s)
        self.follower = ReplicationQuota(clock, UNLIMITED, samples, window_s)

    def apply_topic_config(self, topic: str, overrides: Mapping[str, str] | None) -> None:
        """A topic's overrides as read (Kafka's TopicConfigHandler.updateThrottledList); None
        (unreadable) keeps the throttles in force."""
        if overrides is None:
            return
        for quota, key in ((self.leader, LEADER_REPLICAS), (self.follower, FOLLOWER_REPLICAS)):
            quota.mark_throttled(topic, parse_throttled_partitions(overrides.get(key),
                                                                   self.broker_id))

    def apply_broker_config(self, dynamic: Mapping[str, str] | None,
                            static: Mapping[str, object]) -> None:
        """This broker's dynamic configs changed (Kafka's BrokerConfigHandler updateQuota)."""
        for quota, key in ((self.leader, LEADER_RATE), (self.follower, FOLLOWER_RATE)):
            bound = rate_from(dynamic, static, key)
            if bound is not None:
                quota.update_quota(bound)

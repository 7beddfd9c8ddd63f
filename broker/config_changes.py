"""Which config change notifications to act on, and which to prune. Pure.

Kafka's ZkNodeChangeNotificationListener (used by ZkConfigManager in ZooKeeper mode): a writer
adds ``/config/changes/config_change_<seq>`` (persistent sequential) after writing an entity's
config; every broker, whenever the children change, processes the notifications whose sequence
is above the last one it processed, in sequence order, then deletes the ones older than
``changeExpirationMs`` (15 minutes) so the list stays short. A notification names an entity,
not a value: the broker re-reads the config itself, so reloading twice is harmless and only
the order and the last processed sequence matter.
"""

from __future__ import annotations

from collections.abc import Iterable

from common import zk_layout as zl
from common.dynamic_config import DEFAULT_BROKER

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkConfigManager changeExpirationMs


def changes_to_process(children: Iterable[str], last_seq: int) -> list[tuple[int, str]]:
    """(sequence, node name) of the notifications above ``last_seq``, oldest first; names that
    are not notifications are ignored."""
    out = []
    for name in children:
        seq = zl.config_change_seq(name)
        if seq is not None and seq > last_seq:
            out.append((seq, name))
    return sorted(out)


def last_sequence(children: Iterable[str]) -> int:
    """The highest notification sequence among ``children`` (-1 when there is none): a broker
    that has just loaded every config it needs starts after it."""
    seqs = [s for s in map(zl.config_change_seq, children) if s is not None]
    return max(seqs, default=-1)


def obsolete_changes(created_ms: Iterable[tuple[str, int]], now_ms: int, last_seq: int,
                     expiration_ms: int = CHANGE_EXPIRATION_MS) -> list[str]:
    """Names of processed notifications created more than ``expiration_ms`` ago (Kafka's
    purgeObsoleteNotifications). One not yet processed here is kept: it may be new to us."""
    out = []
    for name, ctime in created_ms:
        seq = zl.config_change_seq(name)
        if seq is not None and seq <= last_seq and now_ms - ctime > expiration_ms:
            out.append(name)
    return sorted(out)


def affects_broker(entity_type: str, name: str, broker_id: int) -> bool:
    """A broker notification matters to this broker if it names it or the default entity."""
    return entity_type == "brokers" and name in (str(broker_id), DEFAULT_BROKER)

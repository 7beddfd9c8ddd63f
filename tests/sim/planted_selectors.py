"""The controller simulation's planted bugs (tests/sim/sim.py): each re-creates a broken
leader selector as a test-only monkeypatch of ``controller.selectors`` (nothing in production
modules knows of it), to prove the invariant checker catches an election outside the rules.

    offline_ignores_isr   the offline election picks the first live replica of the assignment,
                          in the ISR or not (Kafka's offlinePartitionLeaderElection asks the
                          ISR first, and leaves a partition with no live ISR member offline
                          unless unclean election is allowed)

The controller calls the selectors through the module (``selectors.offline_leader`` in
controller/decisions/elections.py, and ``restarted_leader`` in selectors.py itself looks the
name up in its module's globals), so the patched attribute is what every caller runs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager

from controller import selectors
from controller.selectors import Election

_offline_leader = selectors.offline_leader


def _offline_ignores_isr(assignment: Sequence[int], isr: Sequence[int], live: Collection[int],
                         shutting_down: Collection[int], unclean_allowed: bool
                         ) -> Election | None:
    """offline_leader electing the first live replica whether or not the ISR names it."""
    live_replicas = [r for r in assignment if r in live and r not in shutting_down]
    if not live_replicas:
        return _offline_leader(assignment, isr, live, shutting_down, unclean_allowed)
    return Election(live_replicas[0],
                    tuple(b for b in isr if b in live and b not in shutting_down)
                    or (live_replicas[0],))


PLANTED: dict[str, tuple[object, str, Callable]] = {
    "offline_ignores_isr": (selectors, "offline_leader", _offline_ignores_isr),
}


@contextmanager
def plant_from(table: dict[str, tuple[object, str, Callable]], name: str | None
               ) -> Iterator[None]:
    """Replace ``table[name]``'s attribute by its planted version for the duration of the
    block (None: nothing); the cluster simulation's defects use it too."""
    if name is None:
        yield
        return
    owner, attr, fn = table[name]
    saved = owner.__dict__[attr]
    setattr(owner, attr, fn)
    try:
        yield
    finally:
        setattr(owner, attr, saved)


def planted(name: str | None):
    """Re-create bug ``name`` (None: nothing) for the duration of the block."""
    return plant_from(PLANTED, name)

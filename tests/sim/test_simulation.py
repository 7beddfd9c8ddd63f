"""The deterministic controller simulation (tests/sim/sim.py) as tests: a sweep of seeds with
the invariants checked after every step, a planted-bug self-test, and replay determinism."""

from __future__ import annotations

import os

import pytest

from tests.sim.planted_selectors import planted
from tests.sim.sim import InvariantViolation, run_seed

# make test's share (~25 s; tests/sim together within ~90 s); make soak sweeps 50,000 seeds
# x 60 steps with `python -m tests.sim`
SEEDS = int(os.environ.get("CONTROLLER_SIM_SEEDS", "4000"))
STEPS = 20


def test_a_sweep_of_seeds_keeps_the_invariants() -> None:
    for seed in range(SEEDS):
        run_seed(seed, STEPS)  # raises InvariantViolation naming the seed and the step


def test_a_planted_selector_bug_is_caught_within_50_seeds() -> None:
    """The checker is not vacuous: an offline selector that ignores the ISR is caught."""
    with planted("offline_ignores_isr"), pytest.raises(InvariantViolation,
                                                       match="outside the ISR"):
        for seed in range(50):
            run_seed(seed, STEPS)


def test_a_seed_replays_the_same_run() -> None:
    a, b = run_seed(1234, 40), run_seed(1234, 40)
    assert a.log == b.log
    assert a.d.tree.states == b.d.tree.states
    assert [(s.broker_id, s.kind) for s in a.d.sent] == [(s.broker_id, s.kind) for s in b.d.sent]

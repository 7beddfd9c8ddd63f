"""The planted defects (tests/sim/cluster/planted.py, tests/sim/planted_selectors.py) reach the
code they plant into, and production modules hold no test-only switch.

A plant replaces one attribute. It reaches a caller only if the caller looks that attribute
up at each call: a function called through its module (``truncation.follower_truncation``) or
a method looked up on its class. A production module that binds the function by
``from broker.truncation import follower_truncation`` keeps the original, and a plant of it
would test nothing there."""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from types import ModuleType

import pytest

import broker.replica_manager  # noqa: F401 (ReplicaManager and the parts it composes)
from tests.sim import planted_selectors
from tests.sim.cluster import planted as cluster_planted

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("broker", "common", "controller")
# what the simulations run besides production modules: the broker model and the world
SIMULATED = ("tests/sim/cluster/broker_model.py", "tests/sim/cluster/world.py",
             "tests/sim/driver.py")
# (importing module, name): a by-name binding a plant leaves alone on purpose
NOT_PLANTED = {
    ("broker.alter_log_dirs", "follower_truncation"):
        "KIP-113's future-log catch-up (Kafka's ReplicaAlterLogDirsThread), not the fetcher's "
        "truncation that follower_ignores_diverging_epoch is about",
}

PLANTS = {**cluster_planted.PLANTED, **planted_selectors.PLANTED}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _from_imports() -> list[tuple[str, int, str, str]]:
    """(importing module, line, module imported from, name) of every ``from m import name``
    in the production modules and the simulation's model."""
    paths = sorted(p for pkg in PRODUCTION for p in (ROOT / pkg).rglob("*.py")) + \
        [ROOT / s for s in SIMULATED]
    out = []
    for path in paths:
        here = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                out += [(here, node.lineno, node.module, a.name) for a in node.names]
    return out


@pytest.mark.parametrize("name", sorted(n for n, (owner, _, _) in PLANTS.items()
                                        if isinstance(owner, ModuleType)))
def test_a_planted_function_is_called_through_its_module(name: str) -> None:
    owner, attr, _ = PLANTS[name]
    original = owner.__dict__[attr]
    # where the name may be imported from: the module patched and the one defining it
    sources = {owner.__name__, original.__module__}
    # (the owner's own globals are what the plant replaces)
    bound = [f"{here}:{line}" for here, line, module, imported in _from_imports()
             if module in sources and imported == attr and here != owner.__name__
             and (here, attr) not in NOT_PLANTED]
    assert not bound, f"{name}: {attr} bound by name (a plant does not reach it) in {bound}"


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


@pytest.mark.parametrize("name", sorted(n for n, (owner, _, _) in PLANTS.items()
                                        if isinstance(owner, type)))
def test_a_planted_method_is_not_overridden(name: str) -> None:
    owner, attr, _ = PLANTS[name]
    assert attr in owner.__dict__
    over = [c.__qualname__ for c in _subclasses(owner) if attr in c.__dict__]
    assert not over, f"{name}: {owner.__name__}.{attr} is overridden by {over}"


def test_production_modules_hold_no_planted_switch() -> None:
    """Test-only switches stay out of production modules, where one could ship enabled: a
    plant is a monkeypatch from tests/sim, not a flag the production code reads."""
    found = [str(p.relative_to(ROOT)) for pkg in PRODUCTION for p in (ROOT / pkg).rglob("*.py")
             if "planted" in p.read_text().lower()]
    assert not found


def test_a_plant_is_undone_after_its_block() -> None:
    for name, (owner, attr, fn) in PLANTS.items():
        before = owner.__dict__[attr]
        plant = cluster_planted.planted if name in cluster_planted.PLANTED \
            else planted_selectors.planted
        with plant(name):
            assert owner.__dict__[attr] is fn
        assert owner.__dict__[attr] is before

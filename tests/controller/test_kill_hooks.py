"""The controller's test-only kill hooks (controller.KillHooks): which emitted record, under
which replog.test.* config, makes the shell SIGKILL itself. The real kills run in
tests/cluster/test_reassignment.py (each step) and tests/cluster/test_jbod.py (a restart entry)."""

from __future__ import annotations

from controller import emitted
from controller.controller import KILL_AFTER_RESTART_KEY, KILL_AT_STEP_KEY, KillHooks


def _restarted(cls=emitted.PartitionsRestarted):
    return cls(entry="restart-0000000001", broker=2, log_dir="/d1", broker_epoch=7,
               partitions=["t-0"], skipped={}, refused=[])


def test_off_unless_configured():
    hooks = KillHooks.from_config({})
    for step in range(1, 8):
        assert hooks.kill_after(emitted.ReassignmentStep(partition="t-0", step=step)) is None
    assert hooks.kill_after(_restarted()) is None


def test_kills_after_the_configured_reassignment_step_only():
    hooks = KillHooks.from_config({KILL_AT_STEP_KEY: 4})
    fired = [s for s in range(1, 8)
             if hooks.kill_after(emitted.ReassignmentStep(partition="t-0", step=s, leader=1))]
    assert fired == [4]
    assert "step 4 of t-0" in hooks.kill_after(emitted.ReassignmentStep(partition="t-0", step=4))
    assert hooks.kill_after(emitted.ReassignmentStalled(partition="t-0", step=4,
                                                        reason="x")) is None
    assert hooks.kill_after(_restarted()) is None


def test_kills_after_an_applied_restart_entry_not_an_incomplete_one():
    hooks = KillHooks.from_config({KILL_AFTER_RESTART_KEY: True})
    assert "restart-0000000001" in hooks.kill_after(_restarted())
    assert hooks.kill_after(_restarted(emitted.PartitionsRestartIncomplete)) is None
    assert hooks.kill_after(emitted.ReassignmentStep(partition="t-0", step=1)) is None


def test_emitted_lines_leave_out_fields_not_given_and_keep_their_order():
    step = emitted.ReassignmentStep(partition="t-0", step=4, leader=2)
    assert list(step.fields().items()) == [("partition", "t-0"), ("step", 4), ("leader", 2)]
    rejected = emitted.ReassignmentRejected(reason="bad json", source="zookeeper")
    assert list(rejected.fields()) == ["reason", "source"]
    assert rejected.level == "warning"
    finished = {"partition": "t-0", "strategy": "Balanced", "forced": False,
                "candidates": [1, 2], "answers": {}, "waited_ms": 5}
    assert emitted.UncleanRecoveryFinished(outcome="failed", reason="r", **finished).level \
        == "warning"
    assert emitted.UncleanRecoveryFinished(outcome="elected", leader=1, leader_epoch=3,
                                           offsets_discarded=0, **finished).level == "info"

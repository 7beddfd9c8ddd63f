"""The analysis reads what the real emitters write, not shapes drafted beside them.

The controller core (controller/core.py) is run through a reassignment and a KIP-966 unclean
recovery by the scripts' synchronous shell (tests/controller/script.py: every command goes
through ``ControllerCore.step()`` as the real shell runs it). Its ``Emit`` effects are written
by the controller's own event logger (common/observability.py, as controller/controller.py
logs them), stamped with the core's clock, and read back as ``replog analyze`` reads an export.
A renamed event or field then fails here instead of leaving a table empty on real data."""
# ruff: noqa: C408 - dict(...) reads as a table row

from __future__ import annotations

import json

from analytics import transforms as T
from common.observability import configure_event_log
from controller import effects as X
from tests.analytics.conftest import iso, read_event_lines, rows
from tests.controller.script import Scenario

T0 = 1_700_000_000.0

SCRIPT = """\
cluster eligible.leader.replicas.enable=true min.insync.replicas=2 unclean.recovery.timeout.ms=10000
broker 1
broker 2
broker 3
broker 4
create-topic p 0:3,1,2
config p unclean.recovery.strategy=Proactive
create-topic r 0:1,2
advance 1000
reassign r-0=2,4
advance 2500
catch-up r-0
advance 1000
kill 1
kill 2
kill 3
advance 1000
start 1 2 3 unclean
advance 1000
log-info 1 p-0=2:10
log-info 2 p-0=2:40
advance 500
log-info 3 p-0=3:35"""


def _controller_log(tmp_path) -> tuple:
    """Run SCRIPT; the controller's event-log file and the core's clock at each event."""
    sc = Scenario()
    emitted: list[tuple[float, X.Emit]] = []
    show = sc.d.on_effect

    def on_effect(eff):
        show(eff)
        if isinstance(eff, X.Emit):
            emitted.append((sc.d.now_ms, eff))
    sc.d.on_effect = on_effect
    for line in SCRIPT.splitlines():
        sc.run(line)
    logged = tmp_path / "controller-100.events.jsonl"
    log = configure_event_log(str(logged), "controller", controller_id=100)
    for _, eff in emitted:  # controller/controller.py ControllerShell._emit
        (log.warning if eff.level == "warning" else log.info)(eff.name, **eff.fields)
    # The logger stamps wall-clock time; the core's clock makes the expected rows exact.
    lines = logged.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(emitted)
    stamped = tmp_path / "events.jsonl"
    with stamped.open("w", encoding="utf-8") as f:
        for (now_ms, _), line in zip(emitted, lines, strict=True):
            rec = json.loads(line)
            rec["timestamp"] = iso(T0 + now_ms / 1000)
            f.write(json.dumps(rec) + "\n")
    return stamped, {eff.name for _, eff in emitted}


def test_unclean_recovery_and_reassignment_from_the_real_controller(spark, samples, scrapes,
                                                                    tmp_path):
    path, names = _controller_log(tmp_path)
    assert {"unclean_recovery_started", "unclean_recovery_finished", "reassignment_started",
            "reassignment_completed"} <= names
    ev = read_event_lines(spark, path)

    assert rows(T.unclean_elections(ev)) == [
        dict(partition="p-0", ts=T0 + 7.0, kind="recovery", strategy="Proactive",
             outcome="elected", old_leader=-1, chosen_replica=3, leader_epoch=4,
             candidates=[3, 1, 2], answered=3, waited_ms=2500, offsets_discarded=5)]

    # Broker 4's reassignment counter, sampled every second: 4096 bytes copied to it between
    # 2 s and 3 s.
    m = T.REASSIGNMENT_BYTES_IN
    sm = samples(*[dict(ts=T0 + k, process="broker-4", metric=m,
                        value=0.0 if k < 3 else 4096.0) for k in range(6)])
    assert rows(T.reassignments(ev, sm)) == [
        dict(partition="r-0", started_ts=T0 + 1.0, completed_ts=T0 + 3.5, duration_s=2.5,
             outcome="completed", original=[1, 2], target=[2, 4], adding=[4],
             bytes_moved=4096, bytes_shared_with=0)]

    # The unclean recovery's election (old leader -1) is not a leader loss of its own: p-0
    # was lost once, to broker 3's death at 4.5 s.
    sc = scrapes(dict(ts=T0, process="broker-9", ok=True))
    losses = T.leader_losses(ev, T.process_transitions(sc), sc)
    assert sorted((r["partition"], r["cause"], r["leader_epoch"]) for r in losses.collect()) \
        == [("p-0", "broker_down", 3), ("r-0", "broker_down", 4)]

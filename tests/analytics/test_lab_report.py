"""replog lab's report plots the move's own figures only for an experiment that measures them
(the reassignment experiment), beside the figures every experiment has. No Spark needed."""

from __future__ import annotations

import base64

from analytics.lab import METRICS
from analytics.lab_report import SHOWN, distributions, shown_figures


def _run(arm, **figures):
    base = {"arm": arm, "seed": 1, "acked_lost": 0, "longest_unavailable_s": 1.0,
            "leaderless_s": 0.0, "urp_s": 2.0, "isr_shrinks": 1, "time_to_full_s": 3.0,
            "move_s": None, "copy_mb_s": None, "throttle_ratio": None, "p99_move_ms": None}
    return {**base, **figures}


def test_an_experiment_without_a_move_plots_the_common_figures_only():
    runs = [_run("a"), _run("b")]
    assert shown_figures(runs, METRICS) == list(SHOWN)


def test_a_reassignment_plots_its_move_figures_too():
    runs = [_run("unthrottled", move_s=0.8, copy_mb_s=121.0, p99_move_ms=154.0),
            _run("throttle-low", move_s=21.2, copy_mb_s=3.8, throttle_ratio=0.95,
                 p99_move_ms=76.0)]
    assert shown_figures(runs, METRICS) == [*SHOWN, "move_s", "copy_mb_s", "throttle_ratio",
                                            "p99_move_ms"]
    png = base64.b64decode(distributions(runs, ["unthrottled", "throttle-low"], METRICS))
    assert png.startswith(b"\x89PNG")

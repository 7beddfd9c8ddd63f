"""The skeleton every cluster benchmark shares: ``runs`` runs (``--runs``, else 1 with
``--quick`` and ``default_runs`` otherwise), each an ``asyncio.run`` of one run in a scratch dir
of its own under ``--data-dir`` that is removed after it, a progress line per run on stderr;
then the figure printed (its lines and one ``json_line``) and saved to bench/results/.

    results = run_each(opts, lambda d: one_run(d, partitions),
                       lambda i, n, r: f"[jbod] run {i + 1}/{n}: ...")
    figure = {...}                                   # the bench's own medians
    report("jbod", "log_dir_failure", figure, [f"== log dir failure: ..."], opts.data_dir)
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from bench import json_line, log, machine_info, save_results


def runs_of(opts: Any, default_runs: int = 3) -> int:
    return opts.runs or (1 if opts.quick else default_runs)


def run_each(opts: Any, one_run: Callable[[str], Awaitable[dict]],
             progress: Callable[[int, int, dict], str], default_runs: int = 3) -> list[dict]:
    """The results of ``runs_of(opts)`` runs of ``one_run(scratch_dir)``, logging
    ``progress(i, runs, result)`` after each."""
    runs = runs_of(opts, default_runs)
    results = []
    for i in range(runs):
        with tempfile.TemporaryDirectory(dir=opts.data_dir) as d:
            r = asyncio.run(one_run(d))
        results.append(r)
        log(progress(i, runs, r))
    return results


def report(bench: str, figure_name: str, figure: dict, lines: Iterable[str],
           data_dir: str | None = None, **saved: Any) -> dict:
    """Print the figure's lines and its json_line, save it (with the machine it ran on and
    any ``saved`` extras) as bench/results/<bench>.json; return the figure."""
    for line in lines:
        print(line)
    print(json_line(bench, figure_name, figure))
    save_results(bench, {"machine": machine_info(data_dir), "figure": figure, **saved})
    return figure

"""The datadriven script format the scenario tests share (tests/controller/testdata,
tests/broker/testdata, tests/group/testdata), in the style of CockroachDB's datadriven: blocks
separated by blank lines, each a command, ``----`` and the output it must produce; ``#`` lines
are the "why" of the step and are kept as they are. ``REWRITE=1`` writes the actual output back.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def run_script(path: Path, run: Callable[[str], list[str]]) -> tuple[str, str]:
    """(expected, actual) text of a script file, each command given to ``run`` in order."""
    blocks = [b for b in path.read_text().strip("\n").split("\n\n") if b.strip()]
    expected: list[str] = []
    actual: list[str] = []
    for block in blocks:
        lines = block.split("\n")
        if lines and lines[0].startswith("#"):
            comment = [ln for ln in lines if ln.startswith("#")]
            lines = lines[len(comment):]
            expected += comment
            actual += comment
            if not lines:
                expected.append("")
                actual.append("")
                continue
        cmd = lines[0]
        sep = lines.index("----") if "----" in lines else len(lines)
        got = run(cmd)
        expected += [cmd, "----", *lines[sep + 1:], ""]
        actual += [cmd, "----", *got, ""]
    return "\n".join(expected), "\n".join(actual)


def rewrite_requested() -> bool:
    return os.environ.get("REWRITE") == "1"

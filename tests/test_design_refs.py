"""Every design citation in code resolves to a section of docs/design.md
(tools/design_refs.py): a comment that says why, naming a design, names one a newcomer can
open. The older citations ("seed 003", "C5", "finding D") pointed outside the repository; the
checker reports them and its --fix rewrites them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a script under tools/ (not a package): loaded from its file
_spec = importlib.util.spec_from_file_location("design_refs", ROOT / "tools" / "design_refs.py")
design_refs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(design_refs)


def test_every_design_citation_in_code_names_a_section_of_design_md():
    assert design_refs.problems(ROOT) == []


def test_the_checker_finds_a_missing_section_and_an_older_citation(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text('<a id="jbod"></a>\n## JBOD\n')
    (tmp_path / "m.py").write_text(
        '"""Restarts (design.md#jbod), elections (design.md#nowhere)."""\n'
        "x = 1  # seed 003 step 3\n"
        'HELP = "seed 003"  # not prose: user-facing text stays as it is\n')
    assert design_refs.problems(tmp_path) == [
        "m.py:1: design.md#nowhere: no such section",
        "m.py:2: 'seed 003' cites a design outside the repository "
        "(python tools/design_refs.py --fix)"]


def test_fix_rewrites_comments_and_docstrings_only():
    source = ('"""The handler (seed 003, C5): step 2 (seed 003 step 2.4)."""\n'
              'HELP = "seed 002"\n'
              "# Seed 000 / KIP-461 (C3): and cluster simulation finding D (seed 45).\n"
              "# JVM flags: C1-only JIT\n")
    assert design_refs.fix_source(source) == (
        '"""The handler (design.md#jbod): step 2 (design.md#jbod-step-2-4)."""\n'
        'HELP = "seed 002"\n'
        "# design.md#kip-461: and design.md#sim-finding-d.\n"
        "# JVM flags: C1-only JIT\n")


def test_fix_wraps_a_line_it_made_too_long():
    words = "word " * 17
    source = f'def f():\n    """{words}(seed 004 case 3) and\n    more."""\n'
    fixed = design_refs.fix_source(source)
    assert max(len(line) for line in fixed.splitlines()) <= design_refs.LIMIT
    assert "design.md#reassignment-case-3" in fixed and fixed.endswith("more.\"\"\"\n")


def test_the_checker_finds_a_regression_test_that_does_not_exist(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text(
        "- the rule (`tests/test_a.py::\n  test_gone`)\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_kept():\n    pass\n")
    (tmp_path / "m.py").write_text(
        "# the rule (tests/test_a.py::\n# test_kept), another (tests/test_a.py::test_renamed)\n"
        "x = 1  # and one in a file that is gone (tests/test_b.py::test_x)\n")
    assert design_refs.problems(tmp_path) == [
        "docs/design.md:1: tests/test_a.py::test_gone: no such test",
        "m.py:2: tests/test_a.py::test_renamed: no such test",
        "m.py:3: tests/test_b.py: no such test file"]

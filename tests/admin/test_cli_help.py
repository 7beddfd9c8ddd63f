"""Every replog command's --help renders: argparse formats help texts with %, so a literal % in
one (a nemesis described as "5-30% of packets") turned `replog chaos --help` into a traceback."""

from __future__ import annotations

import argparse

from admin.cli import build_parser


def _commands(parser: argparse.ArgumentParser, path=()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def test_every_command_help_renders():
    seen = []
    for path, parser in _commands(build_parser()):
        text = parser.format_help()
        assert text.startswith("usage:"), path
        seen.append(" ".join(path))
    assert {"chaos", "topics create", "cluster up", "lab run"} <= set(seen)

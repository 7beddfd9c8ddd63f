"""Registers the subcommands that live in their own modules."""

from __future__ import annotations


def register(sub) -> None:
    from admin import cluster_cmd
    cluster_cmd.add_parsers(sub)

"""common/event_loop.py: the processes run on uvloop unless REPLOG_EVENT_LOOP=asyncio says
otherwise, and a wrong value is refused in one line that names the variable."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
import uvloop

from common import event_loop


async def _loop_type() -> type:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop())


def test_uvloop_by_default(monkeypatch):
    monkeypatch.delenv(event_loop.ENV, raising=False)
    assert event_loop.run(_loop_type()) is uvloop.Loop


@pytest.mark.parametrize("value", ["asyncio", " AsyncIO "])
def test_the_standard_loop_on_request(monkeypatch, value):
    monkeypatch.setenv(event_loop.ENV, value)
    loop_type = event_loop.run(_loop_type())
    assert loop_type is not uvloop.Loop
    assert issubclass(loop_type, asyncio.BaseEventLoop)


def test_an_unknown_loop_is_refused_by_the_cli_in_one_line():
    r = subprocess.run([sys.executable, "-m", "admin.cli", "topics", "list",
                        "--bootstrap-server", "127.0.0.1:1"],
                       env=dict(os.environ, REPLOG_EVENT_LOOP="trio"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert r.stderr.strip() == ("Error: REPLOG_EVENT_LOOP must be 'uvloop' or 'asyncio', "
                                "not 'trio'")

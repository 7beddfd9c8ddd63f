"""A FetchStream call for the fake channels of fetcher tests: each request written is answered
by the next read with what the channel's unary Fetch fake would have returned, so a test's
transport fake covers both the stream (the default) and the unary path."""

from __future__ import annotations


class FakeFetchStream:
    def __init__(self, invoke):
        self.invoke = invoke  # request -> an awaitable answer (the unary fake's call)
        self.pending: list = []

    async def initial_metadata(self):
        return ()  # a leader that serves the stream sends its headers at once

    def done(self) -> bool:
        return False

    async def write(self, request) -> None:
        self.pending.append(self.invoke(request))

    async def read(self):
        return await self.pending.pop(0)

    def cancel(self) -> bool:
        return True


def stream_stream(path: str, invoke):
    """``channel.stream_stream`` of a fake channel whose unary Fetch is ``invoke``."""
    def open_stream(*args, **kwargs):
        assert path.endswith("/FetchStream"), path
        return FakeFetchStream(invoke)
    return open_stream

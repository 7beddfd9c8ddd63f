"""The Kafka listener's zero-copy send: a Fetch answer's records go from the segment file to the
socket with sendfile, on the broker's loop (uvloop, which lacks loop.sendfile) and on asyncio's,
including answers far larger than the socket buffer, and a file that shrank under the send
closes the connection rather than sending a short answer (Kafka's FileRecords.writeTo)."""

from __future__ import annotations

import asyncio
import os

import pytest
import uvloop

from broker.kafka_listener import _Close, send_answer
from broker.storage.file_region import FileRegion

LOOPS = {"uvloop": uvloop.new_event_loop, "asyncio": asyncio.new_event_loop}


def serve_once(loop_name: str, tmp_path, data: bytes, position: int, length: int,
               shrink_to: int | None = None) -> tuple[bytes, BaseException | None]:
    """Send [head, region, tail] over a real TCP connection; what the client received, and
    what the send raised."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)

    async def main():
        raised: list[BaseException | None] = [None]

        async def handler(reader, writer):
            fd = os.open(path, os.O_RDONLY)
            region = FileRegion(fd, position, length)
            if shrink_to is not None:
                os.truncate(path, shrink_to)
            try:
                await send_answer(writer, [b"head", region, b"tail"])
            except BaseException as e:  # noqa: BLE001 - reported to the test
                raised[0] = e
            finally:
                region.close()
                writer.close()

        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        got = bytearray()
        while chunk := await reader.read(65536):
            got += chunk
            await asyncio.sleep(0)  # a slow reader: the sender meets a full socket buffer
        writer.close()
        server.close()
        await server.wait_closed()
        return bytes(got), raised[0]

    loop = LOOPS[loop_name]()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_region_far_larger_than_the_socket_buffer_arrives_whole(loop_name, tmp_path):
    data = os.urandom(12 << 20)
    got, raised = serve_once(loop_name, tmp_path, data, 1000, len(data) - 2000)
    assert raised is None
    size = 4 + (len(data) - 2000) + 4
    assert got == size.to_bytes(4, "big") + b"head" + data[1000:-1000] + b"tail"


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_segment_truncated_under_the_send_closes_the_connection(loop_name, tmp_path):
    data = os.urandom(1 << 20)
    got, raised = serve_once(loop_name, tmp_path, data, 0, len(data), shrink_to=1000)
    assert isinstance(raised, _Close)
    # the size prefix promised more than arrived: the client sees a short answer, then EOF
    assert int.from_bytes(got[:4], "big") > len(got) - 4

"""A byte range of a segment file, sent to a socket without passing through Python bytes.

Kafka answers a consumer's Fetch with ``FileRecords.slice`` of the segment: the response header
is encoded in memory and the records go from the page cache to the socket with ``sendfile``
(``FileRecords.writeTo`` -> ``FileChannel.transferTo``). That is why its consumers are cheap.
A region holds its own descriptor (a dup of the segment's), so a segment deleted by retention
or replaced by truncation while the answer is being sent stays readable; the bytes are
the ones on disk at send time, as in Kafka. If the file became shorter than the region (a
truncation below it), the sender gets fewer bytes and must close the connection, as Kafka's
``FileRecords.writeTo`` throws "Size of FileRecords ... has been truncated during write".
"""

from __future__ import annotations

import contextlib
import os


class FileRegion:
    __slots__ = ("file", "length", "position")

    def __init__(self, fd: int, position: int, length: int):
        # An unbuffered file object owning the descriptor: asyncio's loop.sendfile wants one.
        self.file = open(fd, "rb", buffering=0, closefd=True)  # noqa: SIM115 - closed by close()
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        """The region's bytes (tests, and transports that cannot sendfile)."""
        return os.pread(self.file.fileno(), self.length, self.position)

    def close(self) -> None:
        self.file.close()

    def __del__(self) -> None:
        # A region dropped without close (a Fetch cancelled between read and send) must not
        # keep a deleted segment's blocks allocated.
        with contextlib.suppress(Exception):
            self.file.close()

    def __repr__(self) -> str:
        return f"FileRegion({self.file.name}, {self.position}, {self.length})"

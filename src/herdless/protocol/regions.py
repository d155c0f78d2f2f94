"""A stretch of an open file that a response carries as it is: stored batches sent with
sendfile() instead of being read into memory and written back out.

A region owns its descriptor (a duplicate of the segment file's), so retention, the
descriptor budget or a topic deletion may close or unlink the segment while the region
is in flight: the bytes stay readable until the region is closed. Whoever sends it
closes it; one that is dropped unsent (a fetch read again after a wait, a request whose
client hung up) closes itself when it is garbage.
"""

from __future__ import annotations

import os


class FileRegion:
    __slots__ = ("_fd", "position", "length")

    def __init__(self, fd: int, position: int, length: int) -> None:
        self._fd: int | None = fd
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileRegion(fd={self._fd}, position={self.position}, length={self.length})"

    @property
    def fd(self) -> int:
        if self._fd is None:
            raise ValueError("the file region is closed")
        return self._fd

    def read(self) -> bytes:
        """The region's bytes, for a transport that cannot send from a file. OSError if the
        file is shorter than the region now (a follower's log truncated under it)."""
        data = os.pread(self.fd, self.length, self.position)
        got = len(data)
        if got < self.length:
            parts = [data]
            while got < self.length:
                more = os.pread(self.fd, self.length - got, self.position + got)
                if not more:
                    raise OSError(f"file ends {self.length - got} bytes short of the region")
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        return data

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        self.close()


# A response's chunks, in order: bytes to write, and regions to send from their files.
Chunk = bytes | bytearray | memoryview | FileRegion


def close_regions(chunks: list[Chunk]) -> None:
    for chunk in chunks:
        if isinstance(chunk, FileRegion):
            chunk.close()

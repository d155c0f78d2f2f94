"""Writes a connection's responses: bytes through the transport, file regions with sendfile().

A Fetch response's records may be FileRegions of segment files (protocol/regions.py).
As Kafka does, they go from the page cache to the socket with sendfile(), never through
the broker's memory: the transport's buffer is first let drain, so the bytes written
before a region leave before it, then the region is sent straight on the socket. Where
the socket cannot be used that way (TLS, a transport without one), regions are read
and written like any bytes.

asyncio's own loop.sendfile() is not used: uvloop, which the broker runs on, does not
implement it, and its fallback reads the file through Python. Waiting for the socket to
take more uses a duplicate of its descriptor, because the event loop will not watch a
descriptor that belongs to a transport.
"""

from __future__ import annotations

import asyncio
import os

from herdless.protocol.regions import Chunk, FileRegion, close_regions


class TruncatedRegion(Exception):
    """A region's file ended before the region did (a follower's log was truncated)."""


class ResponseWriter:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        transport = self._transport = writer.transport
        socket = writer.get_extra_info("socket")
        self._socket_fd = (
            socket.fileno()
            if socket is not None and writer.get_extra_info("sslcontext") is None
            else None
        )
        # A response is let drain whole before the next request is read, as Kafka mutes a
        # connection until its send completes; and a region may follow bytes only once
        # the transport holds none.
        transport.set_write_buffer_limits(high=0)
        self._watched_fd: int | None = None

    async def send(self, chunks: list[Chunk]) -> None:
        """Write a response's chunks in order; its regions are closed whatever happens."""
        writer = self._writer
        if len(chunks) == 1:
            writer.write(chunks[0])  # type: ignore[arg-type]
            # Most answers leave whole in write(): nothing to wait for. A client gone
            # meanwhile is noticed by the next read.
            if self._transport.get_write_buffer_size():
                await writer.drain()
            return
        try:
            for chunk in chunks:
                if not isinstance(chunk, FileRegion):
                    writer.write(chunk)
                elif self._socket_fd is None:
                    writer.write(chunk.read())
                else:
                    await writer.drain()
                    await self._sendfile(self._socket_fd, chunk)
            await writer.drain()
        finally:
            close_regions(chunks)

    async def _sendfile(self, socket_fd: int, region: FileRegion) -> None:
        position, remaining = region.position, region.length
        while remaining:
            try:
                sent = os.sendfile(socket_fd, region.fd, position, remaining)
            except BlockingIOError:
                await self._writable(socket_fd)
                continue
            if sent == 0:
                raise TruncatedRegion(
                    f"a segment file ended {remaining} bytes short of the records being sent"
                )
            position += sent
            remaining -= sent

    async def _writable(self, socket_fd: int) -> None:
        if self._watched_fd is None:
            self._watched_fd = os.dup(socket_fd)
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        loop.add_writer(self._watched_fd, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            loop.remove_writer(self._watched_fd)

    def close(self) -> None:
        fd, self._watched_fd = self._watched_fd, None
        if fd is not None:
            os.close(fd)

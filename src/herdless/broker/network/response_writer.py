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

Answers that fit in one chunk (nearly all but Fetch's) are written together once the
event loop has handled what arrived in one pass, as Kafka's network threads send the
responses that are ready on each poll: see ResponseBatch.
"""

from __future__ import annotations

import asyncio
import os
import weakref

from herdless.protocol.regions import Chunk, FileRegion, close_regions


class TruncatedRegion(Exception):
    """A region's file ended before the region did (a follower's log was truncated)."""


class ResponseBatch:
    """The answers of one pass of the event loop, written when it has handled all that
    arrived, one connection's in the order they were given.

    Writing each answer the moment it is ready woke the client for each: on loopback
    the wake-up is charged to the writer, and it was a tenth of the broker's CPU with 8
    committers (perf, `_raw_spin_unlock_irqrestore` under `sock_def_readable`). Written
    together, the answers to requests that arrived together wake a client once: the
    broker spent a quarter to a half less time in the kernel per commit from 8
    committers, and made 11-22% more commits (docs/benchmarks.md). An answer waits at
    most for the requests handled after it in the same pass.
    """

    __slots__ = ("_loop", "_pending", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._pending: list[tuple[asyncio.WriteTransport, bytes]] = []
        self._scheduled = False

    def add(self, transport: asyncio.WriteTransport, data: bytes) -> None:
        self._pending.append((transport, data))
        if not self._scheduled:
            self._scheduled = True
            # Run at the start of the loop's next pass, before it waits for more.
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what is pending now (also before a response written otherwise)."""
        self._scheduled = False
        pending, self._pending = self._pending, []
        for transport, data in pending:
            if transport.is_closing():
                continue  # the client went: its next read says so
            try:
                transport.write(data)
            except (OSError, RuntimeError):
                continue  # likewise; the other connections' answers still go


_BATCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ResponseBatch] = (
    weakref.WeakKeyDictionary()
)


def _batch_of(loop: asyncio.AbstractEventLoop) -> ResponseBatch:
    batch = _BATCHES.get(loop)
    if batch is None:
        batch = _BATCHES[loop] = ResponseBatch(loop)
    return batch


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
        # An answer that did not leave whole is let drain before the connection's next is
        # given (as Kafka mutes a connection until its send completes, what waits is
        # bounded); and a region may follow bytes only once the transport holds none.
        transport.set_write_buffer_limits(high=0)
        self._watched_fd: int | None = None
        self._batch = _batch_of(asyncio.get_running_loop())

    async def send(self, chunks: list[Chunk]) -> None:
        """Write a response's chunks in order; its regions are closed whatever happens."""
        writer = self._writer
        if len(chunks) == 1:
            # Most answers leave whole in write(); one that did not is let drain before
            # the next is given. A client gone meanwhile is noticed by the next read.
            if self._transport.get_write_buffer_size():
                await writer.drain()
            self._batch.add(self._transport, chunks[0])  # type: ignore[arg-type]
            return
        self._batch.flush()  # this connection's earlier answers go first
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
        """Before the transport closes: what is pending of its answers is written."""
        self._batch.flush()
        fd, self._watched_fd = self._watched_fd, None
        if fd is not None:
            os.close(fd)

"""One client connection: read frames, answer each request in order.

As Kafka does, a connection handles one request at a time, so responses leave in
request order and a client's pipelined produces are appended in the order sent.
Anything that cannot be answered with an error code closes this connection only.

The reader reports when the client closes its end (without consuming what it
has sent): that is how a client that hangs up is noticed, and a long poll (a
Fetch waiting for records, a JoinGroup parked until the group forms) is then
abandoned at once instead of holding the socket until its wait runs out. A
handler is only ever cancelled at an await, after its effects (an append, a
join) are applied, as when Kafka drops the response of a client that has gone.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from herdless.broker.apis import API_VERSIONS_KEY, APIS, unsupported_api_versions
from herdless.broker.context import BrokerContext
from herdless.broker.limited_warnings import LimitedWarnings
from herdless.broker.metrics import BrokerMetrics
from herdless.broker.response_writer import ResponseWriter, TruncatedRegion
from herdless.protocol.codec import (
    FRAME_SIZE,
    MalformedRequest,
    Request,
    decode_request,
    encode_response,
    error_response,
    read_prefix,
)
from herdless.protocol.errors import ErrorCode
from herdless.protocol.regions import Chunk

log = logging.getLogger(__name__)

_GONE = (asyncio.IncompleteReadError, ConnectionError)


class ConnectionClosed(Exception):
    """The client must be disconnected; the message says why."""


class _Read(enum.Enum):
    IDLE = "the next request"  # connections.max.idle.ms
    FRAME = "the rest of a frame"  # request.read.timeout.ms


class Connection:
    def __init__(
        self,
        context: BrokerContext,
        metrics: BrokerMetrics,
        reader: HangUpReader,
        writer: asyncio.StreamWriter,
        warnings: LimitedWarnings | None = None,
    ) -> None:
        self._context = context
        self._metrics = metrics
        self._reader = reader
        self._writer = writer
        self._responses = ResponseWriter(writer)
        self._warnings = warnings or LimitedWarnings(log)
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.host = f"/{peer[0]}" if peer else ""
        # Warnings are limited per client host, across its connections.
        self._warned_as = f"connections from {peer[0] if peer else '?'}"
        # True while waiting for the next request: shutdown may then close at once.
        self.idle = True
        self._abandoned = False
        # The read under way (None: handling a request) and when it began: the
        # watchdog ends a connection idle or a frame stalled too long.
        self._reading: _Read | None = None
        self._reading_since = 0.0
        self._watchdog: asyncio.TimerHandle | None = None
        self._expired: _Read | None = None
        self._frame_size = 0
        self._loop_time = asyncio.get_running_loop().time

    async def serve(self) -> None:
        serving = asyncio.current_task()
        self._reader.on_hang_up = lambda: self._hung_up(serving)
        self._arm_watchdog(serving, self._loop_time())
        try:
            while not self._context.stopping:
                self.idle = True
                frame = await self._read_frame()
                self.idle = False
                await self._handle(frame)
        except _GONE:
            pass  # the client went away
        except (ConnectionClosed, TruncatedRegion) as exc:
            self._warnings.warn(self._warned_as, f"closing connection from {self.peer}: {exc}")
        except asyncio.CancelledError:
            if self._expired is not None:
                self._report_expired(self._expired)
            elif self._abandoned:
                log.debug("%s hung up during a request; abandoned it", self.peer)
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
        finally:
            if self._watchdog is not None:
                self._watchdog.cancel()
            self._reader.on_hang_up = None
            self._responses.close()
            self._writer.close()

    def _hung_up(self, serving: asyncio.Task[None] | None) -> None:
        """The client closed its end: a request still being handled has no one to answer."""
        if not self.idle and not self._abandoned and serving is not None:
            self._abandoned = True
            serving.cancel()

    async def _read_frame(self) -> bytes:
        self._reading, self._reading_since = _Read.IDLE, self._loop_time()
        frame = await self._reader.read_frame(self._frame_started)
        self._reading = None
        return frame

    def _frame_started(self, size: int) -> None:
        """A frame's size prefix arrived: refuse a size out of bounds, else time the rest."""
        limit = self._context.config.max_request_bytes
        if size < 0 or size > limit:
            raise ConnectionClosed(
                f"frame of {size} bytes is outside 0..{limit} (socket.request.max.bytes)"
            )
        self._reading, self._reading_since = _Read.FRAME, self._loop_time()
        self._frame_size = size

    def _arm_watchdog(self, serving: asyncio.Task[Any] | None, now: float) -> None:
        """Check the read under way when it would first be too long, and again from then.

        One timer per connection, re-armed only when it fires: two asyncio.timeout
        blocks per request (idle, then the frame) cost a tenth of a broker answering
        heartbeats, nearly all in scheduling and cancelling their timers.
        """
        config = self._context.config
        limits = {
            _Read.IDLE: config.connections_max_idle_ms / 1000,
            _Read.FRAME: config.request_read_timeout_ms / 1000,
        }
        reading = self._reading
        if reading is None:
            due = now + min(limits.values())
        else:
            due = self._reading_since + limits[reading]
            if now >= due:
                self._expired = reading
                if serving is not None:
                    serving.cancel()
                return
        loop = asyncio.get_running_loop()
        self._watchdog = loop.call_at(due, lambda: self._arm_watchdog(serving, loop.time()))

    def _report_expired(self, reading: _Read) -> None:
        config = self._context.config
        if reading is _Read.IDLE:
            log.debug(
                "closing connection from %s: idle for %d ms (connections.max.idle.ms)",
                self.peer,
                config.connections_max_idle_ms,
            )
            return
        self._warnings.warn(
            self._warned_as,
            f"closing connection from {self.peer}: a frame of {self._frame_size} bytes did not"
            f" arrive whole within {config.request_read_timeout_ms} ms (request.read.timeout.ms)",
        )

    async def _handle(self, frame: bytes) -> None:
        try:
            prefix = read_prefix(frame)
        except MalformedRequest as exc:
            raise ConnectionClosed(str(exc)) from None
        api = APIS.get(prefix.api_key)
        if api is None:
            raise ConnectionClosed(f"unknown API key {prefix.api_key}")
        if not api.min_version <= prefix.api_version <= api.max_version:
            if prefix.api_key != API_VERSIONS_KEY:
                raise ConnectionClosed(
                    f"{api.name} v{prefix.api_version} is not supported"
                    f" (v{api.min_version}-v{api.max_version})"
                )
            # The client learns our range from a v0 answer and retries.
            await self._send(unsupported_api_versions(prefix.correlation_id))
            return
        try:
            request = decode_request(frame, prefix, self.host)
        except MalformedRequest as exc:
            raise ConnectionClosed(str(exc)) from None
        if request.null_field is not None:
            await self._refuse(api.key, api.name, request, request.null_field)
            return
        started = time.perf_counter()
        response = await api.handler(self._context, request)
        if response is not None:
            await self._send(encode_response(response, request.api_version, request.correlation_id))
        self._metrics.observe_request(api.name, time.perf_counter() - started)

    async def _refuse(self, api_key: int, api_name: str, request: Request, field: str) -> None:
        """A request the schema forbids: INVALID_REQUEST if the API can say so, else close."""
        version = request.api_version
        problem = f"{api_name} v{version} has a null {field}, which the protocol forbids"
        answer = error_response(api_key, version, request.correlation_id, ErrorCode.INVALID_REQUEST)
        if answer is None:
            raise ConnectionClosed(problem)
        message = f"invalid request from {self.peer}: {problem}; answered INVALID_REQUEST"
        self._warnings.warn(self._warned_as, message)
        await self._send(answer)

    async def _send(self, chunks: list[Chunk]) -> None:
        await self._responses.send(chunks)


class HangUpReader(asyncio.StreamReader):
    """A StreamReader that says when the client closes its end, without being read:
    the bytes of a pipelined request stay where they are. It also reads a frame
    whole (read_frame)."""

    on_hang_up: Callable[[], None] | None = None
    # How many buffered bytes read_frame waits for (prefix and frame); 0 when none.
    _frame_wanted = 0

    async def read_frame(self, started: Callable[[int], None]) -> bytes:
        """The next request frame, without its size prefix, woken once when it is whole
        and copied out once. `started` is told the size as soon as it is known, and may
        raise to refuse the frame.

        readexactly wakes at every chunk the transport delivers (a Produce
        request of 1 MB comes in several) and pauses the transport whenever
        more than twice the reader's limit is buffered, to resume it when it
        next waits: a task step and two system calls per chunk, for bytes that
        are wanted anyway. While a frame is incomplete, feed_data only keeps
        what arrives. And where the next request follows in the buffer (clients
        pipeline their produces), readexactly copies a frame twice (a slice,
        then bytes of it); here it is copied once, from a view. Reading the size
        prefix in the same call saves a second call per request.
        """
        buffer = self._buffer
        prefix = FRAME_SIZE.size
        await self._wait_for(prefix)
        (size,) = FRAME_SIZE.unpack_from(buffer)
        started(size)
        end = prefix + size
        await self._wait_for(end)
        with memoryview(buffer) as view:
            frame = bytes(view[prefix:end])
        del buffer[:end]
        self._maybe_resume_transport()
        return frame

    async def _wait_for(self, size: int) -> None:
        """Until `size` bytes are buffered; IncompleteReadError if the client hangs up first."""
        buffer = self._buffer
        if len(buffer) >= size:
            return
        self._frame_wanted = size
        try:
            while len(buffer) < size:
                if self._exception is not None:
                    raise self._exception
                if self._eof:
                    partial = bytes(buffer)
                    buffer.clear()
                    raise asyncio.IncompleteReadError(partial, size)
                await self._wait_for_data("read_frame")
        finally:
            self._frame_wanted = 0

    def feed_data(self, data: bytes) -> None:
        wanted = self._frame_wanted
        if wanted and len(self._buffer) + len(data) < wanted:
            self._buffer.extend(data)
            return
        super().feed_data(data)

    def feed_eof(self) -> None:
        super().feed_eof()
        if self.on_hang_up is not None:
            self.on_hang_up()

    def set_exception(self, exc: BaseException) -> None:
        super().set_exception(exc)
        if self.on_hang_up is not None:
            self.on_hang_up()


async def start_server(
    accept: Callable[[HangUpReader, asyncio.StreamWriter], Awaitable[None]],
    host: str,
    port: int,
    **options: Any,
) -> asyncio.Server:
    """asyncio.start_server, with readers that report a hang-up."""
    loop = asyncio.get_running_loop()

    def protocol() -> asyncio.StreamReaderProtocol:
        return asyncio.StreamReaderProtocol(HangUpReader(loop=loop), accept, loop=loop)

    return await loop.create_server(protocol, host, port, **options)

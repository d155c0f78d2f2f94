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
It also tells a long poll when a whole request arrives behind it, so that the
poll answers instead of holding that request up (RequestReader.wake_on_arrival).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import types
from asyncio.streams import FlowControlMixin
from asyncio.tasks import _enter_task, _leave_task
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import replace
from typing import Any, NamedTuple, cast

from herdless.broker.clock import monotonic_ms
from herdless.broker.handlers.apis import APIS, unsupported_api_versions
from herdless.broker.handlers.context import BrokerContext
from herdless.broker.limited_warnings import LimitedWarnings
from herdless.broker.metrics import BrokerMetrics
from herdless.broker.network.failed_logins import FailedLogins
from herdless.broker.network.listeners import Listener
from herdless.broker.network.response_writer import ResponseWriter, TruncatedRegion
from herdless.broker.network.sasl_authentication import (
    SaslAuthentication,
    Step,
)
from herdless.broker.quotas.enforcement import TimedHandling, answered_before_throttle, charge
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.client_quotas import QuotaType
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
from herdless.security.principal import ANONYMOUS
from herdless.security.principal_mapping import PrincipalMappingError
from herdless.security.session import ClientSession

log = logging.getLogger(__name__)

_GONE = (asyncio.IncompleteReadError, ConnectionError)


_SASL_KEYS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


class ConnectionClosed(Exception):
    """The client must be disconnected; the message says why. `logged`: it was said
    already (before a delay the client may not wait out)."""

    def __init__(self, message: str, *, logged: bool = False) -> None:
        super().__init__(message)
        self.logged = logged


class Suspended(NamedTuple):
    """A request handled as its frame arrived that waits on `awaiting` (what its
    coroutine yielded), for the serving task to carry on. `cancelled`: the serving task
    was cancelled after the hand-over, before it carried the request on."""

    coroutine: Coroutine[Any, Any, None]
    awaiting: Any
    cancelled: asyncio.CancelledError | None = None


@types.coroutine
def _resume(work: Suspended) -> Generator[Any, Any, None]:
    """Carry on a coroutine started elsewhere, from where it waits: what `await
    coroutine` would do had this task started it. A cancellation that came between is
    the coroutine's: the handler's own timeout (asyncio.timeout names the serving task),
    or a hang-up abandoning it."""
    coroutine, awaiting = work.coroutine, work.awaiting
    if work.cancelled is not None:
        try:
            awaiting = coroutine.throw(work.cancelled)
        except StopIteration:
            return
    while True:
        try:
            sent = yield awaiting
        except GeneratorExit:
            coroutine.close()
            raise
        except BaseException as exc:  # a cancellation, or what the awaited future raised
            try:
                awaiting = coroutine.throw(exc)
            except StopIteration:
                return
        else:
            try:
                awaiting = coroutine.send(sent)
            except StopIteration:
                return


class _Read(enum.Enum):
    IDLE = "the next request"  # connections.max.idle.ms
    FRAME = "the rest of a frame"  # request.read.timeout.ms


class Connection:
    def __init__(
        self,
        context: BrokerContext,
        metrics: BrokerMetrics,
        reader: RequestReader,
        writer: asyncio.StreamWriter,
        warnings: LimitedWarnings | None = None,
        listener: Listener | None = None,
        failed_logins: FailedLogins | None = None,
    ) -> None:
        self._context = context
        self._failed_logins = failed_logins
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
        listener = listener or Listener.plaintext()
        # Who the client is: anonymous, its certificate's subject, or (once SASL is
        # through) the principal it authenticated as.
        # A certificate whose subject no rule maps: refused, as Kafka fails its login.
        self._refused: str | None = None
        try:
            principal = listener.principal_of(writer.get_extra_info("ssl_object"))
        except PrincipalMappingError as exc:
            principal, self._refused = ANONYMOUS, f"its certificate maps to no principal: {exc}"
        self.session = ClientSession(
            principal,
            listener.name,
            listener.security_protocol,
            peer[0] if peer else "",
            client_port=peer[1] if peer else 0,
            behind=reader,
        )
        self._sasl = None if listener.sasl is None else SaslAuthentication(listener.sasl, self.peer)
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
        self._loop = asyncio.get_running_loop()
        self._loop_time = self._loop.time
        self._serving: asyncio.Task[None] | None = None

    async def serve(self) -> None:
        if self._refused is not None:
            self._warnings.warn(
                self._warned_as, f"closing connection from {self.peer}: {self._refused}"
            )
            self._writer.close()
            return
        serving = self._serving = asyncio.current_task()
        self._reader.on_hang_up = lambda: self._hung_up(serving)
        self._reader.on_frame = self._handle_now
        self._arm_watchdog(serving, self._loop_time())
        try:
            while not self._context.stopping:
                self.idle = True
                work = await self._read_frame()
                self.idle = False
                if isinstance(work, Suspended):
                    await _resume(work)
                else:
                    await self._handle(work)
        except _GONE:
            pass  # the client went away
        except (ConnectionClosed, TruncatedRegion) as exc:
            if not getattr(exc, "logged", False):
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
            self._reader.on_frame = None
            self._responses.close()
            self._writer.close()
            self._closed()

    def _closed(self) -> None:
        """Run what the connection's requests asked to run once it closes; not when the
        broker is stopping: what they kept per connection stops with it."""
        if self._context.stopping:
            return
        for callback in self.session.on_close:
            try:
                callback()
            except Exception:
                log.exception("after closing the connection from %s", self.peer)

    def _handle_now(self, frame: bytes) -> bytes | Suspended | None:
        """Handle a request as its frame arrives, in data_received, while the serving task
        waits for it: None once it is answered, else the request, waiting, for the task
        to carry on.

        Most requests (a commit, a heartbeat, a produce) are answered without waiting for
        anything. Waking the serving task to handle each cost 2% of the broker's
        instructions on a commit (bench/broker_instructions.py): a future, a task step
        through the event loop, the climb back through the reading coroutines. The step
        runs as one of the serving task (asyncio's _enter_task, as Python 3.12's eager
        tasks do): code under it sees its task as it would there (asyncio.timeout,
        current_task), and a request that waits is carried on by that task, where a
        hang-up or a timeout cancels it.
        """
        if self._context.stopping:
            return frame  # as the serving task would have read it: its loop decides
        serving = self._serving
        assert serving is not None
        self._reading = None
        self.idle = False
        coroutine = self._handle(frame)
        _enter_task(self._loop, serving)
        try:
            awaiting = coroutine.send(None)
        except StopIteration:
            self.idle = True
            self._reading, self._reading_since = _Read.IDLE, self._loop_time()
            return None
        finally:
            _leave_task(self._loop, serving)
        return Suspended(coroutine, awaiting)

    def _hung_up(self, serving: asyncio.Task[None] | None) -> None:
        """The client closed its end: a request still being handled has no one to answer."""
        if not self.idle and not self._abandoned and serving is not None:
            self._abandoned = True
            serving.cancel()

    async def _read_frame(self) -> bytes | Suspended:
        self._reading, self._reading_since = _Read.IDLE, self._loop_time()
        work = await self._reader.read_frame(self._frame_started)
        self._reading = None
        return work

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
        sasl = self._sasl
        if sasl is not None and sasl.expects_raw_token:
            await self._sasl_step(sasl.raw_token(frame, monotonic_ms()))
            return
        try:
            prefix = read_prefix(frame)
        except MalformedRequest as exc:
            raise ConnectionClosed(str(exc)) from None
        if sasl is not None and (
            prefix.api_key in _SASL_KEYS
            or (not sasl.authenticated and prefix.api_key != ApiKey.API_VERSIONS)
            or (sasl.authenticated and sasl.session_expired(monotonic_ms()))
        ):
            await self._authenticate(sasl, frame, prefix)
            return
        api = APIS.get(prefix.api_key)
        if api is None or not api.served(self._context.config):
            raise ConnectionClosed(f"unknown API key {prefix.api_key}")
        if not api.min_version <= prefix.api_version <= api.max_version:
            if prefix.api_key != ApiKey.API_VERSIONS:
                raise ConnectionClosed(
                    f"{api.name} v{prefix.api_version} is not supported"
                    f" (v{api.min_version}-v{api.max_version})"
                )
            # The client learns our range from a v0 answer and retries.
            await self._responses.send(
                unsupported_api_versions(prefix.correlation_id, self._context.config)
            )
            return
        try:
            request = decode_request(frame, prefix, self.host)
        except MalformedRequest as exc:
            raise ConnectionClosed(str(exc)) from None
        if request.null_field is not None:
            await self._refuse(api.key, api.name, request, request.null_field)
            return
        request.session = self.session
        started = time.perf_counter()
        quotas = self._context.quotas
        handling: TimedHandling | None = None
        if quotas is not None and quotas.enabled(QuotaType.REQUEST):
            handling = TimedHandling(api.handler(self._context, request))
            response = await handling
        else:
            response = await api.handler(self._context, request)
        throttle_ms = 0
        if quotas is not None:
            busy = None if handling is None else handling.seconds
            throttle_ms = charge(quotas, request, len(frame), response, busy)
        answer_first = throttle_ms <= 0 or answered_before_throttle(request)
        if not answer_first:
            await self._mute(throttle_ms)
        if response is not None:
            await self._responses.send(
                encode_response(response, request.api_version, request.correlation_id)
            )
        self._metrics.observe_request(api.name, time.perf_counter() - started)
        if throttle_ms > 0 and answer_first:
            await self._mute(throttle_ms)

    async def _mute(self, throttle_ms: int) -> None:
        """Read nothing more from the client until its throttle is over (KIP-219): what it
        sends meanwhile waits in the reader, which stops reading the socket once its
        buffer is full. Shutdown may close the connection meanwhile, as an idle one (a
        response held back for an older client is then not sent)."""
        self.idle = True
        try:
            await asyncio.sleep(throttle_ms / 1000)
        finally:
            self.idle = False

    async def _authenticate(self, sasl: SaslAuthentication, frame: bytes, prefix: Any) -> None:
        """A request on a SASL listener that authentication decides on."""
        if prefix.api_key not in _SASL_KEYS:
            await self._sasl_step(sasl.refuse(prefix))
            return
        api = APIS[prefix.api_key]
        if not api.min_version <= prefix.api_version <= api.max_version:
            raise ConnectionClosed(f"{api.name} v{prefix.api_version} is not supported")
        try:
            request = decode_request(frame, prefix, self.host)
        except MalformedRequest as exc:
            raise ConnectionClosed(str(exc)) from None
        if prefix.api_key == ApiKey.SASL_HANDSHAKE:
            await self._sasl_step(sasl.handshake(request))
        else:
            await self._sasl_step(sasl.authenticate(request, monotonic_ms()))

    async def _sasl_step(self, step: Step) -> None:
        if step.reply is not None:
            await self._responses.send(step.reply)
        if step.authenticated is not None:
            self.session = replace(
                self.session, principal=step.authenticated, sasl_mechanism=step.mechanism
            )
        if step.failed:
            self._metrics.authentication_failed(self.session.listener, step.mechanism or "sasl")
            if self._failed_logins is not None:
                self._failed_logins.failed(self.session.client_address)
        if step.expired:
            self._metrics.expired_connection_killed(self.session.listener)
        if step.close is not None:
            # Said now: a client that hangs up during the delay still leaves its line.
            self._warnings.warn(
                self._warned_as, f"closing connection from {self.peer}: {step.close}"
            )
            if step.close_after_ms:
                # Kafka's connection.failed.authentication.delay.ms: no faster guessing.
                await asyncio.sleep(step.close_after_ms / 1000)
            raise ConnectionClosed(step.close, logged=True)

    async def _refuse(self, api_key: int, api_name: str, request: Request, field: str) -> None:
        """A request the schema forbids: INVALID_REQUEST if the API can say so, else close."""
        version = request.api_version
        problem = f"{api_name} v{version} has a null {field}, which the protocol forbids"
        answer = error_response(api_key, version, request.correlation_id, ErrorCode.INVALID_REQUEST)
        if answer is None:
            raise ConnectionClosed(problem)
        message = f"invalid request from {self.peer}: {problem}; answered INVALID_REQUEST"
        self._warnings.warn(self._warned_as, message)
        await self._responses.send(answer)


class RequestReader(FlowControlMixin, asyncio.Protocol):
    """The protocol of a client connection: it cuts what arrives into request frames, and
    says when the client closes its end without consuming what it has sent (the bytes of
    a pipelined request stay where they are).

    asyncio's StreamReader, on which this once stood, ran its data_received, feed_data
    and waiter for every chunk, then a wake-up that climbed through five frames of
    reading coroutines (2% of the broker's instructions on a commit). Here each whole
    frame goes to on_frame from data_received, or to the waiting read_frame; a frame
    already buffered (clients pipeline their produces) is taken with no wait at all.
    A large frame arrives in many chunks: they are only kept until it is whole. While a
    request is being handled, reading pauses once more than PAUSE_ABOVE bytes wait, as
    StreamReader paused at twice its limit.
    """

    PAUSE_ABOVE = 2 * 65536

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        accept: Callable[[RequestReader, asyncio.StreamWriter], Awaitable[None]],
    ) -> None:
        super().__init__(loop)
        self._accept = accept
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        # The read under way: its future, told the size as soon as the prefix is in.
        self._waiter: asyncio.Future[bytes | Suspended] | None = None
        self._started: Callable[[int], None] | None = None
        # The size of the frame whose prefix has been read, else -1.
        self._size = -1
        self._gone: BaseException | None = None
        self._serving_task: asyncio.Task[None] | None = None
        self.on_hang_up: Callable[[], None] | None = None
        # Given each whole frame that arrives while read_frame waits: it may answer the
        # request there and then (None), or return what read_frame is to give.
        self.on_frame: Callable[[bytes], bytes | Suspended | None] | None = None
        # Resolved once a whole frame waits behind the request being handled.
        self._wake: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not derive from asyncio.Transport, but have its methods.
        self._transport = cast(asyncio.Transport, transport)
        writer = asyncio.StreamWriter(transport, self, None, self._loop)  # type: ignore[arg-type]
        self._serving_task = self._loop.create_task(self._accept(self, writer))

    async def read_frame(self, started: Callable[[int], None]) -> bytes | Suspended:
        """The next request frame, without its size prefix, or what on_frame made of it.
        `started` is told the size as soon as it is known, and may raise to refuse the
        frame. IncompleteReadError (or the connection's error) once the client has gone
        without sending it whole."""
        frame = self._take(started)
        if frame is not None:
            return frame
        if self._gone is not None:
            raise self._gone
        if self._reading_paused:
            self._resume_reading()
        self._started = started
        self._wake = None  # the request it was for has been answered
        waiter = self._waiter = self._loop.create_future()
        try:
            return await waiter
        except asyncio.CancelledError as cancelled:
            # Cancelled once a request was handed over, before this task ran: the
            # cancellation is the request's (see _resume), not this read's.
            if not waiter.done() or waiter.cancelled() or waiter.exception() is not None:
                raise
            work = waiter.result()
            if not isinstance(work, Suspended):
                raise
            return work._replace(cancelled=cancelled)
        finally:
            self._waiter = self._started = None

    def _take(self, started: Callable[[int], None]) -> bytes | None:
        """A whole frame off the buffer, or None while it is not all there."""
        buffer = self._buffer
        size = self._size
        if size < 0:
            if len(buffer) < FRAME_SIZE.size:
                return None
            (size,) = FRAME_SIZE.unpack_from(buffer)
            started(size)
            self._size = size
        end = FRAME_SIZE.size + size
        if len(buffer) < end:
            return None
        with memoryview(buffer) as view:
            frame = bytes(view[FRAME_SIZE.size : end])
        del buffer[:end]
        self._size = -1
        return frame

    def waiting(self) -> bool:
        """Whether a whole frame waits in the buffer, behind the request being handled."""
        buffer = self._buffer
        if len(buffer) < FRAME_SIZE.size:
            return False
        (size,) = FRAME_SIZE.unpack_from(buffer)
        return len(buffer) >= FRAME_SIZE.size + size

    def wake_on_arrival(self, waiter: asyncio.Future[None]) -> None:
        """Resolve `waiter` once a whole frame waits behind the request being handled.

        Kafka reads nothing more of a connection until its request is answered, so a
        request sent behind a Fetch that waits for records waits out the Fetch's
        max_wait_ms: librdkafka asks for a group's coordinator on the connection it
        fetches on, and took 500 ms per answer while a coordinator moved. Cutting the
        long poll short answers both at once (the Fetch with what there is, as when its
        wait runs out)."""
        if self.waiting():
            if not waiter.done():
                waiter.set_result(None)
            return
        self._wake = waiter

    def data_received(self, data: bytes | memoryview) -> None:
        self._buffer += data
        waiter = self._waiter
        if waiter is None or waiter.done():
            wake = self._wake
            if wake is not None and self.waiting():
                self._wake = None
                if not wake.done():
                    wake.set_result(None)
            if waiter is None and len(self._buffer) > self.PAUSE_ABOVE and not self._reading_paused:
                assert self._transport is not None
                self._transport.pause_reading()
                self._reading_paused = True
            return
        started, on_frame = self._started, self.on_frame
        assert started is not None
        buffer = self._buffer
        while self._size >= 0 or len(buffer) >= FRAME_SIZE.size:
            try:
                frame = self._take(started)
                if frame is None:
                    return
                work = frame if on_frame is None else on_frame(frame)
            except Exception as exc:  # a size refused, a request that failed: said by the reader
                waiter.set_exception(exc)
                return
            except asyncio.CancelledError:  # it awaited something cancelled: as in the task
                waiter.cancel()
                return
            if work is not None:
                waiter.set_result(work)
                return
            # Answered at once: the next frame, if it is here whole, likewise.

    def _resume_reading(self) -> None:
        self._reading_paused = False
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def eof_received(self) -> bool:
        self._hang_up(None)
        # Kept open for writing: an answer under way may still be written. TLS has no
        # half-closed connection: there the transport closes whatever is answered.
        assert self._transport is not None
        return self._transport.get_extra_info("sslcontext") is None

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._hang_up(exc)

    def _hang_up(self, exc: Exception | None) -> None:
        """The client closed its end. Whole frames it sent before are still read; a read
        beyond them ends with `exc`, or IncompleteReadError."""
        if self._gone is not None:
            return
        self._gone = exc or asyncio.IncompleteReadError(bytes(self._buffer), None)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(self._gone)
        if self.on_hang_up is not None:
            self.on_hang_up()


class TlsRequestReader(asyncio.BufferedProtocol):
    """A TLS connection's protocol: the event loop decrypts what each read of the socket
    brought into one buffer, and says so once (buffer_updated); the RequestReader behind
    gets it as one chunk. Given a plain protocol, the loop hands over every TLS record
    (16 KiB at most) as bytes of its own, joined first: the reader then grew its buffer
    16 KiB at a time, and a produce of 1 KiB records over SASL_SSL ran at half the rate
    of PLAINTEXT, a third of the broker's time in memcpy (bench/security.py,
    docs/benchmarks.md). uvloop takes a protocol as buffered only if it is no
    asyncio.Protocol, so this one stands in front of the reader rather than being one.

    `decrypted` is shared by a server's connections: the loop fills it and calls
    buffer_updated in one go for one connection, which copies it out at once, so a
    connection costs no buffer of its own while it waits."""

    READ_SIZE = 256 * 1024

    def __init__(self, reader: RequestReader, decrypted: memoryview) -> None:
        self.reader = reader
        self._decrypted = decrypted

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.reader.connection_made(transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decrypted

    def buffer_updated(self, nbytes: int) -> None:
        self.reader.data_received(self._decrypted[:nbytes])

    def eof_received(self) -> bool | None:
        return self.reader.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.reader.connection_lost(exc)

    def pause_writing(self) -> None:
        self.reader.pause_writing()

    def resume_writing(self) -> None:
        self.reader.resume_writing()


async def start_server(
    accept: Callable[[RequestReader, asyncio.StreamWriter], Awaitable[None]],
    host: str | None,
    port: int,
    **options: Any,
) -> asyncio.Server:
    """A server whose connections are served by `accept(reader, writer)`, each in a task
    of its own (after the TLS handshake, when `ssl` is among the options)."""
    loop = asyncio.get_running_loop()
    if options.get("ssl") is None:
        return await loop.create_server(lambda: RequestReader(loop, accept), host, port, **options)
    decrypted = memoryview(bytearray(TlsRequestReader.READ_SIZE))
    return await loop.create_server(
        lambda: TlsRequestReader(RequestReader(loop, accept), decrypted), host, port, **options
    )

"""One client connection: read frames, answer each request in order.

As Kafka does, a connection handles one request at a time, so responses leave in
request order and a client's pipelined produces are appended in the order sent.
Anything that cannot be answered with an error code closes this connection only.
"""

from __future__ import annotations

import asyncio
import logging
import time

from herdless.broker.apis import API_VERSIONS_KEY, APIS, unsupported_api_versions
from herdless.broker.context import BrokerContext
from herdless.broker.metrics import BrokerMetrics
from herdless.protocol.codec import (
    FRAME_SIZE,
    MalformedRequest,
    decode_request,
    encode_response,
    read_prefix,
)

log = logging.getLogger(__name__)


class ConnectionClosed(Exception):
    """The client must be disconnected; the message says why."""


class Connection:
    def __init__(
        self,
        context: BrokerContext,
        metrics: BrokerMetrics,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self._context = context
        self._metrics = metrics
        self._reader = reader
        self._writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.host = f"/{peer[0]}" if peer else ""
        # True while waiting for the next request: shutdown may then close at once.
        self.idle = True

    async def serve(self) -> None:
        try:
            while not self._context.stopping:
                self.idle = True
                frame = await self._read_frame()
                self.idle = False
                await self._handle(frame)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        except ConnectionClosed as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
        finally:
            self._writer.close()

    async def _read_frame(self) -> bytes:
        size_bytes = await self._reader.readexactly(FRAME_SIZE.size)
        (size,) = FRAME_SIZE.unpack(size_bytes)
        if size < 0 or size > self._context.config.max_request_bytes:
            raise ConnectionClosed(
                f"frame of {size} bytes is outside 0..{self._context.config.max_request_bytes}"
                " (socket.request.max.bytes)"
            )
        return await self._reader.readexactly(size)

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
        started = time.perf_counter()
        response = await api.handler(self._context, request)
        if response is not None:
            await self._send(encode_response(response, request.api_version, request.correlation_id))
        self._metrics.observe_request(api.name, time.perf_counter() - started)

    async def _send(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

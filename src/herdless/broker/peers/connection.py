"""A connection from this broker to another, for replication: Kafka's protocol, as clients speak it.

One request at a time per connection, so responses match requests without a
table of correlation ids; a follower keeps one connection per leader it fetches
from. Any failure closes the connection: the caller reconnects and retries.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from herdless.protocol.codec import FRAME_SIZE, REQUESTS, RESPONSES
from herdless.protocol.errors import ErrorCode
from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_client import SaslClient

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
_T = TypeVar("_T")


class PeerError(Exception):
    """The other broker could not be reached, or answered with something unreadable."""


@dataclass(frozen=True)
class PeerSecurity:
    """How this broker speaks to the others: on its inter-broker listener's protocol."""

    # TLS, checking the other broker's certificate.
    ssl_context: ssl.SSLContext | None = None
    # A new SASL client for each connection to the broker at the given host, logging in
    # as this broker. Its calls may block (GSSAPI asks the KDC): they run in a thread.
    sasl: Callable[[str], SaslClient] | None = None


class PeerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        timeout_s: float,
        security: PeerSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._security = security or PeerSecurity()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_ids = itertools.count(1)
        # When the SASL session ends (KIP-368), on the monotonic clock: then reconnect.
        self._session_end: float | None = None

    async def request(self, api_key: int, version: int, timeout_s: float = 0, **fields: Any) -> Any:
        """Send one request and return the decoded response body."""
        try:
            async with asyncio.timeout((timeout_s or 0) + self._timeout_s):
                if self._session_end is not None and time.monotonic() >= self._session_end:
                    self.close()  # the SASL session is over: a new connection logs in again
                if self._writer is None:
                    await self._connect()
                return await self._exchange(api_key, version, fields)
        except (OSError, EOFError, asyncio.IncompleteReadError, TimeoutError) as exc:
            self.close()
            raise PeerError(f"{self.host}:{self.port}: {exc!r}") from exc
        except PeerError:
            self.close()
            raise

    async def _connect(self) -> None:
        client = None
        if self._security.sasl is not None:
            # Before connecting: a broker that cannot log in (no ticket) need not connect.
            client = await self._sasl_step(self._security.sasl, self.host)
        context = self._security.ssl_context
        self._reader, self._writer = await asyncio.open_connection(
            self.host, self.port, ssl=context, server_hostname=self.host if context else None
        )
        if client is not None:
            await self._authenticate(client)

    async def _authenticate(self, client: SaslClient) -> None:
        """Log in as this broker: SaslHandshake v1, then SaslAuthenticate until done."""
        handshake = await self._exchange(SASL_HANDSHAKE, 1, {"mechanism": client.mechanism})
        if handshake.error_code != ErrorCode.NONE:
            raise PeerError(
                f"{self.host}:{self.port} does not take SASL mechanism {client.mechanism}"
                f" (error {handshake.error_code}; it takes {handshake.mechanisms})"
            )
        message: bytes | None = await self._sasl_step(client.first)
        started = time.monotonic()
        while message is not None:
            answer = await self._exchange(SASL_AUTHENTICATE, 2, {"auth_bytes": message})
            if answer.error_code != ErrorCode.NONE:
                raise PeerError(
                    f"authenticating to {self.host}:{self.port} with {client.mechanism}"
                    f" failed: {answer.error_message}"
                )
            if answer.session_lifetime_ms > 0:
                self._session_end = started + answer.session_lifetime_ms / 1000 * 0.9
            message = await self._sasl_step(client.evaluate, answer.auth_bytes)

    async def _sasl_step(self, step: Callable[..., _T], *args: Any) -> _T:
        """A step of the SASL client, in a thread: GSSAPI's ask the KDC, SCRAM's hash."""
        try:
            return await asyncio.to_thread(step, *args)
        except SaslAuthenticationFailed as exc:
            # This broker could not log in, or the other could not prove who it is.
            raise PeerError(f"{self.host}:{self.port}: {exc}") from None

    async def _exchange(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        request = _build(REQUESTS[api_key], REQUESTS[api_key]._json["fields"], fields)
        request.API_VERSION = version
        correlation_id = next(self._correlation_ids)
        request.with_header(correlation_id=correlation_id, client_id=self._client_id)
        data = bytes(request.encode(header=True, framed=True))
        assert self._reader is not None and self._writer is not None
        self._writer.write(data)
        await self._writer.drain()
        (size,) = FRAME_SIZE.unpack(await self._reader.readexactly(FRAME_SIZE.size))
        frame = await self._reader.readexactly(size)
        try:
            response = RESPONSES[api_key].decode(frame, version=version, header=True)
        except Exception as exc:  # the codec raises assorted errors on bad input
            raise PeerError(f"unreadable response to API {api_key} v{version}: {exc}") from exc
        if response.header.correlation_id != correlation_id:
            raise PeerError(
                f"response {response.header.correlation_id} does not answer {correlation_id}"
            )
        return response

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
        self._session_end = None


def _build(cls: Any, schema: list[dict[str, Any]], values: dict[str, Any]) -> Any:
    """An instance of a generated message class from plain dicts and lists, so callers need
    not name each nested class (FetchRequest.FetchTopic.FetchPartition...)."""
    kinds = {_snake(field["name"]): field for field in schema}
    built = {}
    for name, value in values.items():
        field = kinds.get(name)
        if field is not None and "fields" in field and value is not None:
            nested = getattr(cls, field["type"].removeprefix("[]"))
            if field["type"].startswith("[]"):
                value = [_build(nested, field["fields"], item) for item in value]
            else:
                value = _build(nested, field["fields"], value)
        built[name] = value
    return cls(**built)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")

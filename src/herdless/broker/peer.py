"""A connection from this broker to another, for replication: Kafka's protocol, as clients speak it.

One request at a time per connection, so responses match requests without a
table of correlation ids; a follower keeps one connection per leader it fetches
from. Any failure closes the connection: the caller reconnects and retries.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from herdless.protocol.codec import FRAME_SIZE, REQUESTS, RESPONSES


class PeerError(Exception):
    """The other broker could not be reached, or answered with something unreadable."""


class PeerConnection:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float) -> None:
        self.host = host
        self.port = port
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_ids = itertools.count(1)

    async def request(self, api_key: int, version: int, timeout_s: float = 0, **fields: Any) -> Any:
        """Send one request and return the decoded response body."""
        request = _build(REQUESTS[api_key], REQUESTS[api_key]._json["fields"], fields)
        request.API_VERSION = version
        correlation_id = next(self._correlation_ids)
        request.with_header(correlation_id=correlation_id, client_id=self._client_id)
        data = bytes(request.encode(header=True, framed=True))
        try:
            async with asyncio.timeout((timeout_s or 0) + self._timeout_s):
                return await self._exchange(data, api_key, version, correlation_id)
        except (OSError, EOFError, asyncio.IncompleteReadError, TimeoutError) as exc:
            self.close()
            raise PeerError(f"{self.host}:{self.port}: {exc!r}") from exc
        except PeerError:
            self.close()
            raise

    async def _exchange(self, data: bytes, api_key: int, version: int, correlation_id: int) -> Any:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
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

"""One connection to each other broker, for requests a broker makes on its own behalf
(transaction markers, share state): each connection carries one request at a time, so
concurrent callers to the same broker take turns, and a broker that moved (a new host
or port) gets a new connection."""

from __future__ import annotations

import asyncio
from typing import Any

from herdless.broker.peers.connection import PeerConnection, PeerSecurity
from herdless.cluster.metadata import BrokerEndpoint


class PeerPool:
    def __init__(
        self, client_id: str, timeout_s: float, security: PeerSecurity | None = None
    ) -> None:
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._security = security
        self._connections: dict[int, tuple[PeerConnection, asyncio.Lock]] = {}

    async def request(
        self, broker: BrokerEndpoint, api_key: int, version: int, **fields: Any
    ) -> Any:
        """The decoded response of `broker` to one request; PeerError if it could not be
        reached or answered with something unreadable."""
        connection, lock = self._connection(broker)
        async with lock:
            return await connection.request(api_key, version, **fields)

    def _connection(self, broker: BrokerEndpoint) -> tuple[PeerConnection, asyncio.Lock]:
        known = self._connections.get(broker.node_id)
        if known is not None and (known[0].host, known[0].port) == (broker.host, broker.port):
            return known
        if known is not None:
            known[0].close()
        made = (
            PeerConnection(
                broker.host, broker.port, self._client_id, self._timeout_s, self._security
            ),
            asyncio.Lock(),
        )
        self._connections[broker.node_id] = made
        return made

    def close(self) -> None:
        for connection, _ in self._connections.values():
            connection.close()
        self._connections.clear()

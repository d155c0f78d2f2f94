"""Sends a coordinator's rebalance-history batches to the broker leading `__rebalance_history`.

In a cluster the shard of a group and the single partition of the history
topic are usually led by different brokers. The history is operator
information, so it is written as a producer would write it (acks=1), in
order, one request at a time, and given up (with a warning) rather than ever
delaying a group: the queue is bounded and a batch that cannot be delivered
after a few tries is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from herdless.broker.peers.connection import PeerConnection, PeerError, PeerSecurity
from herdless.cluster.metadata import BrokerEndpoint
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

PRODUCE_VERSION = 9
TIMEOUT_MS = 5_000
MAX_PENDING = 1_000
ATTEMPTS = 5
BACKOFF_S = 0.5


# The client id a broker forwards with, then its id; the leader of the history topic
# takes writes to it only from such clients (before authentication exists, the same
# trust as a follower's fetch, which names its replica id).
FORWARDING_CLIENT_ID_PREFIX = "herdless-broker-"


class HistoryForwarder:
    def __init__(
        self,
        node_id: int,
        topic: str,
        leader_of: Callable[[str, int], BrokerEndpoint | None],
        security: PeerSecurity | None = None,
    ) -> None:
        self._security = security
        self._client_id = f"{FORWARDING_CLIENT_ID_PREFIX}{node_id}"
        self._topic = topic
        self._leader_of = leader_of
        self._pending: asyncio.Queue[bytes] = asyncio.Queue(MAX_PENDING)
        self._connection: PeerConnection | None = None
        self._task: asyncio.Task[None] | None = None

    def send(self, batch: bytes) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            self._pending.put_nowait(batch)
        except asyncio.QueueFull:
            log.warning(
                "dropping rebalance history: %d batches wait for %s", MAX_PENDING, self._topic
            )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._connection is not None:
            self._connection.close()

    async def _run(self) -> None:
        while True:
            batch = await self._pending.get()
            for attempt in range(1, ATTEMPTS + 1):
                error = await self._deliver(batch)
                if error is None:
                    break
                if attempt == ATTEMPTS:
                    log.warning("dropping rebalance history for %s-0: %s", self._topic, error)
                else:
                    await asyncio.sleep(BACKOFF_S)

    async def _deliver(self, batch: bytes) -> str | None:
        """Send one batch to the partition's current leader; None once it is written."""
        leader = self._leader_of(self._topic, 0)
        if leader is None:
            return "it has no leader"
        connection = self._connection
        if connection is None or (connection.host, connection.port) != (leader.host, leader.port):
            if connection is not None:
                connection.close()
            connection = self._connection = PeerConnection(
                leader.host, leader.port, self._client_id, TIMEOUT_MS / 1000, self._security
            )
        try:
            response = await connection.request(
                ApiKey.PRODUCE,
                PRODUCE_VERSION,
                transactional_id=None,
                acks=1,
                timeout_ms=TIMEOUT_MS,
                topic_data=[
                    {"name": self._topic, "partition_data": [{"index": 0, "records": batch}]}
                ],
            )
        except PeerError as exc:
            return str(exc)
        with contextlib.suppress(IndexError):
            error = response.responses[0].partition_responses[0].error_code
            if error != ErrorCode.NONE:
                return ErrorCode(error).name
        return None

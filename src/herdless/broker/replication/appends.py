"""Wakes long-polling fetches when a partition they wait on gets new records."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from herdless.security.session import NO_REQUESTS_BEHIND, RequestsBehind

TopicPartition = tuple[str, int]


class AppendNotifier:
    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    def notify(self, topic: str, partition: int) -> None:
        for waiter in self._waiters.pop((topic, partition), ()):
            if not waiter.done():
                waiter.set_result(None)

    def notify_all(self) -> None:
        """Release every waiter, e.g. at shutdown so parked fetches answer at once."""
        for waiters in self._waiters.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
        self._waiters.clear()

    async def wait(
        self,
        partitions: Iterable[TopicPartition],
        timeout_s: float,
        behind: RequestsBehind = NO_REQUESTS_BEHIND,
    ) -> bool:
        """Wait until one of `partitions` is appended to, or a request waits `behind` the
        one waiting; False if the timeout came first."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        behind.wake_on_arrival(waiter)
        keys = list(partitions)
        for key in keys:
            self._waiters.setdefault(key, set()).add(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                await waiter
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        with contextlib.suppress(KeyError):
                            del self._waiters[key]

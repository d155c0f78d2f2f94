"""Following a sequence of change notifications in ZooKeeper, as Kafka's
ZkNodeChangeNotificationListener does: each notification names an entity that
changed; a broker reads the entities the new ones name and applies them, in order.

The watch hands the notifications' names over on kazoo's thread. One task on the
event loop reads what the new ones name (in a worker thread: ZooKeeper calls block)
and applies it; names that arrive meanwhile are read next by the same task, so no two
reads race, and a read that fails is tried again unless newer names came.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from herdless.cluster.errors import ClusterUnavailable
from herdless.cluster.zookeeper.calls import zookeeper_call

log = logging.getLogger(__name__)

Changes = TypeVar("Changes")

RETRY_S = 1.0


class ChangeNotifications(Generic[Changes]):
    """What `read(names, last_change)` finds (in a worker thread: the number of the last
    notification it read, and the changes the newer ones name) is given to
    `apply(changes)` on the loop."""

    def __init__(
        self,
        what: str,
        read: Callable[[list[str], int], tuple[int, Changes]],
        apply: Callable[[Changes], None],
    ) -> None:
        self._what = what
        self._read = read
        self._apply = apply
        # The sequence number of the last notification applied (Kafka's lastExecutedChange).
        self.last_change = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[str] | None = None
        self._reading: asyncio.Task[None] | None = None

    def bind(self) -> None:
        """On the loop, before the watch is set: the loop the names are handed to."""
        self._loop = asyncio.get_running_loop()

    def on_changes(self, names: list[str]) -> None:
        """The watch's callback, on kazoo's thread: every notification's name."""
        loop = self._loop
        assert loop is not None, "bind() first"
        loop.call_soon_threadsafe(self._changed, names)

    async def stop(self) -> None:
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)

    def _changed(self, names: list[str]) -> None:
        self._pending = names
        if self._reading is None or self._reading.done():
            self._reading = asyncio.get_running_loop().create_task(self._read_changes())

    async def _read_changes(self) -> None:
        while self._pending is not None:
            names, self._pending = self._pending, None
            try:
                last, changes = await zookeeper_call(self._read, names, self.last_change)
            except Exception as exc:
                # The watch calls back after a reconnection only if the names moved:
                # try these again unless newer ones came meanwhile.
                if isinstance(exc, ClusterUnavailable):
                    log.warning("%s not read yet, trying again: %s", self._what, exc)
                else:
                    log.exception("%s not read, trying again", self._what)
                if self._pending is None:
                    self._pending = names
                await asyncio.sleep(RETRY_S)
                continue
            self._apply(changes)
            self.last_change = max(self.last_change, last)

"""Watches on znodes, and the handle that cancels one.

A callback gets the znode's value as it is when read, not every change: changes that come
faster than the re-read are seen as one. Kazoo drops ZooKeeper's watches when the
connection drops and re-reads on reconnection, calling back only if the value moved.
Setting a watch reads the znode first and retries while disconnected, so setting one
blocks until ZooKeeper answers; set watches after connecting, as a broker does at
start-up. A callback runs on a kazoo thread (its first call runs in the thread that set
the watch, before the watch is returned); hand its value on, do no long work in it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from kazoo.client import KazooClient
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from herdless.cluster.errors import MalformedZNode

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Watch:
    """A handle on a watch or listener: cancel() stops further callbacks."""

    def __init__(self, on_cancel: Callable[[], None] | None = None) -> None:
        self._cancelled = threading.Event()
        self._on_cancel = on_cancel

    def cancel(self) -> None:
        self._cancelled.set()
        if self._on_cancel is not None:
            self._on_cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()


def watch_children(client: KazooClient, path: str, deliver: Callable[[list[str]], None]) -> Watch:
    watch = Watch()
    safe = guarded(deliver)

    def on_children(children: list[str]) -> bool | None:
        if watch.cancelled:
            return False
        safe(children)
        return None

    ChildrenWatch(client, path, on_children)
    return watch


def watch_data(
    client: KazooClient,
    path: str,
    decode: Callable[[bytes | None, ZnodeStat | None], T],
    callback: Callable[[T], None],
) -> Watch:
    watch = Watch()
    safe = guarded(callback)

    def on_data(data: bytes | None, stat: ZnodeStat | None) -> bool | None:
        if watch.cancelled:
            return False
        try:
            value = decode(data if stat is not None else None, stat)
        except MalformedZNode as exc:
            logger.error("watch on %s skipped a change: %s", path, exc)
            return None
        safe(value)
        return None

    DataWatch(client, path, on_data)
    return watch


def guarded(callback: Callable[[T], None]) -> Callable[[T], None]:
    """A callback that logs its exceptions instead of raising them into kazoo's threads."""

    def call(value: T) -> None:
        try:
            callback(value)
        except Exception:
            logger.exception("cluster store callback %r failed", callback)

    return call

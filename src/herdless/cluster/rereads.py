"""Re-reading something a watch says has changed, so that the last read applied is never
older than the last change.

A watch that fires only says "changed"; the broker then reads the current value. Reads
run in worker threads (cluster/zookeeper/calls.py) and may finish in any order, so two
reads started by two changes can apply backwards: the newer view, then the older one
over it, which then stays until the next change. Here one read runs at a time, and a
change seen while it runs starts one more read after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


class Reread(Generic[T]):
    """`changed()` makes sure `apply(await read())` runs, starting after this call."""

    def __init__(
        self,
        what: str,
        read: Callable[[], Awaitable[T]],
        apply: Callable[[T], None],
        errors: tuple[type[Exception], ...] = (),
    ) -> None:
        self._what = what
        self._read = read
        self._apply = apply
        self._errors = errors
        self._task: asyncio.Task[None] | None = None
        self._again = False

    def changed(self) -> None:
        if self._task is not None:
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The reading under way, if any."""
        return self._task

    async def _run(self) -> None:
        try:
            while True:
                self._again = False
                try:
                    value = await self._read()
                except self._errors as exc:
                    # A failed read leaves the last view; the next change reads again.
                    log.warning("could not read %s: %s", self._what, exc)
                else:
                    self._apply(value)
                if not self._again:
                    return
        finally:
            self._task = None

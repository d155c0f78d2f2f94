"""The broker notices its own stalls: times it could not run at all.

A process stopped (SIGSTOP), a long garbage collection or a disk that blocks
the event loop look the same from inside: the monotonic clock jumps between
two turns of the loop. Nothing could be heard meanwhile, so the group
coordinator must not count that time against members' sessions, or a broker
that was merely paused would expire every member the moment it resumes.

A ticker observes the loop every TICK_S; anything that is about to act on
elapsed time (a coordinator timer firing) observes first, so a stall is
accounted before any deadline is judged, whichever of the two runs first
after the loop resumes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

TICK_S = 0.1
# A gap beyond the tick this long is a stall; shorter ones are ordinary loop lag.
STALL_THRESHOLD_S = 1.0


class StallDetector:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last_seen = clock()
        self._task: asyncio.Task[None] | None = None
        # Told of each stall, with its length in milliseconds.
        self.listeners: list[Callable[[int], None]] = []
        self.stalled_ms_total = 0

    def start(self) -> None:
        self._last_seen = self._clock()
        self._task = asyncio.get_running_loop().create_task(self._tick())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def observe(self) -> None:
        """Account for a stall that ended just now, if there was one."""
        now = self._clock()
        gap = now - self._last_seen - TICK_S
        self._last_seen = now
        if gap < STALL_THRESHOLD_S:
            return
        stalled_ms = round(gap * 1000)
        self.stalled_ms_total += stalled_ms
        log.warning(
            "the broker could not run for %.1fs (paused, or stalled): group members'"
            " session deadlines move on by as much",
            gap,
        )
        for listener in self.listeners:
            listener(stalled_ms)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self.observe()

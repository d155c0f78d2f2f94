"""How many segment files may be open at once, across all the logs of a LogManager.

A segment holds its .log open while in use, and the active segment its .index
and .timeindex too: three descriptors. Kept open for ever, every partition would
cost three descriptors (and every segment one), and a broker would host no more
partitions than its file limit allows. Instead, the segments used least recently
are closed when the budget is spent, and reopen on their next use: a broker
hosts as many partitions as it likes, and the file limit only bounds how many it
serves at the same moment without reopening files.

Closing a segment's files needs its log's lock, as every use of them holds it.
The log that opens a file holds its own; another log's segment is closed only if
its lock can be taken at once (try-lock), so the budget never waits, and a log
busy in another thread keeps its files for now: the budget is soft by what the
other threads hold.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol

# A segment's .log, .index and .timeindex: counted whole, whichever are open.
DESCRIPTORS_PER_SEGMENT = 3
# Never fewer open than this, whatever the file limit: a log reading across a few
# segments must not close each one it has just opened.
MIN_OPEN_SEGMENTS = 8


class OpenFiles(Protocol):
    """A segment as the budget sees it."""

    @property
    def owner(self) -> threading.Lock: ...

    def release_files(self) -> None: ...


class DescriptorBudget:
    def __init__(self, descriptors: int) -> None:
        self.max_open = max(descriptors // DESCRIPTORS_PER_SEGMENT, MIN_OPEN_SEGMENTS)
        self._lock = threading.Lock()
        # Least recently used first.
        self._open: OrderedDict[OpenFiles, None] = OrderedDict()

    @property
    def open_segments(self) -> int:
        return len(self._open)

    def used(self, segment: OpenFiles) -> None:
        """`segment` has its files open and is in use; its owner's lock is held."""
        with self._lock:
            if segment in self._open:
                self._open.move_to_end(segment)
                return
            self._open[segment] = None
            if len(self._open) > self.max_open:
                self._make_room(segment)

    def forget(self, segment: OpenFiles) -> None:
        """`segment` closed its files itself."""
        with self._lock:
            self._open.pop(segment, None)

    def _make_room(self, opening: OpenFiles) -> None:
        excess = len(self._open) - self.max_open
        for victim in list(self._open):
            if excess <= 0:
                return
            if victim is opening:
                continue
            # The opening segment's owner is held by this thread already.
            mine = victim.owner is opening.owner
            if not mine and not victim.owner.acquire(blocking=False):
                continue  # in use in another thread: it keeps its files for now
            try:
                victim.release_files()
            finally:
                if not mine:
                    victim.owner.release()
            del self._open[victim]
            excess -= 1

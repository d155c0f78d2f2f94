"""Producer ids that are never handed out twice, across restarts too.

A reused id would collide with the sequence numbers the log remembers for its
earlier owner. Ids are reserved in blocks; the end of the reserved block is
made durable before any id from it is given out, so a crash skips ids at worst.
"""

from __future__ import annotations

import os
from pathlib import Path

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._next = 0
        self._block_end = 0
        if path.exists():
            # Written atomically, so anything but a number means tampering: refuse to guess.
            self._next = self._block_end = int(path.read_text())

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._reserve(self._next + BLOCK_SIZE)
        producer_id = self._next
        self._next += 1
        return producer_id

    def _reserve(self, block_end: int) -> None:
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(str(block_end))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        self._block_end = block_end

"""Producer ids that are never handed out twice, across restarts and across brokers.

A reused id would collide with the sequence numbers the log remembers for its
earlier owner. Ids are handed out from blocks, and a block is reserved (made
durable where it is recorded) before any id from it is given out, so a crash
skips ids at worst. One broker records the end of its last block in a file in
its data directory; brokers of a cluster reserve blocks in ZooKeeper, as Kafka
does (/latest_producer_id_block), so no two brokers ever share a block.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from herdless.storage import StorageError, StorageIOError

BLOCK_SIZE = 1000

# Reserves the next block of `size` ids; returns its first id and the id past its end.
BlockSource = Callable[[int], Awaitable[tuple[int, int]]]


class ProducerIds:
    def __init__(self, reserve: BlockSource) -> None:
        # Public: the transaction coordinator's ids come from the same blocks.
        self.reserve = reserve
        self._next = 0
        self._block_end = 0
        self._reserving = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._reserving:
            if self._next >= self._block_end:
                self._next, self._block_end = await self.reserve(BLOCK_SIZE)
        producer_id = self._next
        self._next += 1
        return producer_id


class ProducerIdsNotReady(Exception):
    """No producer id at hand: the next block is being reserved. The caller answers a
    retriable error (COORDINATOR_LOAD_IN_PROGRESS, as Kafka's ProducerIdManager does)."""


class PrefetchedProducerIds:
    """A synchronous source of producer ids for the transaction coordinator, whose pure
    shard asks for one in the middle of an operation and cannot wait: ids come from a
    block already reserved, and the next block is reserved in the background once the
    current one is nine tenths used (Kafka's RPCProducerIdManager). When a block runs
    out before the next is in, ProducerIdsNotReady.

    Blocks come from the same source as ProducerIds', so no id is ever handed out twice
    by the two. Call it on the event loop."""

    def __init__(
        self,
        reserve: BlockSource,
        on_error: Callable[[Exception], None] = lambda exc: None,
        block_size: int = BLOCK_SIZE,
    ) -> None:
        self._reserve = reserve
        self._on_error = on_error
        self._block_size = block_size
        self._next = 0
        self._block_end = 0
        self._spare: tuple[int, int] | None = None
        self._reserving: asyncio.Task[None] | None = None

    def __call__(self) -> int:
        if self._next >= self._block_end and self._spare is not None:
            (self._next, self._block_end), self._spare = self._spare, None
        if self._next >= self._block_end:
            self.prefetch()
            raise ProducerIdsNotReady("the next block of producer ids is being reserved")
        producer_id = self._next
        self._next += 1
        if self._block_end - self._next <= self._block_size // 10:
            self.prefetch()
        return producer_id

    def prefetch(self) -> None:
        """Reserve the next block in the background, unless one is at hand or coming."""
        if self._spare is not None or (self._reserving is not None and not self._reserving.done()):
            return
        self._reserving = asyncio.get_running_loop().create_task(self._reserve_next())

    async def _reserve_next(self) -> None:
        try:
            self._spare = await self._reserve(self._block_size)
        except Exception as exc:
            # Asked again by the next caller that finds no id.
            self._on_error(exc)

    async def close(self) -> None:
        if self._reserving is not None:
            self._reserving.cancel()
            await asyncio.gather(self._reserving, return_exceptions=True)


class LocalBlocks:
    """One broker's blocks, the end of the last one kept in a file."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._end = 0
        if path.exists():
            # Written atomically, so anything but a number means tampering: refuse to guess.
            try:
                text = path.read_text()
            except OSError as exc:
                raise StorageError(f"{path} cannot be read: {exc.strerror}") from exc
            if not text.strip().isdigit():
                raise StorageError(
                    f"{path} should hold the end of the last producer id block, a number,"
                    f" but holds {text[:40]!r}"
                )
            self._end = int(text)

    async def reserve(self, size: int) -> tuple[int, int]:
        start, end = self._end, self._end + size
        tmp = self._path.with_suffix(".tmp")
        try:
            with open(tmp, "w") as f:
                f.write(str(end))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._path)
        except OSError as exc:
            raise StorageIOError(f"cannot reserve producer ids in {self._path}: {exc}") from exc
        self._end = end
        return start, end

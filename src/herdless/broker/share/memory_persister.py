"""A Persister that keeps share partitions' state in this broker's memory: what one broker
uses until the share coordinator keeps it in `__share_group_state`, and what tests of the
share partition leader use. State dies with the process.

It answers as the share coordinator does: a write overlays its batches on those kept
(a later state of an offset replaces the earlier one), drops what lies below the new
start offset, and is refused with FENCED_STATE_EPOCH when it carries an older state
epoch, or FENCED_LEADER_EPOCH an older leader epoch, than one already seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from herdless.coordinator.share_state.state import (
    UNINITIALIZED_START_OFFSET,
    PartitionState,
    RecordState,
    SharePartitionKey,
    ShareStateError,
    StateBatch,
)
from herdless.protocol.errors import ErrorCode

# Before any leader has read or written a partition.
_NO_LEADER_EPOCH = -1


@dataclass(slots=True)
class _Kept:
    state_epoch: int = 0
    start_offset: int = UNINITIALIZED_START_OFFSET
    leader_epoch: int = _NO_LEADER_EPOCH
    # offset -> (state, delivery count), from the start offset on.
    records: dict[int, tuple[RecordState, int]] = field(default_factory=dict)

    def batches(self) -> tuple[StateBatch, ...]:
        runs: list[StateBatch] = []
        for offset in sorted(self.records):
            state, count = self.records[offset]
            last = runs[-1] if runs else None
            if (
                last is not None
                and last.last_offset == offset - 1
                and (last.delivery_state, last.delivery_count) == (state, count)
            ):
                runs[-1] = StateBatch(last.first_offset, offset, last.delivery_state, count)
            else:
                runs.append(StateBatch(offset, offset, state, count))
        return tuple(runs)


class InMemoryPersister:
    def __init__(self) -> None:
        self._partitions: dict[SharePartitionKey, _Kept] = {}
        # Writes taken, for tests that count them.
        self.writes = 0

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        kept = self._partitions.setdefault(key, _Kept())
        if state_epoch < kept.state_epoch:
            raise ShareStateError(ErrorCode.FENCED_STATE_EPOCH)
        kept.state_epoch = state_epoch
        kept.start_offset = start_offset
        kept.records.clear()

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> PartitionState:
        kept = self._partitions.setdefault(key, _Kept())
        self._fence_leader(kept, leader_epoch)
        return PartitionState(kept.state_epoch, kept.start_offset, leader_epoch, kept.batches())

    async def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[StateBatch, ...],
    ) -> None:
        kept = self._partitions.setdefault(key, _Kept())
        if state_epoch < kept.state_epoch:
            raise ShareStateError(ErrorCode.FENCED_STATE_EPOCH)
        self._fence_leader(kept, leader_epoch)
        kept.state_epoch = state_epoch
        if start_offset != UNINITIALIZED_START_OFFSET:
            kept.start_offset = max(kept.start_offset, start_offset)
        for batch in batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                kept.records[offset] = (batch.delivery_state, batch.delivery_count)
        kept.records = {o: v for o, v in kept.records.items() if o >= kept.start_offset}
        self.writes += 1

    async def delete(self, key: SharePartitionKey) -> None:
        self._partitions.pop(key, None)

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> PartitionState:
        kept = self._partitions.setdefault(key, _Kept())
        self._fence_leader(kept, leader_epoch)
        return PartitionState(kept.state_epoch, kept.start_offset, leader_epoch)

    @staticmethod
    def _fence_leader(kept: _Kept, leader_epoch: int) -> None:
        if leader_epoch < kept.leader_epoch:
            raise ShareStateError(ErrorCode.FENCED_LEADER_EPOCH)
        kept.leader_epoch = leader_epoch

"""The port through which a share partition's leader keeps its state durable (Kafka's
Persister): a share partition is read once when its leader loads it, and written after
every change that must survive the leader (acknowledgements, archiving, a moved start).

One broker and a cluster answer it the same way, through the share coordinator that
owns the partition of `__share_group_state` the key hashes to; an in-memory persister
serves tests of the share partition alone.
"""

from __future__ import annotations

from typing import Protocol

from herdless.coordinator.share_state.state import PartitionState, SharePartitionKey, StateBatch


class Persister(Protocol):
    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        """Set a partition's start offset and state epoch, dropping any batches
        (InitializeShareGroupState); raises ShareStateError."""

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> PartitionState:
        """The partition's state; start offset UNINITIALIZED_START_OFFSET when it was never
        initialized. A leader epoch older than one already seen raises ShareStateError
        with FENCED_LEADER_EPOCH (ReadShareGroupState)."""

    async def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[StateBatch, ...],
    ) -> None:
        """Record a new start offset (-1 keeps the current one) and the batches that changed
        (WriteShareGroupState); returns once durable; raises ShareStateError."""

    async def delete(self, key: SharePartitionKey) -> None:
        """Forget the partition's state (DeleteShareGroupState)."""

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> PartitionState:
        """The state epoch and start offset without batches (ReadShareGroupStateSummary),
        for DescribeShareGroupOffsets."""

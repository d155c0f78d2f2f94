"""The in-memory Persister answers as the share coordinator does."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from herdless.broker.share.memory_persister import InMemoryPersister
from herdless.coordinator.share_state.state import (
    UNINITIALIZED_START_OFFSET,
    RecordState,
    SharePartitionKey,
    ShareStateError,
    StateBatch,
)
from herdless.protocol.errors import ErrorCode

KEY = SharePartitionKey("group", uuid.uuid4(), 0)


def test_writes_combine_and_the_start_offset_prunes() -> None:
    async def run() -> None:
        persister = InMemoryPersister()
        state = await persister.read(KEY, leader_epoch=0)
        assert state.start_offset == UNINITIALIZED_START_OFFSET and not state.initialized
        await persister.initialize(KEY, 0, 10)
        await persister.write(KEY, 0, 0, 10, (StateBatch(10, 14, RecordState.AVAILABLE, 1),))
        await persister.write(KEY, 0, 0, 12, (StateBatch(13, 13, RecordState.ARCHIVED, 1),))
        state = await persister.read(KEY, leader_epoch=0)
        assert state.start_offset == 12
        assert state.batches == (
            StateBatch(12, 12, RecordState.AVAILABLE, 1),
            StateBatch(13, 13, RecordState.ARCHIVED, 1),
            StateBatch(14, 14, RecordState.AVAILABLE, 1),
        )
        summary = await persister.read_summary(KEY, leader_epoch=0)
        assert (summary.start_offset, summary.batches) == (12, ())

    asyncio.run(run())


def test_older_epochs_are_fenced() -> None:
    async def run() -> None:
        persister = InMemoryPersister()
        await persister.initialize(KEY, 2, 0)
        await persister.read(KEY, leader_epoch=5)
        with pytest.raises(ShareStateError) as caught:
            await persister.read(KEY, leader_epoch=4)
        assert caught.value.error_code == ErrorCode.FENCED_LEADER_EPOCH
        with pytest.raises(ShareStateError) as caught:
            await persister.write(KEY, 1, 5, 0, ())
        assert caught.value.error_code == ErrorCode.FENCED_STATE_EPOCH
        await persister.delete(KEY)
        assert not (await persister.read(KEY, leader_epoch=0)).initialized

    asyncio.run(run())

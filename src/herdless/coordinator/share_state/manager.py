"""The share coordinator's rules (Kafka's ShareCoordinatorShard, less the dispatch): the
state of every share partition whose key hashes to one `__share_group_state`
partition, changed only by replaying records, and the five state operations.

Epochs, as Kafka 4.1 on keeps them:
- the state epoch is set by InitializeShareGroupState alone; a call naming an older one
  than stored is FENCED_STATE_EPOCH (the group's state was re-initialized since);
- the leader epoch is raised by ReadShareGroupState, which a partition's new leader
  sends first; any call naming an older one is FENCED_LEADER_EPOCH (a deposed leader).
  -1 names none and is never fenced.

A write is one record: a ShareUpdate with only the batches it changed, or every
`snapshot_update_records_per_snapshot` updates a whole ShareSnapshot, so that loading a
partition replays at most that many updates per share partition.

Replies: ErrorCode for initialize, write and delete; PartitionState or ErrorCode for
read and read_summary. A never initialized share partition reads as start offset
UNINITIALIZED_START_OFFSET at state epoch 0, for its leader to decide where it starts
(the Persister port's contract), and a write to it starts it at the write's start
offset; Kafka from 4.1 answers both with an error instead, leaving initialization to
the group coordinator alone.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace

from herdless.coordinator.now import Now
from herdless.coordinator.records import Record
from herdless.coordinator.result import Reply, Result
from herdless.coordinator.share_state.batches import merge_batches
from herdless.coordinator.share_state.config import ShareCoordinatorConfig
from herdless.coordinator.share_state.records import (
    ShareSnapshotValue,
    ShareUpdateValue,
    decode_key,
    decode_value,
    snapshot_record,
    tombstones,
    update_record,
)
from herdless.coordinator.share_state.state import (
    UNINITIALIZED_START_OFFSET,
    PartitionState,
    SharePartitionKey,
    StateBatch,
)
from herdless.protocol.errors import ErrorCode

NO_EPOCH = -1
# The state epoch of a share partition nobody initialized (Kafka's DEFAULT_STATE_EPOCH).
DEFAULT_STATE_EPOCH = 0


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """One share partition's state as replayed (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    create_timestamp: int
    write_timestamp: int
    # ShareUpdate records since the last ShareSnapshot.
    updates: int = 0

    def partition_state(self, with_batches: bool = True) -> PartitionState:
        return PartitionState(
            self.state_epoch,
            self.start_offset,
            self.leader_epoch,
            self.batches if with_batches else (),
        )


UNINITIALIZED = PartitionState(DEFAULT_STATE_EPOCH, UNINITIALIZED_START_OFFSET, NO_EPOCH)


class ShareStateManager:
    def __init__(self, config: ShareCoordinatorConfig) -> None:
        self.config = config
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}

    # -- replay ----------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        record_type, share_key = decode_key(key)
        if value is None:
            self.states.pop(share_key, None)
            return
        decoded = decode_value(record_type, value)
        known = self.states.get(share_key)
        if isinstance(decoded, ShareSnapshotValue):
            self.states[share_key] = ShareGroupOffset(
                decoded.snapshot_epoch,
                decoded.state_epoch,
                max(known.leader_epoch if known else NO_EPOCH, decoded.leader_epoch),
                decoded.start_offset,
                decoded.state_batches,
                decoded.create_timestamp,
                decoded.write_timestamp,
            )
            return
        assert isinstance(decoded, ShareUpdateValue)
        if known is None:
            # An update whose snapshot compaction or deletion took: all it knows.
            known = ShareGroupOffset(
                decoded.snapshot_epoch,
                DEFAULT_STATE_EPOCH,
                NO_EPOCH,
                UNINITIALIZED_START_OFFSET,
                batches=(),
                create_timestamp=-1,
                write_timestamp=-1,
                updates=-1,
            )
        start = known.start_offset if decoded.start_offset == NO_EPOCH else decoded.start_offset
        self.states[share_key] = replace(
            known,
            leader_epoch=max(known.leader_epoch, decoded.leader_epoch),
            start_offset=start,
            batches=merge_batches(known.batches, decoded.state_batches, start),
            updates=known.updates + 1,
        )

    # -- operations --------------------------------------------------------------------

    def initialize(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        start_offset: int,
        token: Hashable,
        now: Now,
    ) -> Result:
        known = self.states.get(key)
        if known is not None and known.state_epoch > state_epoch:
            return _answer(token, ErrorCode.FENCED_STATE_EPOCH)
        value = ShareSnapshotValue(
            snapshot_epoch=known.snapshot_epoch + 1 if known else 0,
            state_epoch=state_epoch,
            leader_epoch=known.leader_epoch if known else NO_EPOCH,
            start_offset=start_offset,
            create_timestamp=now.wall_ms,
            write_timestamp=now.wall_ms,
            state_batches=(),
        )
        return self._applied([snapshot_record(key, value)], Reply(token, ErrorCode.NONE))

    def read(self, key: SharePartitionKey, leader_epoch: int, token: Hashable, now: Now) -> Result:
        """The state, and a record of `leader_epoch` when it is newer than any seen: a
        leader that read its state fences every leader before it."""
        known = self.states.get(key)
        if _fenced_leader(known, leader_epoch):
            return _answer(token, ErrorCode.FENCED_LEADER_EPOCH)
        state = UNINITIALIZED if known is None else known.partition_state()
        if leader_epoch == NO_EPOCH or leader_epoch == state.leader_epoch:
            return _answer(token, state)
        if known is None:
            record = _first_snapshot(
                key, DEFAULT_STATE_EPOCH, leader_epoch, UNINITIALIZED_START_OFFSET, (), now
            )
        else:
            record = self._state_record(key, known, leader_epoch, NO_EPOCH, (), now)
        return self._applied([record], Reply(token, replace(state, leader_epoch=leader_epoch)))

    def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[StateBatch, ...],
        token: Hashable,
        now: Now,
    ) -> Result:
        known = self.states.get(key)
        if _fenced_leader(known, leader_epoch):
            return _answer(token, ErrorCode.FENCED_LEADER_EPOCH)
        if known is not None and state_epoch != NO_EPOCH and known.state_epoch > state_epoch:
            return _answer(token, ErrorCode.FENCED_STATE_EPOCH)
        if known is None:
            record = _first_snapshot(
                key,
                DEFAULT_STATE_EPOCH if state_epoch == NO_EPOCH else state_epoch,
                leader_epoch,
                start_offset,
                batches,
                now,
            )
        else:
            record = self._state_record(key, known, known.leader_epoch, start_offset, batches, now)
        return self._applied([record], Reply(token, ErrorCode.NONE))

    def delete(self, key: SharePartitionKey, token: Hashable) -> Result:
        if key not in self.states:
            return _answer(token, ErrorCode.NONE)
        return self._applied(tombstones(key), Reply(token, ErrorCode.NONE))

    def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> PartitionState | ErrorCode:
        known = self.states.get(key)
        if _fenced_leader(known, leader_epoch):
            return ErrorCode.FENCED_LEADER_EPOCH
        return UNINITIALIZED if known is None else known.partition_state(with_batches=False)

    # -- records -------------------------------------------------------------------------

    def _applied(self, records: list[Record], reply: Reply) -> Result:
        """The Result of an operation that wrote `records`, applied to the state here
        through replay: the runtime hands a leader's own records to nobody, and loading
        them later must give the same state, which one path guarantees."""
        for record in records:
            self.replay(record.key, record.value)
        return Result(records, [reply])

    def _state_record(
        self,
        key: SharePartitionKey,
        known: ShareGroupOffset,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[StateBatch, ...],
        now: Now,
    ) -> Record:
        """A change to a known share partition: an update, or a whole snapshot once
        enough updates have piled up since the last."""
        if known.updates < self.config.snapshot_update_records_per_snapshot:
            value = ShareUpdateValue(
                known.snapshot_epoch,
                leader_epoch,
                start_offset,
                merge_batches((), batches, start_offset),
            )
            return update_record(key, value)
        start = known.start_offset if start_offset == NO_EPOCH else start_offset
        snapshot = ShareSnapshotValue(
            snapshot_epoch=known.snapshot_epoch + 1,
            state_epoch=known.state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start,
            create_timestamp=now.wall_ms,
            write_timestamp=now.wall_ms,
            state_batches=merge_batches(known.batches, batches, start),
        )
        return snapshot_record(key, snapshot)


def _first_snapshot(
    key: SharePartitionKey,
    state_epoch: int,
    leader_epoch: int,
    start_offset: int,
    batches: tuple[StateBatch, ...],
    now: Now,
) -> Record:
    value = ShareSnapshotValue(
        snapshot_epoch=0,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=start_offset,
        create_timestamp=now.wall_ms,
        write_timestamp=now.wall_ms,
        state_batches=merge_batches((), batches, start_offset),
    )
    return snapshot_record(key, value)


def _fenced_leader(known: ShareGroupOffset | None, leader_epoch: int) -> bool:
    return known is not None and leader_epoch != NO_EPOCH and known.leader_epoch > leader_epoch


def _answer(token: Hashable, response: object) -> Result:
    return Result(replies=[Reply(token, response)])

"""A shard's classic groups as its log makes them: the GroupMetadata record, written and replayed.

A classic group is changed in place (it carries soft state no record holds: parked
requests, timers), and the record written is its projection, as in Kafka
(replayRecords=false for classic groups); replay builds the group from that record.
A tombstone ends the group, live or replayed, through the same `apply_tombstone`.
"""

from __future__ import annotations

from herdless.coordinator.classic_group import ClassicGroup
from herdless.coordinator.group_store import GroupStore
from herdless.coordinator.records import (
    GroupMetadataKey,
    Record,
    decode_group_metadata_value,
    group_metadata_record,
)
from herdless.coordinator.result import Result
from herdless.coordinator.state import GroupState


class ClassicGroupLog:
    def __init__(self, store: GroupStore, history_size: int) -> None:
        self._store = store
        # Rebalances each group remembers for operators (rebalance.history.size).
        self._history_size = history_size

    def new_group(self, group_id: str, wall_ms: int | None) -> ClassicGroup:
        return ClassicGroup(group_id, wall_ms, self._history_size)

    def replay(self, key: GroupMetadataKey, value: bytes | None) -> None:
        if value is None:
            self.apply_tombstone(key.group)
            return
        self._store.put_classic(
            ClassicGroup.from_metadata(
                key.group, decode_group_metadata_value(value), self._history_size
            )
        )

    def write(self, out: Result, record: Record) -> None:
        out.records.append(record)

    def write_group(self, out: Result, group: ClassicGroup) -> None:
        """The group's metadata as it is now."""
        self.write(out, group_record(group))

    def write_tombstone(self, out: Result, group_id: str) -> None:
        out.records.append(group_metadata_record(GroupMetadataKey(group_id), None))
        self.apply_tombstone(group_id)

    def apply_tombstone(self, group_id: str) -> None:
        group = self._store.remove_classic(group_id)
        if group is not None:
            group.transition_to(GroupState.DEAD, group.current_state_timestamp or 0)


def group_record(group: ClassicGroup) -> Record:
    return group_metadata_record(GroupMetadataKey(group.group_id), group.metadata_value())

"""The share coordinator's settings, at Kafka's broker defaults (ShareCoordinatorConfig)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    # share.coordinator.state.topic.num.partitions: where keys hash to.
    num_partitions: int = 50
    # share.coordinator.snapshot.update.records.per.snapshot: ShareUpdate records written
    # for one share partition before the next write is a whole ShareSnapshot, which
    # bounds what loading replays (and what compaction must keep) per share partition.
    snapshot_update_records_per_snapshot: int = 500

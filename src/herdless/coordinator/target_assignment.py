"""A consumer group's target assignment: when the next one is due, what its assignor reads,
and which member each of its results goes to.

KIP-1263 lets the assignor run off the coordinator (on a worker thread of the broker's)
while the group moves on: members join, leave, come back under a new id. So a run reads
a copy of the group taken when it starts (`AssignorRun`), and its result is placed on the
group as it is when the run ends (`placed_targets`). consumer_group_manager.py decides when a run
starts and writes what it gives.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from herdless.coordinator.assignors import ASSIGNORS, Assignor, MemberSpec, PartitionRacks
from herdless.coordinator.consumer_group import ConsumerGroup
from herdless.coordinator.topic_metadata import NO_PARTITIONS, Partitions


@dataclass(frozen=True, slots=True)
class AssignorRun:
    """One run of a server assignor over a copy of the group at `group_epoch`: nothing it
    reads belongs to the group, so it may run on another thread."""

    group_epoch: int
    assignor: Assignor
    members: dict[str, MemberSpec]
    partition_counts: dict[uuid.UUID, int]
    partition_racks: PartitionRacks

    def __call__(self) -> dict[str, Partitions]:
        return self.assignor(self.members, self.partition_counts, self.partition_racks)


def assignor_run(group: ConsumerGroup, assignors: Sequence[str]) -> AssignorRun:
    """The run the group's next target takes: with the assignor most of its members name
    if the broker offers it, else the broker's first; over every member as it is now."""
    preferred = group.preferred_assignor()
    name = preferred if preferred in assignors else assignors[0]
    metadata = group.subscription_metadata
    ids = {n: t.topic_id for n, t in metadata.items()}
    members = {
        m.member_id: MemberSpec(
            m.instance_id,
            frozenset(ids[n] for n in group.member_topic_names(m) if n in ids),
            group.target_of(m.member_id),
            m.rack_id,
        )
        for m in group.members.values()
    }
    return AssignorRun(
        group.group_epoch,
        ASSIGNORS[name],
        members,
        {t.topic_id: t.num_partitions for t in metadata.values()},
        {t.topic_id: t.partition_racks for t in metadata.values()},
    )


def next_target_due(last_finished_ms: int | None, interval_ms: int) -> int | None:
    """When the next target may start, on the monotonic clock: an assignment interval
    after the last one finished (None: none since this shard loaded; at once)."""
    return None if last_finished_ms is None else last_finished_ms + interval_ms


def placed_targets(
    group: ConsumerGroup, run: AssignorRun, targets: dict[str, Partitions]
) -> Iterator[tuple[str, Partitions]]:
    """Each target of a finished run with the member it goes to now: a member that left
    since has none; a static member that came back under a new id has its instance's;
    one that joined since is not in the run and keeps what it has."""
    for member_id in sorted(run.members):
        if member_id in group.members:
            yield member_id, targets.get(member_id, NO_PARTITIONS)
            continue
        instance_id = run.members[member_id].instance_id
        static = None if instance_id is None else group.static_member(instance_id)
        if static is not None:
            yield static.member_id, targets.get(member_id, NO_PARTITIONS)

"""Replay of a partition into its shard, one bounded read at a time (Kafka's
CoordinatorLoader, cut into steps so that the broker serves other partitions between
them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from herdless.coordinator.runtime.contract import CoordinatorShard, ReplaysRuns
from herdless.coordinator.runtime.writer import PartitionWriter, TopicPartition

ReplayRun = Callable[[Sequence[bytes], Sequence[bytes | None]], None]


def run_replayer(shard: CoordinatorShard) -> ReplayRun | None:
    """The shard's way to apply a run of records at once, if it has one."""
    return shard.replay_records if isinstance(shard, ReplaysRuns) else None


def replay_step(
    writer: PartitionWriter,
    tp: TopicPartition,
    shard: CoordinatorShard,
    replay_run: ReplayRun | None,
    start_offset: int,
    bound: int,
) -> tuple[int, int]:
    """Replay one read of `tp` from `start_offset` below `bound` into `shard`.

    Returns where the next read starts and how many records were replayed."""
    chunk = writer.read(tp, start_offset, bound)
    if not start_offset < chunk.next_offset <= bound:
        # A writer that does not move on would have the broker replay for ever.
        raise ValueError(
            f"{tp}: a read from {start_offset} below {bound} ended at {chunk.next_offset}"
        )
    replayed = 0
    for keys, values in chunk.runs:
        if len(keys) == 1:
            shard.replay(keys[0], values[0])
        elif replay_run is not None:
            replay_run(keys, values)
        else:
            for key, value in zip(keys, values, strict=True):
                shard.replay(key, value)
        replayed += len(keys)
    return chunk.next_offset, replayed

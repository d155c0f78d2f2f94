"""An in-memory PartitionWriter: the runtime's log with no broker, no files, no loop.

Every replica of a partition shares one MemoryLog, as if followers fetched at once;
what a follower could not have yet is what lies above the high watermark, and a new
leader that never had it is modelled by `truncate`. The test moves the high
watermark itself (`MemoryLog.high_watermark`, then the runtime's
high_watermark_moved), unless `auto_commit` makes every append committed at once, as
on a single broker. Appends fail on demand (`refuse`), and leadership can be in doubt
(`in_doubt`) without having moved.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from herdless.coordinator.records import Record
from herdless.coordinator.runtime import ReplayChunk, TopicPartition, WriteError


@dataclass
class MemoryLog:
    records: list[Record] = field(default_factory=list)
    # The log end after each append: where a batch ends, and the high watermark may stop.
    batch_ends: list[int] = field(default_factory=list)
    high_watermark: int = 0
    leader: int | None = None
    in_doubt: bool = False
    auto_commit: bool = False
    # Why each of the next appends fails, in order.
    refusals: deque[str] = field(default_factory=deque)

    @property
    def log_end(self) -> int:
        return len(self.records)

    def refuse(self, reason: str) -> None:
        self.refusals.append(reason)

    def truncate(self, offset: int) -> None:
        """Drop the records from `offset` on, as a new leader without them would."""
        del self.records[offset:]
        del self.batch_ends[bisect.bisect_right(self.batch_ends, offset) :]
        if self.batch_ends[-1:] != [offset] and offset:
            # The cut fell inside a batch: what is left of it is a batch of its own.
            self.batch_ends.append(offset)
        self.high_watermark = min(self.high_watermark, offset)

    def batch_end_after(self, offset: int) -> int:
        """The end of the batch holding `offset` (followers fetch whole batches)."""
        return self.batch_ends[bisect.bisect_right(self.batch_ends, offset)]

    def batch_start(self, end: int) -> int:
        index = self.batch_ends.index(end)
        return self.batch_ends[index - 1] if index else 0


class MemoryWriter:
    """Broker `broker_id`'s view of the shared logs."""

    def __init__(
        self, logs: dict[TopicPartition, MemoryLog], broker_id: int = 0, read_records: int = 3
    ) -> None:
        self.logs = logs
        self.broker_id = broker_id
        # How many records one read for replay returns at most: small, so that loads
        # take several steps.
        self.read_records = read_records

    def log(self, tp: TopicPartition) -> MemoryLog:
        return self.logs.setdefault(tp, MemoryLog())

    def append(self, tp: TopicPartition, records: Sequence[Record]) -> int:
        log = self.log(tp)
        if log.leader != self.broker_id:
            raise WriteError(f"broker {self.broker_id} does not lead {tp}")
        if log.refusals:
            raise WriteError(log.refusals.popleft())
        log.records.extend(records)
        log.batch_ends.append(log.log_end)
        if log.auto_commit:
            log.high_watermark = log.log_end
        return log.log_end

    def read(self, tp: TopicPartition, start_offset: int, max_offset: int) -> ReplayChunk:
        log = self.log(tp)
        stop = min(max_offset, start_offset + self.read_records, log.log_end)
        runs: list[tuple[list[bytes], list[bytes | None]]] = []
        offset = start_offset
        while offset < stop:
            end = log.batch_end_after(offset)
            if offset == log.batch_start(end) and end <= stop:
                # A whole batch: one run, as the broker cuts them from a batch.
                batch = log.records[offset:end]
                runs.append(([r.key for r in batch], [r.value for r in batch]))
                offset = end
            else:
                record = log.records[offset]
                runs.append(([record.key], [record.value]))
                offset += 1
        return ReplayChunk(runs, stop)

    def log_start_offset(self, tp: TopicPartition) -> int:
        return 0

    def log_end_offset(self, tp: TopicPartition) -> int:
        return self.log(tp).log_end

    def high_watermark(self, tp: TopicPartition) -> int:
        return self.log(tp).high_watermark

    def is_leader(self, tp: TopicPartition) -> bool:
        log = self.log(tp)
        return log.leader == self.broker_id and not log.in_doubt

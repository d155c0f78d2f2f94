"""spark.readStream.format("herdless"): micro-batches planned by a consumer-group member.

Where things run (SPARK.md): initialOffset, latestOffset, partitions and
commit run in one long-lived planning process per query run, where the
GroupMember lives; read() runs on executors, on a pickled copy of this reader
made before any of those calls, so the member is created lazily and never
pickled.

When offsets reach the group: Spark calls commit(end) one batch late, so it
cannot be the only signal. latestOffset(start) is called at every trigger with
start = the end of the last completed batch; committing there covers an idle
stream (the next trigger commits) and Trigger.AvailableNow (Spark asks once
more after the final batch to learn that nothing is left).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from herdless.spark.client import watermarks
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.member import GroupMember, leave_group_on_sigterm
from herdless.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    StreamOffset,
    TopicPartition,
    batch_ranges,
    limit_ranges,
)
from herdless.spark.options import ReadOptions

log = logging.getLogger(__name__)

# Spark asks for new offsets every few milliseconds while a stream is idle;
# each ask costs the broker a ListOffsets per partition. Pausing briefly when
# nothing was new keeps an idle query cheap and adds at most this to latency.
IDLE_PAUSE_S = 0.1


class RangePartition(InputPartition):
    def __init__(self, offsets: OffsetRange) -> None:
        super().__init__(offsets)
        self.offsets = offsets


class HerdlessStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._member: GroupMember | None = None
        self._target: dict[TopicPartition, int] | None = None

    def __getstate__(self) -> dict:
        # Executors get only the options: the member is this process's alone.
        return {"options": self.options, "_member": None, "_target": None}

    def _group(self) -> GroupMember:
        if self._member is None:
            self._member = GroupMember(self.options)
            leave_group_on_sigterm(self._member)
        return self._member

    # -- planning (the query's planning process) --------------------------

    def initialOffset(self) -> dict:
        # Nothing owned yet: the first batch records where each assigned
        # partition starts, in its own end offset.
        return StreamOffset().to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        member = self._group()
        owned, _ = member.assignment()
        from herdless.spark.client import topic_partitions

        counts = topic_partitions(member.lookup, self.options.connection, self.options)
        everything = [(t, p) for t, n in counts.items() for p in range(n)] + list(owned)
        marks = watermarks(member.lookup, self.options.connection, set(everything))
        self._target = {tp: high for tp, (_, high) in marks.items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        member = self._group()
        previous = StreamOffset.from_json(start)
        member.completed(previous.positions, batch_done=True)
        owned, fresh = member.assignment()
        # A partition we own but never planned (a new planning process) starts afresh.
        fresh |= {tp for tp in owned if tp not in previous.positions}

        marks = watermarks(member.lookup, self.options.connection, owned)
        begin = {tp: previous.positions.get(tp, 0) for tp in owned}
        begin.update(self._fresh_starts(member, previous, fresh, marks))
        begin = {tp: self._check_retention(tp, o, marks[tp][0]) for tp, o in begin.items()}

        ends = {tp: max(begin[tp], marks[tp][1]) for tp in owned}
        if self._target is not None:
            ends = {tp: max(begin[tp], min(ends[tp], self._target.get(tp, 0))) for tp in owned}
        if isinstance(limit, ReadMaxRows):
            ends = limit_ranges(begin, ends, limit.max_rows)

        end = StreamOffset(
            positions=ends,
            starts={tp: o for tp, o in begin.items() if o != previous.positions.get(tp)},
        )
        if end.positions == previous.positions and not end.starts:
            member.planned(fresh, in_flight=False)
            if self._target is None:
                # Trigger.AvailableNow asks once more only to learn that it is done.
                time.sleep(IDLE_PAUSE_S)
            return start  # the very same JSON: Spark plans no batch
        member.planned(fresh, in_flight=True)
        return end.to_json()

    def _fresh_starts(
        self,
        member: GroupMember,
        previous: StreamOffset,
        fresh: set[TopicPartition],
        marks: dict[TopicPartition, tuple[int, int]],
    ) -> dict[TopicPartition, int]:
        """Where newly assigned partitions begin.

        The group's committed offset, unless this query's own checkpoint is
        further on (this query read past it and stopped before committing: the
        checkpoint is authoritative). With neither, startingOffsets decides.
        """
        committed = member.committed(fresh)
        starts = {}
        for tp in fresh:
            known = [o for o in (previous.positions.get(tp), committed.get(tp)) if o is not None]
            starts[tp] = max(known) if known else self._starting(tp, marks[tp])
        return starts

    def _starting(self, tp: TopicPartition, mark: tuple[int, int]) -> int:
        low, high = mark
        starting = self.options.starting
        if starting == "committed":
            raise HerdlessSparkError(
                f"startingOffsets is committed, but group {self.options.group_id!r} has no "
                f"committed offset for {tp[0]}-{tp[1]}; use earliest, latest or JSON offsets"
            )
        if isinstance(starting, dict):
            offset = starting.get(tp, EARLIEST)
            if offset == EARLIEST:
                return low
            return high if offset == LATEST else offset
        return low if starting == "earliest" else high

    def _check_retention(self, tp: TopicPartition, offset: int, low: int) -> int:
        if offset >= low:
            return offset
        if self.options.fail_on_data_loss:
            raise HerdlessSparkError(
                f"{tp[0]}-{tp[1]}: records from offset {offset} to {low} were deleted "
                "(retention) before this query read them; set failOnDataLoss=false to "
                "skip ahead instead"
            )
        log.warning("%s-%s: skipping deleted offsets %s..%s", tp[0], tp[1], offset, low)
        return low

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        ranges = batch_ranges(StreamOffset.from_json(start), StreamOffset.from_json(end))
        return [RangePartition(r) for r in ranges]

    def commit(self, end: dict) -> None:
        if self._member is not None:
            self._member.completed(StreamOffset.from_json(end).positions, batch_done=False)

    def stop(self) -> None:
        if self._member is not None:
            self._member.close()
            self._member = None

    # -- executors ---------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        # Imported here: only executors read, and the reading path (numpy, the Kafka
        # protocol classes) would add a fifth of a second to every planning process.
        from herdless.spark.fetch import read_range

        yield from read_range(
            self.options.connection,
            partition.offsets,
            self.options.poll_timeout_s,
            self.options.include_headers,
        )

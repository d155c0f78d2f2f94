"""spark.readStream.format("herdless"): micro-batches planned by a consumer-group member.

Where things run (SPARK.md): initialOffset, latestOffset, partitions and
commit run in one long-lived planning process per query run, where the
GroupMember lives; read() runs on executors, on a pickled copy of this reader
made before any of those calls, so the member is created lazily and never
pickled. A query that joins no group (assign, or no kafka.group.id) plans the
same way with a Standalone in the member's place.

When offsets reach the group: Spark calls commit(end) one batch late, so it
cannot be the only signal. latestOffset(start) is called at every trigger with
start = the end of the last completed batch; committing there covers an idle
stream (the next trigger commits) and Trigger.AvailableNow (Spark asks once
more after the final batch to learn that nothing is left).

What the query's progress shows (StreamingQueryProgress.sources): startOffset
and endOffset are this source's offsets (offsets.py); latestOffset is what
reportLatestOffset returns: each partition's log end, how far the batch's end
is behind them (the avg/max/minOffsetsBehindLatest of Spark's Kafka source,
which Spark reports as metrics; PySpark gives Python sources no metrics), and
the client id that names this query run's member in `herdless groups describe`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

import pyarrow as pa
from confluent_kafka import Consumer
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from herdless.spark.client import readable_partitions, watermarks
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.member import GroupMember, leave_group_on_sigterm
from herdless.spark.offsets import (
    OffsetRange,
    StreamOffset,
    TopicPartition,
    batch_ranges,
    limit_ranges,
    nest,
    split_ranges,
)
from herdless.spark.options import Bound, ReadOptions
from herdless.spark.positions import resolve
from herdless.spark.standalone import Standalone

log = logging.getLogger(__name__)

# Spark asks for new offsets every few milliseconds while a stream is idle;
# each ask costs the broker a ListOffsets per partition. Pausing briefly when
# nothing was new keeps an idle query cheap and adds at most this to latency.
IDLE_PAUSE_S = 0.1


class Members(Protocol):
    """Who decides which partitions this query reads: a GroupMember or a Standalone."""

    client_id: str
    lookup: Consumer

    def assignment(self) -> tuple[frozenset[TopicPartition], set[TopicPartition]]: ...

    def planned(self, partitions: set[TopicPartition], in_flight: bool) -> None: ...

    def completed(self, positions: Mapping[TopicPartition, int], batch_done: bool) -> None: ...

    def committed(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]: ...

    def close(self) -> None: ...


class RangePartition(InputPartition):
    def __init__(self, offsets: OffsetRange) -> None:
        super().__init__(offsets)
        self.offsets = offsets


class HerdlessStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._members: Members | None = None
        self._target: dict[TopicPartition, int] | None = None
        self._last_batch_at: float | None = None  # monotonic time a batch was last planned
        self._report: dict[str, Any] | None = None

    def __getstate__(self) -> dict:
        # Executors get no member: it is this planning process's alone.
        return {**self.__dict__, "_members": None}

    def _planner(self) -> Members:
        if self._members is None:
            if self.options.joins_group:
                member = GroupMember(self.options)
                leave_group_on_sigterm(member)
                self._members = member
            else:
                self._members = Standalone(self.options)
        return self._members

    # -- planning (the query's planning process) --------------------------

    def initialOffset(self) -> dict:
        # Nothing owned yet: the first batch records where each assigned
        # partition starts, in its own end offset.
        return StreamOffset().to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        # Spark hands this back to latestOffset unless the trigger wants everything
        # (ReadAllAvailable); the limits themselves come from the options.
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        members = self._planner()
        owned, _ = members.assignment()
        everything = set(
            readable_partitions(members.lookup, self.options.connection, self.options.subscription)
        )
        marks = watermarks(members.lookup, self.options.connection, everything | owned)
        self._target = {tp: high for tp, (_, high) in marks.items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        members = self._planner()
        previous = StreamOffset.from_json(start)
        members.completed(previous.positions, batch_done=True)
        owned, fresh = members.assignment()
        # A partition we own but never planned (a new planning process) starts afresh.
        fresh |= {tp for tp in owned if tp not in previous.positions}

        marks = watermarks(members.lookup, self.options.connection, owned)
        begin = {tp: previous.positions.get(tp, 0) for tp in owned}
        begin.update(self._fresh_starts(members, previous, fresh, marks))
        begin = {tp: self._check_retention(tp, o, marks[tp][0]) for tp, o in begin.items()}

        latest = {tp: max(begin[tp], marks[tp][1]) for tp in owned}
        ends = latest
        if self._target is not None:
            ends = {tp: max(begin[tp], min(ends[tp], self._target.get(tp, 0))) for tp in owned}
        if not isinstance(limit, ReadAllAvailable):
            if self._waits_for_more(begin, ends):
                self._report_lag(latest, previous.positions, members.client_id)
                time.sleep(IDLE_PAUSE_S)
                return start  # fresh partitions stay fresh until a batch is planned
            most = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            if most is not None:
                ends = limit_ranges(begin, ends, most)

        end = StreamOffset(
            positions=ends,
            starts={tp: o for tp, o in begin.items() if o != previous.positions.get(tp)},
        )
        if end.positions == previous.positions and not end.starts:
            self._report_lag(latest, previous.positions, members.client_id)
            members.planned(fresh, in_flight=False)
            if self._target is None:
                # Trigger.AvailableNow asks once more only to learn that it is done.
                time.sleep(IDLE_PAUSE_S)
            return start  # the very same JSON: Spark plans no batch
        self._report_lag(latest, end.positions, members.client_id)
        members.planned(fresh, in_flight=True)
        self._last_batch_at = time.monotonic()
        return end.to_json()

    def _waits_for_more(self, begin: Mapping[TopicPartition, int], ends: Mapping) -> bool:
        """minOffsetsPerTrigger: hold the batch back until enough records or maxTriggerDelay.

        As Spark's Kafka source: the first trigger of a run never waits, and a
        batch is due once maxTriggerDelay has passed since the last one.
        Trigger.AvailableNow never waits: it must come to an end.
        """
        minimum = self.options.min_offsets_per_trigger
        if minimum is None or self._target is not None or self._last_batch_at is None:
            return False
        if time.monotonic() - self._last_batch_at >= self.options.max_trigger_delay_s:
            return False
        return sum(ends[tp] - begin[tp] for tp in ends) < minimum

    def _report_lag(
        self,
        latest: Mapping[TopicPartition, int],
        consumed: Mapping[TopicPartition, int],
        client_id: str,
    ) -> None:
        behind = [latest[tp] - consumed.get(tp, latest[tp]) for tp in latest]
        self._report = {"offsets": nest(latest), "clientId": client_id}
        if behind:
            self._report.update(
                avgOffsetsBehindLatest=sum(behind) / len(behind),
                maxOffsetsBehindLatest=max(behind),
                minOffsetsBehindLatest=min(behind),
            )

    def reportLatestOffset(self) -> dict | None:
        return self._report

    def _fresh_starts(
        self,
        members: Members,
        previous: StreamOffset,
        fresh: set[TopicPartition],
        marks: dict[TopicPartition, tuple[int, int]],
    ) -> dict[TopicPartition, int]:
        """Where newly assigned partitions begin.

        The group's committed offset, unless this query's own checkpoint is
        further on (this query read past it and stopped before committing: the
        checkpoint is authoritative). With neither, the starting options decide.
        """
        committed = members.committed(fresh)
        starts = {}
        undecided = set()
        for tp in fresh:
            known = [o for o in (previous.positions.get(tp), committed.get(tp)) if o is not None]
            if known:
                starts[tp] = max(known)
            else:
                undecided.add(tp)
        starts.update(
            resolve(
                self._starting(previous),
                undecided,
                marks,
                members.lookup,
                self.options.connection,
                committed=committed,
                group_id=self.options.group_id,
            )
        )
        return starts

    def _starting(self, previous: StreamOffset) -> Bound:
        """The starting options apply when a query starts. As in Spark, partitions a
        query without a group finds later (new partitions, new topics matching
        subscribePattern) start at the earliest offset."""
        if previous.positions and not self.options.joins_group:
            return Bound("earliest")
        return self.options.starting

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
        pieces = split_ranges(
            ranges, self.options.min_partitions, self.options.max_records_per_partition
        )
        return [RangePartition(r) for r in pieces]

    def commit(self, end: dict) -> None:
        if self._members is not None:
            self._members.completed(StreamOffset.from_json(end).positions, batch_done=False)

    def stop(self) -> None:
        if self._members is not None:
            self._members.close()
            self._members = None

    # -- executors ---------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)


def read_partition(options: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """An executor's read of one planned range (streams and batch reads alike)."""
    if not isinstance(partition, RangePartition):
        # A batch read that planned no range (nothing to read): PySpark still
        # runs one task, with a partition of its own.
        return iter(())
    # Imported here: only executors read, and the reading path (numpy, the Kafka
    # protocol classes) would add a fifth of a second to every planning process.
    from herdless.spark.fetch import read_range

    return read_range(
        options.connection, partition.offsets, options.poll_timeout_s, options.include_headers
    )

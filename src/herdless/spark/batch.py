"""spark.read.format("herdless"): one bounded read between startingOffsets and endingOffsets.

The offsets are resolved when Spark plans the read (on the driver side), so
every executor reads a fixed range; no group is joined.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from herdless.spark.client import committed_offsets, quiet_consumer, topic_partitions, watermarks
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.offsets import EARLIEST, LATEST, OffsetRange, TopicPartition
from herdless.spark.options import ReadOptions
from herdless.spark.stream import RangePartition


class HerdlessBatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        group = options.group_id or "herdless-spark-metadata"
        consumer = quiet_consumer(options.connection, group)
        try:
            counts = topic_partitions(consumer, options.connection, options)
            every = [(t, p) for t, n in sorted(counts.items()) for p in range(n)]
            marks = watermarks(consumer, options.connection, every)
            committed = (
                committed_offsets(consumer, options.connection, every)
                if options.starting == "committed"
                else {}
            )
        finally:
            consumer.close()
        ranges = []
        for tp in every:
            low, high = marks[tp]
            begin = self._starting(tp, low, high, committed)
            until = self._ending(tp, high)
            if begin < low and options.fail_on_data_loss:
                raise HerdlessSparkError(
                    f"startingOffsets: {tp[0]}-{tp[1]} starts at {low} now; offsets from "
                    f"{begin} were deleted (set failOnDataLoss=false to start at {low})"
                )
            begin = max(begin, low)
            if until > high:
                raise HerdlessSparkError(
                    f"endingOffsets: {tp[0]}-{tp[1]} ends at {high}, not {until}"
                )
            if until > begin:
                ranges.append(RangePartition(OffsetRange(tp[0], tp[1], begin, until)))
        return ranges

    def _starting(
        self, tp: TopicPartition, low: int, high: int, committed: dict[TopicPartition, int]
    ) -> int:
        starting = self.options.starting
        if starting == "committed":
            if tp not in committed:
                raise HerdlessSparkError(
                    f"startingOffsets is committed, but group {self.options.group_id!r} has no "
                    f"committed offset for {tp[0]}-{tp[1]}"
                )
            return committed[tp]
        if isinstance(starting, dict):
            offset = starting.get(tp, EARLIEST)
            return low if offset == EARLIEST else high if offset == LATEST else offset
        return low if starting == "earliest" else high

    def _ending(self, tp: TopicPartition, high: int) -> int:
        ending = self.options.ending
        if isinstance(ending, dict):
            offset = ending.get(tp, LATEST)
            return high if offset == LATEST else offset
        return high

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

"""spark.read.format("herdless"): one bounded read between the starting and ending options.

The offsets are resolved when Spark plans the read (on the driver side), so
every executor reads a fixed range; no group is joined.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from herdless.spark.client import (
    committed_offsets,
    quiet_consumer,
    readable_partitions,
    watermarks,
)
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.offsets import OffsetRange, split_ranges
from herdless.spark.options import ReadOptions
from herdless.spark.positions import resolve
from herdless.spark.stream import RangePartition, read_partition


class HerdlessBatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        consumer = quiet_consumer(options.connection, options.lookup_group)
        try:
            every = readable_partitions(consumer, options.connection, options.subscription)
            marks = watermarks(consumer, options.connection, every)
            committed = (
                committed_offsets(consumer, options.connection, every)
                if options.starting.named == "committed"
                else None
            )
            begins = resolve(
                options.starting,
                every,
                marks,
                consumer,
                options.connection,
                committed=committed,
                group_id=options.group_id,
            )
            ends = resolve(options.ending, every, marks, consumer, options.connection)
        finally:
            consumer.close()
        ranges = []
        for tp in every:
            low, high = marks[tp]
            begin, until = begins[tp], ends[tp]
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
                ranges.append(OffsetRange(tp[0], tp[1], begin, until))
        pieces = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
        return [RangePartition(r) for r in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)

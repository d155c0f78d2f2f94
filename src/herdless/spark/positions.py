"""Where reads start and end: the options' bounds turned into offsets, partition by partition."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import Consumer

from herdless.spark.client import offsets_for_times
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.offsets import TopicPartition
from herdless.spark.options import Bound, ClientOptions


def resolve(
    bound: Bound,
    partitions: Iterable[TopicPartition],
    marks: Mapping[TopicPartition, tuple[int, int]],
    consumer: Consumer,
    connection: ClientOptions,
    *,
    committed: Mapping[TopicPartition, int] | None = None,
    group_id: str | None = None,
) -> dict[TopicPartition, int]:
    """The offset `bound` names in each partition; `marks` are (log start, log end).

    Timestamps are looked up on the broker in one round; `committed` holds the
    group's offsets when the bound is startingOffsets=committed.
    """
    partitions = list(partitions)
    stamps = {tp: s for tp in partitions if (s := bound.timestamp_of(tp)) is not None}
    found = offsets_for_times(consumer, connection, stamps)
    result = {}
    for tp in partitions:
        low, high = marks[tp]
        if tp in stamps:
            offset = found.get(tp)
            if offset is None and not bound.latest_when_no_match:
                raise HerdlessSparkError(
                    f"no record of {tp[0]}-{tp[1]} has a timestamp at or after {stamps[tp]} "
                    "(startingTimestamp or startingOffsetsByTimestamp); set "
                    "startingOffsetsByTimestampStrategy=latest to start such partitions at "
                    "the end of the log"
                )
            result[tp] = high if offset is None else offset
            continue
        given = bound.offset_or_named(tp)
        if given == "earliest":
            result[tp] = low
        elif given == "latest":
            result[tp] = high
        elif given == "committed":
            if committed is None or tp not in committed:
                raise HerdlessSparkError(
                    f"startingOffsets is committed, but group {group_id!r} has no committed "
                    f"offset for {tp[0]}-{tp[1]}; use earliest, latest or JSON offsets"
                )
            result[tp] = committed[tp]
        else:
            result[tp] = given
    return result

"""Offsets as Spark checkpoints them, and the offset JSON users write in options.

A stream offset is what Spark stores in the query's offset log after each
micro-batch. It must survive a JSON round trip and compare equal as a JSON
string when nothing changed, so every mapping is emitted with its keys sorted
(partitions sort as strings, the way Spark will compare them).

    {"offsets": {"clicks": {"0": 120, "1": 96}}, "starts": {"clicks": {"1": 80}}}

`offsets` is, for each partition this query owns, the position the batch ends
at. `starts` appears only for partitions the batch does not continue from the
previous batch's end: partitions newly assigned to this query by the group,
which begin at the group's committed offset. Keeping that jump inside the
batch's own end offset lets Spark re-plan a failed batch identically after a
restart, without asking the group again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from herdless.spark.errors import HerdlessSparkError

TopicPartition = tuple[str, int]

# Kafka's sentinels in startingOffsets / endingOffsets JSON, as Spark spells them.
EARLIEST = -2
LATEST = -1


def nest(flat: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    nested: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(flat, key=lambda tp: (tp[0], str(tp[1]))):
        nested.setdefault(topic, {})[str(partition)] = flat[(topic, partition)]
    return nested


def _flatten(nested: Mapping[str, Any], what: str) -> dict[TopicPartition, int]:
    if not isinstance(nested, Mapping):
        raise HerdlessSparkError(f"{what}: expected a JSON object of topics, got {nested!r}")
    flat: dict[TopicPartition, int] = {}
    for topic, partitions in nested.items():
        if not isinstance(partitions, Mapping):
            raise HerdlessSparkError(
                f"{what}: topic {topic!r} must map partitions to offsets, got {partitions!r}"
            )
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except (TypeError, ValueError):
                raise HerdlessSparkError(
                    f"{what}: partition {partition!r} of topic {topic!r} is not a number"
                ) from None
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise HerdlessSparkError(
                    f"{what}: offset of {topic}-{number} must be an integer, got {offset!r}"
                )
            flat[(topic, number)] = offset
    return flat


@dataclass(frozen=True)
class StreamOffset:
    """The end of one micro-batch for the partitions this query owns."""

    positions: dict[TopicPartition, int] = field(default_factory=dict)
    starts: dict[TopicPartition, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        encoded: dict[str, Any] = {"offsets": nest(self.positions)}
        if self.starts:
            encoded["starts"] = nest(self.starts)
        return encoded

    @classmethod
    def from_json(cls, encoded: Mapping[str, Any]) -> StreamOffset:
        return cls(
            positions=_flatten(encoded.get("offsets", {}), "stream offset"),
            starts=_flatten(encoded.get("starts", {}), "stream offset"),
        )


@dataclass(frozen=True)
class OffsetRange:
    """Records [start, until) of one partition: the unit an executor reads."""

    topic: str
    partition: int
    start: int
    until: int

    @property
    def count(self) -> int:
        return self.until - self.start


def batch_ranges(start: StreamOffset, end: StreamOffset) -> list[OffsetRange]:
    """The records between two stream offsets, one range per partition with any."""
    ranges = []
    for tp, until in sorted(end.positions.items()):
        begin = end.starts.get(tp, start.positions.get(tp))
        if begin is None:
            raise HerdlessSparkError(
                f"offset log is inconsistent: {tp[0]}-{tp[1]} ends at {until} "
                "but has no start; was the checkpoint edited?"
            )
        if until > begin:
            ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    return ranges


def decode_json(text: str, option: str, otherwise: str) -> Any:
    """JSON an option holds, or an error that says what else the option could have been."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HerdlessSparkError(
            f"{option} is {otherwise}: {exc.msg} at character {exc.pos}"
        ) from None


def _partitions_json(text: str, option: str, otherwise: str) -> dict[TopicPartition, int]:
    return _flatten(decode_json(text, option, otherwise), option)


def parse_offsets_json(
    text: str, option: str, *, allow_earliest: bool = True
) -> dict[TopicPartition, int]:
    """Spark's per-partition offset JSON: {"topic": {"0": 23, "1": -2}}."""
    flat = _partitions_json(
        text,
        option,
        'neither earliest, latest, committed nor valid JSON like {"topic": {"0": 23}}',
    )
    for (topic, partition), offset in flat.items():
        lowest = EARLIEST if allow_earliest else LATEST
        if offset < lowest:
            raise HerdlessSparkError(
                f"{option}: offset {offset} of {topic}-{partition} is not an offset, "
                f"{'-2 (earliest), ' if allow_earliest else ''}or -1 (latest)"
            )
    return flat


def parse_timestamps_json(text: str, option: str) -> dict[TopicPartition, int]:
    """Spark's per-partition timestamp JSON: {"topic": {"0": 1700000000000}} (milliseconds)."""
    flat = _partitions_json(text, option, 'not valid JSON like {"topic": {"0": 1700000000000}}')
    for (topic, partition), stamp in flat.items():
        if stamp < 0:
            raise HerdlessSparkError(
                f"{option}: timestamp {stamp} of {topic}-{partition} is negative"
            )
    return flat


def limit_ranges(
    starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int], max_rows: int
) -> dict[TopicPartition, int]:
    """Cut each partition's end so that at most max_rows records are read in all.

    Water-filling: partitions with little to read take all of it, the rest share
    what is left evenly, so one busy partition cannot starve the others.
    """
    available = {tp: max(0, ends[tp] - starts[tp]) for tp in ends}
    taken = dict.fromkeys(available, 0)
    budget = max_rows
    hungry = sorted((tp for tp in available if available[tp] > 0), key=lambda tp: available[tp])
    while hungry and budget > 0:
        share = max(1, budget // len(hungry))
        still_hungry = []
        for tp in hungry:
            give = min(share, available[tp] - taken[tp], budget)
            taken[tp] += give
            budget -= give
            if taken[tp] < available[tp]:
                still_hungry.append(tp)
        hungry = still_hungry
    return {tp: starts[tp] + taken[tp] for tp in ends}


def sorted_partitions(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    return sorted(partitions, key=lambda tp: (tp[0], tp[1]))


def split_ranges(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None
) -> list[OffsetRange]:
    """Cut ranges into pieces, as Spark's minPartitions and maxRecordsPerPartition ask.

    With neither, one Spark task reads one Kafka partition's range. A range
    longer than max_records becomes pieces of at most that many offsets. If
    there are still fewer than min_partitions ranges, the larger ones are cut
    in proportion to their size (Spark's KafkaOffsetRangeCalculator), so the
    task count comes out near min_partitions.
    """
    ranges = [r for r in ranges if r.count > 0]
    if max_records is not None:
        ranges = [piece for r in ranges for piece in _cut(r, -(-r.count // max_records))]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.count for r in ranges)

    def share(count: int, of: int, parts: int) -> int:
        return max(round(count / of * parts), 1)

    whole = [r for r in ranges if share(r.count, total, min_partitions) == 1]
    rest = total - sum(r.count for r in whole)
    parts = max(min_partitions - len(whole), 1)
    return [
        piece for r in ranges for piece in _cut(r, 1 if r in whole else share(r.count, rest, parts))
    ]


def _cut(offsets: OffsetRange, parts: int) -> list[OffsetRange]:
    pieces = []
    start, remaining = offsets.start, offsets.count
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        pieces.append(OffsetRange(offsets.topic, offsets.partition, start, start + size))
        start += size
    return [p for p in pieces if p.count > 0]

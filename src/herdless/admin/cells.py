"""How a value reads in one cell of a table, the same in the commands and on the
console's pages, so that an operator reads the same thing from either."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafka import TopicPartition

NONE = "-"  # an empty cell, as Kafka's tools print it


def cell(value: object) -> str:
    return NONE if value is None or value == "" else str(value)


def format_partitions(partitions: tuple[TopicPartition, ...] | None) -> str:
    """`topic[0,1,2] other[0]`, or NONE when the partitions are not known."""
    if partitions is None:
        return NONE
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}[{','.join(map(str, ps))}]" for t, ps in by_topic.items()) or NONE

"""Two streaming queries in one consumer group split a topic and hand partitions over."""

from __future__ import annotations

from collections import Counter

from pyspark.sql import functions as F

from tests.spark.kafka import committed, create_topic, end_offsets, group_assignment, produce
from tests.spark.streams import SINK_SCHEMA, start_to_parquet, sunk_values, wait_until

TOPIC, GROUP, PARTITIONS = "shared", "split", 4


def _round(bootstrap: str, number: int) -> None:
    produce(
        bootstrap,
        TOPIC,
        ((None, f"r{number}-{p}-{i}".encode(), p) for p in range(PARTITIONS) for i in range(100)),
    )


def _caught_up(bootstrap: str) -> bool:
    return committed(bootstrap, GROUP, TOPIC, PARTITIONS) == end_offsets(
        bootstrap, TOPIC, PARTITIONS
    )


def _partitions_of_round(spark, out, number: int) -> set[int]:
    frame = spark.read.schema(SINK_SCHEMA).parquet(str(out / "data"))
    rows = frame.where(F.col("value").startswith(f"r{number}-")).select("partition").distinct()
    return {row.partition for row in rows.collect()}


def test_two_queries_split_partitions_and_hand_them_over(spark, broker, tmp_path) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, PARTITIONS)
    _round(bootstrap, 1)
    first_out, second_out = tmp_path / "first", tmp_path / "second"
    first = start_to_parquet(
        spark, bootstrap, TOPIC, GROUP, first_out, name="first", startingOffsets="earliest"
    )
    second = start_to_parquet(
        spark, bootstrap, TOPIC, GROUP, second_out, name="second", startingOffsets="earliest"
    )
    try:
        members = wait_until(
            lambda: (lambda a: a if sorted(len(p) for p in a.values()) == [2, 2] else None)(
                group_assignment(bootstrap, GROUP)
            ),
            60,
            "two members with two partitions each",
        )
        assert set().union(*members.values()) == set(range(PARTITIONS))
        wait_until(lambda: _caught_up(bootstrap), 60, "round 1 committed")

        _round(bootstrap, 2)
        wait_until(lambda: _caught_up(bootstrap), 60, "round 2 committed")
        mine = _partitions_of_round(spark, first_out, 2)
        theirs = _partitions_of_round(spark, second_out, 2)
        assert mine | theirs == set(range(PARTITIONS))
        assert not mine & theirs, "both queries read the same partition"

        second.stop()
        assert second.exception() is None
        wait_until(
            lambda: list(map(len, group_assignment(bootstrap, GROUP).values())) == [4],
            60,
            "the first query to own every partition",
        )
        _round(bootstrap, 3)
        wait_until(lambda: _caught_up(bootstrap), 60, "round 3 committed by the first query")
    finally:
        first.stop()
        second.stop()

    assert _partitions_of_round(spark, first_out, 3) == set(range(PARTITIONS))
    counts = Counter(sunk_values(spark, first_out) + sunk_values(spark, second_out))
    expected = {f"r{n}-{p}-{i}" for n in (1, 2, 3) for p in range(PARTITIONS) for i in range(100)}
    assert set(counts) == expected, "a record was lost"
    assert [v for v, c in counts.items() if c > 1] == [], "a record was read by both queries"

"""Streaming reads: exactly-once into Parquet across a restart, offsets committed to the group."""

from __future__ import annotations

from collections import Counter

from tests.spark.kafka import committed, create_topic, end_offsets, group_assignment, produce
from tests.spark.streams import start_to_parquet, sunk_values, wait_until


def _values(first: int, last: int) -> list[str]:
    return [f"record-{i}" for i in range(first, last)]


def _produce_values(bootstrap: str, topic: str, first: int, last: int, partitions: int) -> None:
    produce(
        bootstrap,
        topic,
        ((None, value.encode(), i % partitions) for i, value in enumerate(_values(first, last))),
    )


def test_exactly_once_across_stop_and_restart(spark, broker, tmp_path) -> None:
    topic, group, partitions = "clicks-eo", "eo", 3
    create_topic(broker.bootstrap, topic, partitions)
    _produce_values(broker.bootstrap, topic, 0, 3000, partitions)

    query = start_to_parquet(
        spark,
        broker.bootstrap,
        topic,
        group,
        tmp_path,
        name="eo_first",
        startingOffsets="earliest",
        maxOffsetsPerTrigger="400",
    )
    # Stop in the middle of the backlog: some batches done, more to do.
    wait_until(lambda: len(sunk_values(spark, tmp_path)) >= 800, 60, "two batches in Parquet")
    query.stop()
    assert query.exception() is None
    done_before = len(sunk_values(spark, tmp_path))
    assert done_before < 3000, "the first run should not have finished the backlog"

    _produce_values(broker.bootstrap, topic, 3000, 5000, partitions)
    query = start_to_parquet(
        spark,
        broker.bootstrap,
        topic,
        group,
        tmp_path,
        name="eo_second",
        available_now=True,
        # Long enough that an empty group below means the query left it.
        **{"kafka.session.timeout.ms": "45000"},
    )
    query.awaitTermination(120)
    assert query.exception() is None
    wait_until(lambda: group_assignment(broker.bootstrap, group) == {}, 20, "the query to leave")

    counts = Counter(sunk_values(spark, tmp_path))
    assert sorted(counts) == sorted(_values(0, 5000)), "a record is missing"
    assert [v for v, n in counts.items() if n > 1] == [], "a record was written twice"
    # Trigger.AvailableNow never calls commit() for its last batch; the group
    # still has every offset, because Spark asks for offsets once more after it.
    assert committed(broker.bootstrap, group, topic, partitions) == end_offsets(
        broker.bootstrap, topic, partitions
    )


def test_group_offsets_follow_each_batch_and_an_idle_stream(spark, broker, tmp_path) -> None:
    topic, group, partitions = "clicks-idle", "idle", 2
    create_topic(broker.bootstrap, topic, partitions)
    _produce_values(broker.bootstrap, topic, 0, 100, partitions)
    query = start_to_parquet(
        spark, broker.bootstrap, topic, group, tmp_path, name="idle", startingOffsets="earliest"
    )
    try:
        for first, last in ((100, 300), (300, 301)):
            # The stream goes idle after each burst: the last batch's offsets
            # must still reach the group (Spark's own commit() comes one batch late).
            wait_until(
                lambda: (
                    committed(broker.bootstrap, group, topic, partitions)
                    == end_offsets(broker.bootstrap, topic, partitions)
                ),
                30,
                "the group's offsets to reach the log end",
            )
            _produce_values(broker.bootstrap, topic, first, last, partitions)
        wait_until(
            lambda: (
                committed(broker.bootstrap, group, topic, partitions)
                == end_offsets(broker.bootstrap, topic, partitions)
            ),
            30,
            "the group's offsets to reach the log end after the last record",
        )
    finally:
        query.stop()
    assert sorted(sunk_values(spark, tmp_path)) == sorted(_values(0, 301))

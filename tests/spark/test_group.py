"""Two streaming queries in one consumer group split a topic and hand partitions over.

With either group protocol: KIP-848's, which the source chooses where the broker
serves it, and the classic one, which a query may ask for (and gets against
brokers without KIP-848, or in a group that already has classic members).
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from confluent_kafka import Consumer
from pyspark.sql import functions as F

from tests.spark.kafka import (
    committed,
    create_topic,
    end_offsets,
    group_assignment,
    group_members,
    group_protocol,
    produce,
)
from tests.spark.streams import SINK_SCHEMA, start_to_parquet, sunk_values, wait_until

PARTITIONS = 4
# Options that make a query join as a classic member; none: the source chooses.
PROTOCOL_OPTIONS = {
    "consumer": {},
    "classic": {"kafka.group.protocol": "classic", "kafka.session.timeout.ms": "6000"},
}


def _round(bootstrap: str, topic: str, number: int) -> None:
    produce(
        bootstrap,
        topic,
        ((None, f"r{number}-{p}-{i}".encode(), p) for p in range(PARTITIONS) for i in range(100)),
    )


def _caught_up(bootstrap: str, topic: str, group: str) -> bool:
    return committed(bootstrap, group, topic, PARTITIONS) == end_offsets(
        bootstrap, topic, PARTITIONS
    )


def _partitions_of_round(spark, out, number: int) -> set[int]:
    frame = spark.read.schema(SINK_SCHEMA).parquet(str(out / "data"))
    rows = frame.where(F.col("value").startswith(f"r{number}-")).select("partition").distinct()
    return {row.partition for row in rows.collect()}


@pytest.mark.parametrize("protocol", sorted(PROTOCOL_OPTIONS))
def test_two_queries_split_partitions_and_hand_them_over(
    spark, broker, tmp_path, protocol: str
) -> None:
    bootstrap, topic, group = broker.bootstrap, f"shared-{protocol}", f"split-{protocol}"
    create_topic(bootstrap, topic, PARTITIONS)
    _round(bootstrap, topic, 1)
    first_out, second_out = tmp_path / "first", tmp_path / "second"
    options = {"startingOffsets": "earliest", **PROTOCOL_OPTIONS[protocol]}
    first = start_to_parquet(spark, bootstrap, topic, group, first_out, name="first", **options)
    second = start_to_parquet(spark, bootstrap, topic, group, second_out, name="second", **options)
    try:
        members = wait_until(
            lambda: (lambda a: a if sorted(len(p) for p in a.values()) == [2, 2] else None)(
                group_assignment(bootstrap, group)
            ),
            60,
            "two members with two partitions each",
        )
        assert set().union(*members.values()) == set(range(PARTITIONS))
        assert group_protocol(bootstrap, group) == protocol
        wait_until(lambda: _caught_up(bootstrap, topic, group), 60, "round 1 committed")

        _round(bootstrap, topic, 2)
        wait_until(lambda: _caught_up(bootstrap, topic, group), 60, "round 2 committed")
        mine = _partitions_of_round(spark, first_out, 2)
        theirs = _partitions_of_round(spark, second_out, 2)
        assert mine | theirs == set(range(PARTITIONS))
        assert not mine & theirs, "both queries read the same partition"

        second.stop()
        assert second.exception() is None
        wait_until(
            lambda: list(map(len, group_assignment(bootstrap, group).values())) == [4],
            60,
            "the first query to own every partition",
        )
        _round(bootstrap, topic, 3)
        wait_until(
            lambda: _caught_up(bootstrap, topic, group), 60, "round 3 committed by the first query"
        )
    finally:
        first.stop()
        second.stop()

    assert _partitions_of_round(spark, first_out, 3) == set(range(PARTITIONS))
    counts = Counter(sunk_values(spark, first_out) + sunk_values(spark, second_out))
    expected = {f"r{n}-{p}-{i}" for n in (1, 2, 3) for p in range(PARTITIONS) for i in range(100)}
    assert set(counts) == expected, "a record was lost"
    assert [v for v, c in counts.items() if c > 1] == [], "a record was read by both queries"


def test_a_query_joins_a_group_of_classic_consumers_as_one_of_them(spark, broker, tmp_path) -> None:
    """A broker without online migration keeps KIP-848 members out of a classic group with
    members; the query sees those members and joins the classic way, beside them."""
    bootstrap, topic, group = broker.bootstrap, "mixed", "mixed"
    create_topic(bootstrap, topic, PARTITIONS)
    _round(bootstrap, topic, 1)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "classic",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": 6000,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    polling = threading.Event()

    def poll() -> None:
        while not polling.is_set():
            consumer.poll(0.1)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    query = None
    try:
        wait_until(lambda: group_assignment(bootstrap, group), 30, "the plain consumer to join")
        query = start_to_parquet(
            spark, bootstrap, topic, group, tmp_path, name="mixed", startingOffsets="earliest"
        )
        wait_until(
            lambda: sorted(map(len, group_assignment(bootstrap, group).values())) == [2, 2],
            60,
            "the consumer and the query with two partitions each",
        )
        assert group_protocol(bootstrap, group) == "classic"
        (owned,) = [p for client, p in group_members(bootstrap, group) if client != "rdkafka"]
        wait_until(
            lambda: {int(v.split("-")[1]) for v in sunk_values(spark, tmp_path)} == owned,
            60,
            "the query to read the records of its two partitions",
        )
    finally:
        if query is not None:
            query.stop()
        polling.set()
        poller.join(5)
        consumer.close()

"""A consume-transform-produce process, as a pipeline runs one with confluent-kafka.

It reads the input topic in a consumer group with read_committed, writes each record
to the same partition of the output topic inside a transaction together with the
group's offsets (`send_offsets_to_transaction`), and commits. Each output value
names its input record and its transaction, `<partition>:<offset>|<transaction>`,
and each transaction's outcome, once the client has it, is appended to a file, so a
checker can tell which records belong to transactions that were aborted.

    python tests/support/transformer.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID
        INCARNATION OUTCOMES_FILE

Run again after a SIGKILL with the same transactional id and a new incarnation: its
init_transactions fences the killed one and aborts what it left open. Exits 3 when
fenced by a newer incarnation, as a producer must stop then.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

BATCH = 100
TIMEOUT_S = 30.0


def main(argv: list[str]) -> int:
    bootstrap, source, sink, group, transactional_id, incarnation, outcomes_path = argv
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "logger": _quiet(),
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 10_000,
            "linger.ms": 5,
            "logger": _quiet(),
        }
    )
    producer.init_transactions(TIMEOUT_S * 4)
    consumer.subscribe([source])
    with open(outcomes_path, "a", buffering=1) as outcomes:
        try:
            _run(consumer, producer, sink, incarnation, outcomes)
        except KafkaException as exc:
            # Fatal: fenced by a newer incarnation, or a state only a new producer leaves.
            print(f"transformer {incarnation} stops: {exc.args[0]}", file=sys.stderr)
            return 3
    return 0


def _run(
    consumer: Consumer, producer: Producer, sink: str, incarnation: str, outcomes: TextIO
) -> None:
    sequence = 0
    while True:
        records = [r for r in consumer.consume(BATCH, timeout=0.5) if r.error() is None]
        if not records:
            continue
        sequence += 1
        transaction = f"{incarnation}.{sequence}"
        try:
            _transform(producer, consumer, sink, records, transaction)
            _finish(producer, commit=True)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if not error.txn_requires_abort():
                raise
            # Written before the abort: once the client says abort, this transaction
            # can only end aborted, even if this process dies before the abort is sent.
            outcomes.write(f"{transaction} abort\n")
            _finish(producer, commit=False)
            _rewind(consumer)
            continue
        outcomes.write(f"{transaction} commit\n")


def _transform(
    producer: Producer, consumer: Consumer, sink: str, records: list[Any], transaction: str
) -> None:
    producer.begin_transaction()
    for record in records:
        value = f"{record.partition()}:{record.offset()}|{transaction}".encode()
        producer.produce(sink, value=value, key=record.key(), partition=record.partition())
    positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT_S)


def _finish(producer: Producer, commit: bool) -> None:
    """Commit or abort, retrying what the client says may be retried."""
    while True:
        try:
            if commit:
                producer.commit_transaction(TIMEOUT_S)
            else:
                producer.abort_transaction(TIMEOUT_S)
            return
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.retriable():
                continue
            raise


def _rewind(consumer: Consumer) -> None:
    """Back to the group's committed offsets: the aborted batch is read again."""
    assignment = consumer.assignment()
    for tp in consumer.committed(assignment, TIMEOUT_S):
        offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        consumer.seek(TopicPartition(tp.topic, tp.partition, offset))


def _quiet() -> Any:
    import logging

    quiet = logging.getLogger("transformer-client")
    quiet.setLevel(logging.CRITICAL)
    return quiet


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

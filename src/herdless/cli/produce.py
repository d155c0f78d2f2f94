"""`herdless produce TOPIC`: one record per line of standard input, as `kcat -P` sends them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, BinaryIO

import typer

from herdless.cli.errors import fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap
from herdless.cli.output import counted, note
from herdless.cli.rdkafka import client_config, partition_count

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message

# A record the broker has not acknowledged by then is reported as not delivered,
# rather than retried for librdkafka's default five minutes.
DELIVERY_TIMEOUT_MS = 30_000


def parse_headers(items: list[str] | None) -> list[tuple[str, bytes]]:
    headers = []
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise fail(f"--header expects key=value, got {item!r}")
        headers.append((name, value.encode()))
    return headers


def records(lines: BinaryIO, separator: bytes | None) -> Iterator[tuple[bytes | None, bytes]]:
    """(key, value) per line; a line without the separator has no key, as with kcat -K."""
    for line in lines:
        line = line.removesuffix(b"\n")
        if separator is not None and separator in line:
            key, _, value = line.partition(separator)
            yield key, value
        else:
            yield None, line


def produce(
    topic: str,
    key_separator: Annotated[
        str | None,
        typer.Option(
            "--key-separator",
            "-K",
            help="Split each line at the first SEP into key and value (a line without it"
            " has no key); \\t is a tab.",
        ),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", "-H", help="key=value header on every record; repeatable."),
    ] = None,
    partition: Annotated[
        int | None,
        typer.Option(
            "--partition", "-p", min=0, show_default="by key", help="Send every record here."
        ),
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Send each line of standard input to TOPIC as one record."""
    headers = parse_headers(header)
    if key_separator == "":
        raise fail("--key-separator must not be empty")
    separator = None if key_separator is None else key_separator.replace("\\t", "\t").encode()
    from confluent_kafka import Producer

    producer = Producer(client_config(bootstrap, **{"delivery.timeout.ms": DELIVERY_TIMEOUT_MS}))
    partitions = partition_count(producer, topic)
    if partition is not None and partition >= partitions:
        raise fail(f"topic {topic!r} has no partition {partition} (it has {partitions})")
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _: Message) -> None:
        if error is not None:
            failures.append(error)

    sent = 0
    for key, value in records(sys.stdin.buffer, separator):
        while True:
            try:
                producer.produce(
                    topic,
                    value=value,
                    key=key,
                    partition=-1 if partition is None else partition,
                    headers=headers or None,
                    on_delivery=delivered,
                )
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
        sent += 1
    undelivered = producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5)
    if failures or undelivered:
        reason = failures[0].str() if failures else "no acknowledgement in time"
        raise fail(
            f"{len(failures) + undelivered} of {sent} records were not delivered to"
            f" {topic}: {reason}"
        )
    note(f"produced {counted(sent, 'record')} to {topic}")

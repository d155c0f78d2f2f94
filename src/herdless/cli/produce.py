"""`herdless produce TOPIC`: one record per line of standard input, as `kcat -P` sends them."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, BinaryIO

import typer

from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, client_settings
from herdless.cli.output import counted, note
from herdless.cli.rdkafka import METADATA_TIMEOUT_S, client_config, partition_count

if TYPE_CHECKING:
    from confluent_kafka import Message

# A record the broker has not acknowledged by then is reported as not delivered,
# rather than retried for librdkafka's default five minutes.
DELIVERY_TIMEOUT_MS = 30_000
# The largest message.max.bytes librdkafka takes.
LIBRDKAFKA_MAX_MESSAGE_BYTES = 1_000_000_000


def parse_headers(items: list[str] | None) -> list[tuple[str, bytes]]:
    headers = []
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise fail(f"--header expects key=value, got {item!r}", USAGE)
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
        typer.Option(
            "--header",
            "-H",
            metavar="KEY=VALUE",
            help="key=value header on every record; repeatable.",
        ),
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
        raise fail("--key-separator must not be empty", USAGE)
    separator = None if key_separator is None else key_separator.replace("\\t", "\t").encode()
    lines = records(sys.stdin.buffer, separator)
    first = next(lines, None)
    from confluent_kafka import KafkaError, KafkaException, Producer

    settings: dict[str, object] = {
        "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
        # Nothing to send creates nothing: the metadata request that finds the
        # topic's partitions would otherwise have the broker create it.
        "allow.auto.create.topics": first is not None,
    }
    if "message.max.bytes" not in client_settings():
        # The topic's max.message.bytes decides, as with Kafka's console producer,
        # not librdkafka's own smaller default (1000000 bytes).
        settings["message.max.bytes"] = LIBRDKAFKA_MAX_MESSAGE_BYTES
    producer = Producer(client_config(bootstrap, **settings))
    partitions = partition_count(producer, topic)
    if partition is not None and partition >= partitions:
        raise fail(f"topic {topic!r} has no partition {partition} (it has {partitions})")
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _: Message) -> None:
        if error is not None:
            failures.append(error)

    sent = largest = 0
    for key, value in itertools.chain([] if first is None else [first], lines):
        size = len(value) + len(key or b"")
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
            except KafkaException as exc:
                # librdkafka's own limit, when -X message.max.bytes set it lower.
                if exc.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE:
                    raise fail(
                        f"line {sent + 1} is a record of {size} bytes, over the client's"
                        f" message.max.bytes ({client_settings()['message.max.bytes']});"
                        " give a larger -X message.max.bytes=N"
                    ) from None
                raise fail(f"cannot send line {sent + 1} to {topic}: {exc.args[0].str()}") from None
        largest = max(largest, size)
        producer.poll(0)
        sent += 1
    undelivered = producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5)
    if any(f.code() == KafkaError.MSG_SIZE_TOO_LARGE for f in failures):
        raise fail(too_large(bootstrap, topic, largest))
    if failures or undelivered:
        reason = failures[0].str() if failures else "no acknowledgement in time"
        raise fail(
            f"{len(failures) + undelivered} of {sent} records were not delivered to"
            f" {topic}: {reason}"
        )
    note(f"produced {counted(sent, 'record')} to {topic}")


def too_large(bootstrap: str, topic: str, largest: int) -> str:
    """Why the broker refused a record as too large, naming the limit and how to raise it."""
    limit = topic_config(bootstrap, topic, "max.message.bytes")
    where = f"topic {topic}'s max.message.bytes" + (f" ({limit} bytes)" if limit else "")
    return (
        f"a record of {largest} bytes is over {where}: raise it with `herdless topics alter"
        f" {topic} --config max.message.bytes=N`, or every topic's default, the broker's"
        " message.max.bytes"
    )


def topic_config(bootstrap: str, topic: str, name: str) -> str | None:
    """One config of a topic as the broker reports it, or None if it does not say."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient(client_config(bootstrap))
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        configs = admin.describe_configs([resource])[resource].result(METADATA_TIMEOUT_S)
    except KafkaException:
        return None
    entry = configs.get(name)
    return None if entry is None else entry.value

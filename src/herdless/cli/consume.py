"""`herdless consume TOPIC`: print a topic's records, as `kcat -C` and `rpk topic consume` do.

Without `--group` it reads every partition (or those of `--partition`) from where
`--from` says and commits nothing. With `--group` it is a member of that consumer
group: it reads what the group is assigned, from the group's committed offsets
(`--from` only says where to start where there are none), and commits what it
printed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from herdless.cli.errors import USAGE, fail, warn
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap
from herdless.cli.output import OUTPUT_METAVAR, Output, note, parse_output
from herdless.cli.rdkafka import (
    METADATA_TIMEOUT_S,
    client_config,
    fail_if_refused,
    partition_count,
)
from herdless.cli.record_format import compile_format, json_line

if TYPE_CHECKING:
    from confluent_kafka import Consumer, TopicPartition

# The group.id librdkafka insists on even when no group is joined; without a
# subscription or a commit the broker never hears of it.
UNGROUPED_ID = "herdless-cli-consume"
POLL_S = 0.2


def parse_start(text: str) -> tuple[str, int]:
    """--from: ('beginning'|'end', 0), ('offset', N), ('last', N) for -N, or ('time', MS)."""
    value = text.strip().lower()
    if value in ("beginning", "end"):
        return value, 0
    try:
        if value.startswith("@"):
            return "time", int(value[1:])
        offset = int(value)
    except ValueError:
        raise fail(
            "--from expects beginning, end, an OFFSET, -N (the last N records of each"
            f" partition) or @TIMESTAMP_MS, got {text!r}",
            USAGE,
        ) from None
    # kcat's `-o -N`: N records before the end of each partition.
    return ("last", -offset) if value.startswith("-") else ("offset", offset)


def _output_format(value: str) -> Output:
    """-o is the output format in every command; kcat's `-o OFFSET` is named as such."""
    try:
        return parse_output(value)
    except ValueError:
        pass
    word = value.strip().lower()
    start = {"beginning": "beginning", "end": "end"}.get(word)
    if start is None and word.lstrip("-").isdigit():
        start = word
    if start is None and word.startswith("s@"):
        start = word[1:]
    if start is None:
        raise typer.BadParameter(f"{value!r} is not one of table, json, plain")
    raise typer.BadParameter(
        f"-o is the output format here (table, json, plain); kcat's `-o {value}` is"
        f" `--from {start}`"
    )


def consume(
    topic: str,
    start: Annotated[
        str,
        typer.Option(
            "--from",
            help="beginning, end, an OFFSET, -N (the last N records of each partition, as"
            " kcat's -o -N), or @TIMESTAMP_MS (the first record at or after it).",
        ),
    ] = "beginning",
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            "-g",
            help="Consume as a member of this group, and commit.",
            show_default="none",
        ),
    ] = None,
    partition: Annotated[
        list[int] | None,
        typer.Option(
            "--partition",
            "-p",
            min=0,
            metavar="N",
            show_default="all",
            help="Only this partition; repeatable.",
        ),
    ] = None,
    count: Annotated[
        int | None, typer.Option("--count", "-n", min=1, help="Stop after N records.")
    ] = None,
    exit_at_end: Annotated[
        bool,
        typer.Option("--exit-at-end", "-e", help="Stop at the end of every partition, as kcat -e."),
    ] = False,
    record_format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="kcat-style: %t topic, %p partition, %o offset, %k key, %s value,"
            " %T timestamp ms, %h headers, %K/%S key/value length, \\n \\t.",
        ),
    ] = "%s\\n",
    output: Annotated[
        Output | None,
        typer.Option(
            "--output",
            "-o",
            parser=_output_format,
            metavar=OUTPUT_METAVAR,
            show_default=False,
            help="json: one JSON object per record, instead of --format.",
        ),
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Print TOPIC's records, one per line (or as --format says), until Ctrl-C."""
    where, position = parse_start(start)
    if group is not None and where in ("offset", "last", "time"):
        raise fail(
            "with --group, --from is beginning or end (where the group has no offset);"
            " move a group's offsets with `herdless groups reset-offsets`",
            USAGE,
        )
    if group is not None and partition:
        raise fail(
            "--partition reads without a group; a group's members share its partitions", USAGE
        )
    try:
        render = json_line if output is Output.JSON else compile_format(record_format)
    except ValueError as exc:
        raise fail(f"--format: {exc}", USAGE) from None
    from confluent_kafka import Consumer

    settings = client_config(
        bootstrap,
        **{
            "group.id": group or UNGROUPED_ID,
            "enable.auto.commit": group is not None,
            "auto.offset.reset": "earliest" if where == "beginning" else "latest",
            "enable.partition.eof": exit_at_end,
        },
    )
    consumer = Consumer(settings)
    try:
        partitions = partition_count(consumer, topic)
        assigned: set[tuple[str, int]] = set()
        if group is None:
            chosen = partition if partition else list(range(partitions))
            missing = [p for p in chosen if p >= partitions]
            if missing:
                raise fail(f"topic {topic!r} has no partition {missing[0]} (it has {partitions})")
            consumer.assign(_start_positions(consumer, topic, chosen, where, position))
            assigned = {(topic, p) for p in chosen}
        else:

            def on_assign(_: Consumer, tps: list[TopicPartition]) -> None:
                assigned.update((tp.topic, tp.partition) for tp in tps)

            def on_revoke(_: Consumer, tps: list[TopicPartition]) -> None:
                assigned.difference_update((tp.topic, tp.partition) for tp in tps)

            consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        printed = _print_records(consumer, render, count, assigned if exit_at_end else None)
        if group is not None and exit_at_end and not printed:
            _say_why_nothing(consumer, group, topic, assigned)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


def _print_records(
    consumer: Consumer,
    render: Callable[..., bytes],
    count: int | None,
    until_end_of: set[tuple[str, int]] | None,
) -> int:
    """Print records until `count` of them or the end of every partition of
    `until_end_of`; how many were printed."""
    from confluent_kafka import KafkaError

    printed = 0
    at_end: set[tuple[str, int]] = set()
    out = sys.stdout.buffer
    while count is None or printed < count:
        message = consumer.poll(POLL_S)
        if message is None:
            fail_if_refused()  # e.g. a password changed while consuming
            continue
        error = message.error()
        where = (message.topic(), message.partition())
        if error is not None and error.code() == KafkaError._PARTITION_EOF:
            at_end.add(where)
            if until_end_of is not None and until_end_of and until_end_of <= at_end:
                return printed
            continue
        if error is not None:
            if error.fatal() or not error.retriable():
                raise fail(f"consuming stopped: {error.str()}")
            warn(error.str())
            continue
        at_end.discard(where)
        try:
            out.write(render(message))
            out.flush()
        except BrokenPipeError:  # the reader went away (`| head`): stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return printed
        printed += 1
    return printed


def _say_why_nothing(
    consumer: Consumer, group: str, topic: str, assigned: set[tuple[str, int]]
) -> None:
    """A group that printed nothing has usually read (or committed) everything before:
    say so, and how to read again, rather than end in silence."""
    from confluent_kafka import TopicPartition

    partitions = sorted(p for t, p in assigned if t == topic)
    committed = consumer.committed(
        [TopicPartition(topic, p) for p in partitions], timeout=METADATA_TIMEOUT_S
    )
    if not any(tp.offset >= 0 for tp in committed):
        return  # nothing committed: the partitions are empty
    note(
        f"nothing new for group {group}: its committed offsets are at the end of"
        f" partitions {','.join(map(str, partitions))} of {topic}. To read them again:"
        f" herdless groups reset-offsets {group} --topic {topic} --to-earliest --execute"
        " (or consume without --group)"
    )


def _start_positions(
    consumer: Consumer, topic: str, partitions: list[int], where: str, position: int
) -> list[TopicPartition]:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    if where == "beginning":
        return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions]
    if where == "end":
        return [TopicPartition(topic, p, OFFSET_END) for p in partitions]
    if where == "time":
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, position) for p in partitions], timeout=METADATA_TIMEOUT_S
        )
        # No record at or after the time: -1, start at the end.
        return [
            TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
            for tp in found
        ]
    starts = []
    for p in partitions:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=METADATA_TIMEOUT_S
        )
        if where == "last":  # fewer than N records: all of them
            starts.append(TopicPartition(topic, p, max(low, high - position)))
            continue
        offset = min(max(position, low), high)
        if offset != position:
            warn(f"partition {p} of {topic} holds offsets {low} to {high}; reading from {offset}")
        starts.append(TopicPartition(topic, p, offset))
    return starts

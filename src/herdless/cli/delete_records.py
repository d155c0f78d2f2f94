"""`herdless topics delete-records`: move partitions' log start offsets forward, as
kafka-delete-records.sh does, through the brokers' DeleteRecords.

Records before the new start offset are gone for every reader; consumers whose
offsets were below it start from it (or as their auto.offset.reset says). The
offsets come from the options (`--partition N --before OFFSET`) or from a JSON
file in kafka-delete-records.sh's form:

    {"partitions": [{"topic": "clicks", "partition": 0, "offset": 3}], "version": 1}

An offset of -1 (or `--before end`) means the partition's high watermark: every
record it holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap
from herdless.cli.output import OutputOption, Table, View, counted, show

# DeleteRecords' offset meaning "up to the high watermark", as Kafka takes it.
HIGH_WATERMARK = -1


def parse_before(text: str) -> int:
    """--before: an offset, or `end` (or -1) for the high watermark."""
    if text.strip().lower() == "end":
        return HIGH_WATERMARK
    try:
        offset = int(text)
    except ValueError:
        offset = -2
    if offset < HIGH_WATERMARK:
        raise fail(f"--before expects an offset or end, got {text!r}", USAGE)
    return offset


def read_offsets_file(path: Path) -> dict[tuple[str, int], int]:
    """kafka-delete-records.sh's --offset-json-file: (topic, partition) -> offset."""
    try:
        document = json.loads(path.read_text())
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc.strerror or exc}", USAGE) from None
    except ValueError as exc:
        raise fail(f"{path} is not JSON: {exc}", USAGE) from None
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise fail(
            f'{path} must hold {{"partitions": [{{"topic": T, "partition": P,'
            ' "offset": O}, ...]}, as kafka-delete-records.sh reads it',
            USAGE,
        )
    offsets: dict[tuple[str, int], int] = {}
    for number, entry in enumerate(entries, 1):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        offset = entry.get("offset") if isinstance(entry, dict) else None
        if (
            not isinstance(topic, str)
            or not topic
            or not _is_int(partition)
            or not _is_int(offset)
            or partition < 0
            or offset < HIGH_WATERMARK
        ):
            raise fail(
                f"{path}: partition entry {number} needs a topic, a partition >= 0 and an"
                f" offset >= -1, got {json.dumps(entry)}",
                USAGE,
            )
        if (topic, partition) in offsets:
            raise fail(f"{path}: {topic}:{partition} is given twice", USAGE)
        offsets[topic, partition] = offset
    return offsets


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def delete_records(
    topic: Annotated[
        str | None,
        typer.Argument(help="The topic, with --partition and --before.", show_default=False),
    ] = None,
    partition: Annotated[
        list[int] | None,
        typer.Option("--partition", "-p", min=0, metavar="N", help="A partition; repeatable."),
    ] = None,
    before: Annotated[
        str | None,
        typer.Option(
            metavar="OFFSET",
            help="Delete the records before this offset (it becomes the log start"
            " offset); end: every record.",
        ),
    ] = None,
    offset_json_file: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="The partitions and offsets in kafka-delete-records.sh's JSON form,"
            " instead of TOPIC, --partition and --before.",
        ),
    ] = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Delete a topic's records before an offset, as kafka-delete-records.sh does."""
    if offset_json_file is not None:
        if topic is not None or partition or before is not None:
            raise fail(
                "--offset-json-file names its partitions; leave out TOPIC, -p and --before", USAGE
            )
        wanted = read_offsets_file(offset_json_file)
    else:
        if topic is None or not partition or before is None:
            raise fail(
                "give TOPIC --partition N --before OFFSET, or --offset-json-file FILE", USAGE
            )
        offset = parse_before(before)
        wanted = {(topic, p): offset for p in dict.fromkeys(partition)}

    from kafka import TopicPartition

    from herdless.admin.client import error_text
    from herdless.cli.client import connect

    with connect(bootstrap) as admin:
        missing = _missing_partitions(admin, wanted)
        if missing:
            raise fail(f"no such partition: {', '.join(missing)}")
        from kafka.errors import KafkaError

        try:
            done = admin.delete_records(
                {TopicPartition(t, p): offset for (t, p), offset in wanted.items()}
            )
        except KafkaError as exc:
            # kafka-python names one failed partition in its own words; ours say which.
            which = ", ".join(f"{t}:{p}" for t, p in wanted) if len(wanted) == 1 else "some"
            raise fail(f"cannot delete records of {which}: {error_text(type(exc))}") from None
    rows = [
        {"topic": tp.topic, "partition": tp.partition, "low_watermark": result["low_watermark"]}
        for tp, result in sorted(done.items())
    ]
    show(
        View(
            data=rows,
            tables=[
                Table(("TOPIC", "PARTITION", "LOW-WATERMARK"), [tuple(r.values()) for r in rows])
            ],
            notes=[
                f"deleted the records before the low watermark of {counted(len(rows), 'partition')}"
            ],
        ),
        output,
    )


def _missing_partitions(admin: object, wanted: dict[tuple[str, int], int]) -> list[str]:
    """`topic:partition` of each wanted partition the brokers do not know, in order."""
    topics = sorted({t for t, _ in wanted})
    described = admin.describe_topics(topics)  # type: ignore[attr-defined]
    known = {
        (t["name"], p["partition_index"])
        for t in described
        if t["error_code"] == 0
        for p in t["partitions"]
    }
    return [f"{t}:{p}" for t, p in wanted if (t, p) not in known]

"""`herdless groups reset-offsets`: move a group's committed offsets, as Kafka's tool does.

The rules are kafka-consumer-groups.sh --reset-offsets's: a dry run unless
--execute; only an inactive group (no member could overwrite the new offsets at
once); offsets outside a partition's log are clamped into [log start, log end],
with a warning; `--export` prints the plan as CSV (`topic,partition,offset`)
that `--from-file` reads back.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from herdless.admin.group_state import committed_offsets, describe_group
from herdless.admin.topic_state import log_offsets
from herdless.cli.client import connect
from herdless.cli.errors import USAGE, fail, warn
from herdless.cli.group_arguments import named_partitions, tp_text
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap
from herdless.cli.output import OutputOption, Table, View, show

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from kafka import KafkaAdminClient, TopicPartition

# Kafka's tool changes offsets only when no member could overwrite them right away.
INACTIVE_STATES = ("Empty", "Dead")

# java.time.Duration's text form, which Kafka's --by-duration takes: PnDTnHnMn.nS.
_DURATION = re.compile(
    r"P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+)(?:[.,](?P<fraction>\d{1,9}))?S)?)?",
    re.IGNORECASE,
)


# The options consumer groups' and share groups' reset-offsets share.
ResetTopics = Annotated[
    list[str] | None,
    typer.Option(
        "--topic",
        "-t",
        metavar="TOPIC[:P,...]",
        help="T (all its partitions) or T:p1,p2; repeatable.",
    ),
]
ToEarliest = Annotated[bool, typer.Option("--to-earliest", help="Log start offset.")]
ToLatest = Annotated[bool, typer.Option("--to-latest", help="Log end offset.")]
ToDatetime = Annotated[
    str | None,
    typer.Option(
        "--to-datetime",
        help="First offset with a timestamp at or after this ISO 8601 time "
        "(local time without a zone); log end if there is none.",
    ),
]
ToOffset = Annotated[int | None, typer.Option("--to-offset", help="This offset.")]


def parse_duration_ms(text: str) -> int:
    """ISO 8601 duration as java.time.Duration.parse reads it, in milliseconds."""
    match = _DURATION.fullmatch(text.strip())
    if not match or not any(match.groupdict().values()) or text.strip().upper().endswith("T"):
        raise fail(
            f"--by-duration expects an ISO 8601 duration such as P1DT2H30M, got {text!r}", USAGE
        )
    days, hours, minutes, seconds = (
        int(match[k] or 0) for k in ("days", "hours", "minutes", "seconds")
    )
    fraction_ms = int((match["fraction"] or "0").ljust(9, "0")) // 1_000_000
    return (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000 + fraction_ms


def parse_datetime_ms(value: str) -> int:
    """ISO 8601 to epoch milliseconds; without a zone it is local time, as in Kafka's tool."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise fail(
            f"--to-datetime expects ISO 8601 such as 2024-05-01T12:00:00.000+00:00, got {value!r}",
            USAGE,
        ) from None
    return int(moment.timestamp() * 1000)


def read_plan(path: Path, group_id: str) -> dict[TopicPartition, int]:
    """A CSV plan as `--export` writes it: `topic,partition,offset` lines, or
    `group,topic,partition,offset` (Kafka's form for several groups; other groups'
    lines are skipped)."""
    from kafka import TopicPartition

    try:
        text = path.read_text()
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc.strerror}", USAGE) from None
    plan: dict[TopicPartition, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = [f.strip() for f in line.split(",")]
        if fields == [""]:
            continue
        if len(fields) == 4:
            group, *fields = fields
            if group != group_id:
                continue
        try:
            topic, partition, offset = fields
            plan[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError:
            raise fail(
                f"{path}:{number}: expected topic,partition,offset, got {line!r}", USAGE
            ) from None
    if not plan:
        raise fail(f"{path} has no offsets for group {group_id!r}")
    return plan


def reset_offsets(
    group_id: Annotated[str, typer.Argument(metavar="GROUP")],
    topic: ResetTopics = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="Every topic the group has committed offsets for.")
    ] = False,
    to_earliest: ToEarliest = False,
    to_latest: ToLatest = False,
    to_current: Annotated[
        bool,
        typer.Option(
            "--to-current",
            help="The committed offset (log end where there is none): commits what is there.",
        ),
    ] = False,
    to_datetime: ToDatetime = None,
    by_duration: Annotated[
        str | None,
        typer.Option(
            "--by-duration",
            help="As --to-datetime, this long ago: an ISO 8601 duration, PnDTnHnMnS (PT30M).",
        ),
    ] = None,
    shift_by: Annotated[
        int | None, typer.Option("--shift-by", help="Committed offset plus N (N may be negative).")
    ] = None,
    to_offset: ToOffset = None,
    from_file: Annotated[
        Path | None,
        typer.Option("--from-file", help="The offsets in a CSV plan, as --export prints it."),
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Commit the new offsets; without it, a dry run.")
    ] = False,
    export: Annotated[
        bool,
        typer.Option("--export", help="Print the plan as CSV (topic,partition,offset) instead."),
    ] = False,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Reset a group's committed offsets, like kafka-consumer-groups.sh --reset-offsets.

    Prints the planned offsets and changes nothing unless --execute. The group must
    be inactive (no members). New offsets are clamped into [log start, log end].
    """
    modes = {
        "--to-earliest": to_earliest,
        "--to-latest": to_latest,
        "--to-current": to_current,
        "--to-datetime": to_datetime is not None,
        "--by-duration": by_duration is not None,
        "--shift-by": shift_by is not None,
        "--to-offset": to_offset is not None,
        "--from-file": from_file is not None,
    }
    one_mode(modes)
    if from_file is not None:
        if topic or all_topics:
            raise fail(
                "--from-file names its partitions; leave out --topic and --all-topics", USAGE
            )
    else:
        topics_or_all(topic, all_topics)
    timestamp_ms = None
    if to_datetime is not None:
        timestamp_ms = parse_datetime_ms(to_datetime)
    elif by_duration is not None:
        timestamp_ms = int(time.time() * 1000) - parse_duration_ms(by_duration)
    plan_file = read_plan(from_file, group_id) if from_file is not None else None

    with connect(bootstrap) as admin:
        group = describe_group(admin, group_id)
        if group.state not in INACTIVE_STATES:
            raise fail(
                f"the group must be inactive to reset its offsets, but group {group_id!r} is "
                f"{group.state} with {len(group.members)} member(s); stop its consumers first"
            )
        committed = committed_offsets(admin, group_id)
        if plan_file is not None:
            tps = sorted(plan_file)
        else:
            # Kafka's tool: --all-topics is all topics the group has committed offsets for.
            tps = partitions_to_reset(admin, topic, committed, "the group has no committed offsets")

        def wanted(ends: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
            if to_current:
                return {tp: committed.get(tp, ends[tp]) for tp in tps}
            if shift_by is not None:
                return _shifted(committed, tps, shift_by)
            assert plan_file is not None
            return plan_file

        planned = planned_offsets(
            admin,
            tps,
            to_earliest=to_earliest,
            to_latest=to_latest,
            to_offset=to_offset,
            timestamp_ms=timestamp_ms,
            otherwise=wanted,
        )
        if execute:
            _commit(admin, group_id, planned)

    if export:
        print("\n".join(f"{tp.topic},{tp.partition},{offset}" for tp, offset in planned.items()))
        return
    data = {
        "group": group_id,
        "executed": execute,
        "partitions": [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "current_offset": committed.get(tp),
                "new_offset": planned[tp],
            }
            for tp in tps
        ],
    }
    table = Table(
        ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
        [(group_id, tp.topic, tp.partition, committed.get(tp), planned[tp]) for tp in tps],
    )
    note = (
        f"committed new offsets for group {group_id}"
        if execute
        else "dry run: nothing was committed; add --execute to commit these offsets"
    )
    show(View(data, [table], notes=[note]), output)


def one_mode(modes: dict[str, bool]) -> None:
    """Exactly one way to reset, as Kafka's tools ask; a usage error naming them if not."""
    chosen = [name for name, on in modes.items() if on]
    if len(chosen) != 1:
        raise fail(
            f"give exactly one of {', '.join(modes)}"
            + (f" (got {' '.join(chosen)})" if chosen else ""),
            USAGE,
        )


def topics_or_all(topic: list[str] | None, all_topics: bool) -> None:
    if bool(topic) == all_topics:
        raise fail(
            "give --topic T[:p1,p2] (repeatable) or --all-topics, not both or neither", USAGE
        )


def partitions_to_reset(
    admin: KafkaAdminClient,
    topic: list[str] | None,
    held: Collection[TopicPartition],
    none_held: str,
) -> list[TopicPartition]:
    """The partitions named with --topic, or with --all-topics (no topic) every partition
    the group `held` an offset for; `none_held` says that there are none."""
    if topic:
        return named_partitions(admin, topic)
    if not held:
        raise fail(f"{none_held}; name topics with --topic")
    return sorted(held)


def planned_offsets(
    admin: KafkaAdminClient,
    tps: list[TopicPartition],
    *,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    timestamp_ms: int | None,
    otherwise: Callable[[dict[TopicPartition, int]], dict[TopicPartition, int]] | None = None,
) -> dict[TopicPartition, int]:
    """The new offsets, clamped into [log start, log end], by the ways to reset that both
    kinds of group have; `otherwise(log ends)` gives them for a command's own ways."""
    starts, ends = log_range(admin, tps)
    if to_earliest:
        wanted = dict(starts)
    elif to_latest:
        wanted = dict(ends)
    elif to_offset is not None:
        wanted = dict.fromkeys(tps, to_offset)
    elif timestamp_ms is not None:
        wanted = offsets_at_time(admin, tps, timestamp_ms, ends)
    else:
        assert otherwise is not None
        wanted = otherwise(ends)
    return {tp: clamped(tp, wanted[tp], starts[tp], ends[tp]) for tp in tps}


def log_range(
    admin: KafkaAdminClient, tps: list[TopicPartition]
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    from kafka.admin import OffsetSpec

    starts = log_offsets(admin, tps, OffsetSpec.EARLIEST)
    ends = log_offsets(admin, tps, OffsetSpec.LATEST)
    missing = [tp for tp in tps if tp not in starts or tp not in ends]
    if missing:
        raise fail("no such partition: " + ", ".join(map(tp_text, missing)))
    return starts, ends


def _shifted(
    committed: dict[TopicPartition, int], tps: list[TopicPartition], shift_by: int
) -> dict[TopicPartition, int]:
    without = [tp for tp in tps if tp not in committed]
    if without:
        raise fail(
            "cannot shift partitions with no committed offset: " + ", ".join(map(tp_text, without))
        )
    return {tp: committed[tp] + shift_by for tp in tps}


def offsets_at_time(
    admin: KafkaAdminClient,
    tps: list[TopicPartition],
    timestamp_ms: int,
    ends: dict[TopicPartition, int],
) -> dict[TopicPartition, int]:
    from kafka.admin import OffsetTimestamp

    found = admin.list_partition_offsets({tp: OffsetTimestamp(timestamp_ms) for tp in tps})
    # No record at or after the time: ListOffsets answers -1, which means log end.
    return {tp: found[tp].offset if found[tp].offset >= 0 else ends[tp] for tp in tps}


def clamped(tp: TopicPartition, offset: int, start: int, end: int) -> int:
    if offset > end:
        warn(f"new offset {offset} of {tp_text(tp)} is past its log end offset; using {end}")
        return end
    if offset < start:
        warn(f"new offset {offset} of {tp_text(tp)} is before its log start offset; using {start}")
        return start
    return offset


def _commit(admin: KafkaAdminClient, group_id: str, planned: dict[TopicPartition, int]) -> None:
    """A standalone commit (generation -1, no member id), as Kafka's tool makes; the
    coordinator refuses it if a member joined since the state was checked."""
    from kafka.errors import NoError
    from kafka.structs import OffsetAndMetadata

    errors = admin.alter_group_offsets(
        group_id, {tp: OffsetAndMetadata(offset, "", None) for tp, offset in planned.items()}
    )
    failed = {tp: e for tp, e in errors.items() if e is not NoError}
    if failed:
        raise fail(
            "the broker refused the new offsets: "
            + ", ".join(f"{tp_text(tp)} {e.message}" for tp, e in sorted(failed.items()))
        )

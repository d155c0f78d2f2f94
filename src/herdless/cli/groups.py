"""`herdless groups`: list, describe, show the lag of, reset and delete consumer groups.

Like `herdless topics` it is an ordinary Kafka client (kafka-python's admin
client), so it works against any Kafka-compatible broker. Its numbers and rules
follow Kafka's kafka-consumer-groups.sh, so an operator reads the same thing
from either tool: '-' where a partition has no committed offset, lag as log end
minus committed offset, resets only on an inactive group and as a dry run
unless --execute.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import typer
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import OffsetSpec, OffsetTimestamp
from kafka.errors import (
    GroupIdNotFoundError,
    NoError,
    NonEmptyGroupError,
    UnsupportedVersionError,
)
from kafka.structs import OffsetAndMetadata
from rich.console import Group as Renderables
from rich.live import Live
from rich.table import Table
from rich.text import Text

from herdless.cli.client import Bootstrap, connect, console, fail
from herdless.cli.history import history

groups_app = typer.Typer(
    help="List, describe, show the lag of, reset offsets of and delete consumer groups.",
    no_args_is_help=True,
)
groups_app.command("history")(history)

# The classic protocol's states, spelled as brokers report them; --state accepts
# any case, as Kafka's tool does.
STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
# Kafka's tool resets offsets only when no member could overwrite them right away.
INACTIVE_STATES = ("Empty", "Dead")

NONE = "-"


# ---------------------------------------------------------------------------
# What the commands show
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    # None when the assignment is not in the consumer protocol's format (or the
    # group is rebalancing and the broker sends none).
    partitions: tuple[TopicPartition, ...] | None


@dataclass(frozen=True, slots=True)
class GroupInfo:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[Member, ...]

    @property
    def exists(self) -> bool:
        return self.state != "Dead"


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    tp: TopicPartition
    committed: int | None  # None: the group has no committed offset here
    log_end: int | None  # None: the topic or partition no longer exists
    owner: Member | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return self.log_end - self.committed


# ---------------------------------------------------------------------------
# Talking to the broker
# ---------------------------------------------------------------------------


def _describe_many(admin: KafkaAdminClient, group_ids: Iterable[str]) -> dict[str, GroupInfo]:
    """One DescribeGroups per coordinator for all the groups."""
    ids = list(dict.fromkeys(group_ids))
    if not ids:
        return {}
    described = admin.describe_groups(ids)
    return {group_id: _group_info(group_id, described[group_id]) for group_id in ids}


def _describe(admin: KafkaAdminClient, group_id: str) -> GroupInfo:
    return _describe_many(admin, [group_id])[group_id]


def _group_info(group_id: str, raw: Mapping[str, Any]) -> GroupInfo:
    if raw.get("error"):
        # DescribeGroups v6+ names an unknown group an error; before, it is just Dead.
        if "GroupIdNotFound" in raw["error"]:
            return GroupInfo(group_id, "Dead", "", "", ())
        raise fail(f"cannot describe group {group_id!r}: {raw['error']}")
    members = tuple(
        sorted(
            (
                Member(
                    member_id=m["member_id"],
                    client_id=m["client_id"],
                    host=m["client_host"],
                    instance_id=m.get("group_instance_id"),
                    partitions=_assigned(m.get("member_assignment")),
                )
                for m in raw["members"]
            ),
            key=lambda m: (m.client_id, m.member_id),
        )
    )
    return GroupInfo(
        group_id,
        raw["group_state"],
        raw["protocol_type"],
        raw.get("protocol_data") or "",
        members,
    )


def _assigned(assignment: object) -> tuple[TopicPartition, ...] | None:
    """Partitions of a member's assignment, which kafka-python has already decoded
    from the consumer protocol's bytes when they were in that format."""
    if not isinstance(assignment, Mapping) or "assigned_partitions" not in assignment:
        return None
    return tuple(
        sorted(
            TopicPartition(entry["topic"], partition)
            for entry in assignment["assigned_partitions"]
            for partition in entry["partitions"]
        )
    )


def _require_group(group: GroupInfo) -> None:
    if not group.exists:
        raise fail(f"consumer group {group.group_id!r} does not exist")


def _committed(admin: KafkaAdminClient, group_id: str) -> dict[TopicPartition, int]:
    fetched = admin.list_group_offsets({group_id: None}).get(group_id, {})
    # -1 is how OffsetFetch says "nothing committed here".
    return {tp: oam.offset for tp, oam in fetched.items() if oam.offset >= 0}


def _partition_counts(admin: KafkaAdminClient, topics: Iterable[str]) -> dict[str, int]:
    """Partition count of each topic that exists; missing topics are left out."""
    names = sorted(set(topics))
    if not names:
        return {}
    return {
        t["name"]: len(t["partitions"])
        for t in admin.describe_topics(names)
        if t["error_code"] == 0
    }


def _log_offsets(
    admin: KafkaAdminClient, tps: Iterable[TopicPartition], spec: OffsetSpec
) -> dict[TopicPartition, int]:
    """ListOffsets for the partitions that exist; the others are simply absent
    (a group keeps its offsets for a topic after the topic is deleted)."""
    tps = set(tps)
    counts = _partition_counts(admin, (tp.topic for tp in tps))
    present = {tp: spec for tp in tps if tp.partition < counts.get(tp.topic, 0)}
    if not present:
        return {}
    return {tp: o.offset for tp, o in admin.list_partition_offsets(present).items()}


def _partition_offsets(admin: KafkaAdminClient, group: GroupInfo) -> list[PartitionOffsets]:
    """Kafka's rows: every partition a member owns, and every partition with a
    committed offset that no member owns (its consumer columns show '-')."""
    committed = _committed(admin, group.group_id)
    owners = {tp: m for m in group.members for tp in m.partitions or ()}
    tps = sorted(set(committed) | set(owners))
    ends = _log_offsets(admin, tps, OffsetSpec.LATEST)
    return [PartitionOffsets(tp, committed.get(tp), ends.get(tp), owners.get(tp)) for tp in tps]


def _show(value: object) -> str:
    return NONE if value is None or value == "" else str(value)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _format_partitions(partitions: tuple[TopicPartition, ...] | None) -> str:
    if partitions is None:
        return NONE
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}[{','.join(map(str, ps))}]" for t, ps in by_topic.items()) or NONE


# ---------------------------------------------------------------------------
# list
# ---------------------------------------------------------------------------


def _canonical_states(states: Iterable[str]) -> list[str]:
    by_lower = {s.lower(): s for s in STATES}
    canonical = []
    for state in states:
        if state.lower() not in by_lower:
            raise fail(f"unknown group state {state!r}; states are {', '.join(STATES)}")
        canonical.append(by_lower[state.lower()])
    return canonical


@groups_app.command("list")
def list_groups(
    state: Annotated[
        list[str] | None,
        typer.Option(
            "--state", "-s", help=f"Only groups in this state; repeatable: {', '.join(STATES)}."
        ),
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
) -> None:
    """List consumer groups with their state, protocol type and member count."""
    states = _canonical_states(state or [])
    with connect(bootstrap) as admin:
        try:
            listed = admin.list_groups(states_filter=states or None)
        except UnsupportedVersionError:
            # ListGroups before v4 has no state filter; filter below instead.
            listed = admin.list_groups()
        ids = sorted({g["group_id"] for g in listed})
        groups = list(_describe_many(admin, ids).values())
    # Filter again on the described state: it is what the table shows, and some
    # brokers ignore the filter.
    shown = [g for g in groups if not states or g.state in states]
    if not shown:
        console.print("no consumer groups" + (f" in state {', '.join(states)}" if states else ""))
        return
    table = Table("group", "state", "protocol type", "members")
    for g in shown:
        table.add_row(g.group_id, g.state, _show(g.protocol_type), str(len(g.members)))
    console.print(table)


# ---------------------------------------------------------------------------
# describe
# ---------------------------------------------------------------------------


@groups_app.command("describe")
def describe(
    group_id: Annotated[str, typer.Argument(metavar="GROUP")],
    bootstrap: Bootstrap = "127.0.0.1:9092",
) -> None:
    """Show a group's state, members and their partitions, and per-partition offsets and lag."""
    with connect(bootstrap) as admin:
        group = _describe(admin, group_id)
        _require_group(group)
        rows = _partition_offsets(admin, group)
    # DescribeGroups carries no generation, so none is shown.
    console.print(
        f"group [bold]{group.group_id}[/bold]  state {group.state}  "
        f"protocol type {_show(group.protocol_type)}  assignor {_show(group.protocol)}  "
        f"members {len(group.members)}",
        highlight=False,
    )
    if group.members:
        members = Table("member id", "client id", "host", "group.instance.id", "partitions")
        for m in group.members:
            members.add_row(
                m.member_id,
                m.client_id,
                m.host,
                _show(m.instance_id),
                _format_partitions(m.partitions),
            )
        console.print(members)
    else:
        console.print(f"consumer group {group.group_id!r} has no active members", highlight=False)
    if not rows:
        console.print("no committed offsets and no assigned partitions")
        return
    offsets = Table(
        "topic",
        "partition",
        "current offset",
        "log end offset",
        "lag",
        "consumer id",
        "host",
        "client id",
    )
    for row in rows:
        offsets.add_row(
            row.tp.topic,
            str(row.tp.partition),
            _show(row.committed),
            _show(row.log_end),
            _show(row.lag),
            _show(row.owner and row.owner.member_id),
            _show(row.owner and row.owner.host),
            _show(row.owner and row.owner.client_id),
        )
    console.print(offsets)


# ---------------------------------------------------------------------------
# lag
# ---------------------------------------------------------------------------


def _lag_view(group: GroupInfo, rows: list[PartitionOffsets], stamped: bool) -> Renderables:
    table = Table("topic", "partition", "current offset", "log end offset", "lag")
    for row in rows:
        table.add_row(
            row.tp.topic,
            str(row.tp.partition),
            _show(row.committed),
            _show(row.log_end),
            _show(row.lag),
        )
    total = sum(row.lag or 0 for row in rows)
    summary = f"total lag {total} over {_count(len(rows), 'partition')}"
    uncommitted = sum(1 for row in rows if row.committed is None)
    if uncommitted:
        # Kafka's tool shows '-' for these; saying how many keeps the total honest.
        summary += f"; {uncommitted} without a committed offset (not counted)"
    header = f"group {group.group_id}  state {group.state}"
    if stamped:
        # When watching, the time shows that the view is live and how fresh it is.
        header += f"  at {datetime.now().isoformat(sep=' ', timespec='seconds')}"
    return Renderables(Text(header), table, Text(summary))


@groups_app.command("lag")
def lag(
    group_id: Annotated[str, typer.Argument(metavar="GROUP")],
    watch: Annotated[
        float | None,
        typer.Option("--watch", "-w", min=0.1, help="Refresh every SECONDS until Ctrl-C."),
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
) -> None:
    """Per-partition lag (log end offset - committed offset) of a group, and the total."""
    with connect(bootstrap) as admin:

        def snapshot() -> Renderables:
            group = _describe(admin, group_id)
            _require_group(group)
            return _lag_view(group, _partition_offsets(admin, group), stamped=watch is not None)

        view = snapshot()
        if watch is None:
            console.print(view)
            return
        try:
            if console.is_terminal:
                with Live(view, console=console, auto_refresh=False) as live:
                    while True:
                        time.sleep(watch)
                        live.update(snapshot(), refresh=True)
            else:
                # Piped to a file or another program: one snapshot after another.
                while True:
                    console.print(view)
                    time.sleep(watch)
                    view = snapshot()
        except KeyboardInterrupt:
            return


# ---------------------------------------------------------------------------
# reset-offsets
# ---------------------------------------------------------------------------


def _parse_topic(spec: str) -> tuple[str, list[int] | None]:
    """'T' is every partition of T; 'T:0,2' is partitions 0 and 2."""
    name, sep, parts = spec.partition(":")
    if not name:
        raise fail(f"--topic expects T or T:p1,p2, got {spec!r}")
    if not sep:
        return name, None
    try:
        partitions = [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise fail(f"--topic expects T or T:p1,p2 with partition numbers, got {spec!r}") from None
    if not partitions:
        raise fail(f"--topic {spec!r} names no partitions")
    return name, partitions


def _parse_datetime(value: str) -> int:
    """ISO 8601 to epoch milliseconds; without a zone it is local time, as in Kafka's tool."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise fail(
            f"--to-datetime expects ISO 8601 such as 2024-05-01T12:00:00.000+00:00, got {value!r}"
        ) from None
    return int(moment.timestamp() * 1000)


def _partitions_to_reset(
    admin: KafkaAdminClient,
    topics: list[str],
    all_topics: bool,
    committed: Mapping[TopicPartition, int],
) -> list[TopicPartition]:
    if all_topics:
        # Kafka's tool: all topics the group has committed offsets for.
        if not committed:
            raise fail("the group has no committed offsets; name topics with --topic")
        return sorted(committed)
    wanted = [_parse_topic(spec) for spec in topics]
    counts = _partition_counts(admin, (name for name, _ in wanted))
    tps: set[TopicPartition] = set()
    for name, partitions in wanted:
        if name not in counts:
            raise fail(f"topic {name!r} does not exist")
        for p in partitions if partitions is not None else range(counts[name]):
            if not 0 <= p < counts[name]:
                raise fail(f"topic {name!r} has no partition {p} (it has {counts[name]})")
            tps.add(TopicPartition(name, p))
    return sorted(tps)


@groups_app.command("reset-offsets")
def reset_offsets(
    group_id: Annotated[str, typer.Argument(metavar="GROUP")],
    topic: Annotated[
        list[str] | None,
        typer.Option("--topic", "-t", help="T (all its partitions) or T:p1,p2; repeatable."),
    ] = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="Every topic the group has committed offsets for.")
    ] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Log start offset.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Log end offset.")] = False,
    to_datetime: Annotated[
        str | None,
        typer.Option(
            "--to-datetime",
            help="First offset with a timestamp at or after this ISO 8601 time "
            "(local time without a zone); log end if there is none.",
        ),
    ] = None,
    shift_by: Annotated[
        int | None, typer.Option("--shift-by", help="Committed offset plus N (N may be negative).")
    ] = None,
    to_offset: Annotated[int | None, typer.Option("--to-offset", help="This offset.")] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Commit the new offsets; without it, a dry run.")
    ] = False,
    bootstrap: Bootstrap = "127.0.0.1:9092",
) -> None:
    """Reset a group's committed offsets, like kafka-consumer-groups.sh --reset-offsets.

    Prints the planned offsets and changes nothing unless --execute. The group must
    be inactive (no members). New offsets are clamped into [log start, log end].
    """
    modes = {
        "--to-earliest": to_earliest,
        "--to-latest": to_latest,
        "--to-datetime": to_datetime is not None,
        "--shift-by": shift_by is not None,
        "--to-offset": to_offset is not None,
    }
    chosen = [name for name, on in modes.items() if on]
    if len(chosen) != 1:
        raise fail(
            f"give exactly one of {', '.join(modes)}"
            + (f" (got {' '.join(chosen)})" if chosen else "")
        )
    if bool(topic) == all_topics:
        raise fail("give --topic T[:p1,p2] (repeatable) or --all-topics, not both or neither")
    timestamp_ms = _parse_datetime(to_datetime) if to_datetime is not None else None

    with connect(bootstrap) as admin:
        group = _describe(admin, group_id)
        if group.state not in INACTIVE_STATES:
            raise fail(
                f"the group must be inactive to reset its offsets, but group {group_id!r} is "
                f"{group.state} with {_count(len(group.members), 'member')}; "
                "stop its consumers first"
            )
        committed = _committed(admin, group_id)
        tps = _partitions_to_reset(admin, topic or [], all_topics, committed)
        starts = _log_offsets(admin, tps, OffsetSpec.EARLIEST)
        ends = _log_offsets(admin, tps, OffsetSpec.LATEST)
        missing = [tp for tp in tps if tp not in starts or tp not in ends]
        if missing:
            raise fail(
                "no such partition: " + ", ".join(f"{tp.topic}:{tp.partition}" for tp in missing)
            )

        wanted: dict[TopicPartition, int]
        if to_earliest:
            wanted = {tp: starts[tp] for tp in tps}
        elif to_latest:
            wanted = {tp: ends[tp] for tp in tps}
        elif to_offset is not None:
            wanted = dict.fromkeys(tps, to_offset)
        elif shift_by is not None:
            without = [tp for tp in tps if tp not in committed]
            if without:
                raise fail(
                    "cannot shift partitions with no committed offset: "
                    + ", ".join(f"{tp.topic}:{tp.partition}" for tp in without)
                )
            wanted = {tp: committed[tp] + shift_by for tp in tps}
        else:
            assert timestamp_ms is not None
            found = admin.list_partition_offsets({tp: OffsetTimestamp(timestamp_ms) for tp in tps})
            # No record at or after the time: ListOffsets answers -1, which means log end.
            wanted = {tp: found[tp].offset if found[tp].offset >= 0 else ends[tp] for tp in tps}
        planned = {tp: min(max(wanted[tp], starts[tp]), ends[tp]) for tp in tps}

        if execute:
            # A standalone commit (generation -1, no member id), as Kafka's tool makes;
            # the coordinator refuses it if a member joined since the check above.
            errors = admin.alter_group_offsets(
                group_id,
                {tp: OffsetAndMetadata(offset, "", None) for tp, offset in planned.items()},
            )
            failed = {tp: e for tp, e in errors.items() if e is not NoError}
            if failed:
                raise fail(
                    "the broker refused the new offsets: "
                    + ", ".join(
                        f"{tp.topic}:{tp.partition} {e.message}" for tp, e in sorted(failed.items())
                    )
                )

    table = Table("topic", "partition", "current offset", "new offset")
    for tp in tps:
        table.add_row(tp.topic, str(tp.partition), _show(committed.get(tp)), str(planned[tp]))
    console.print(table)
    if execute:
        console.print(f"committed new offsets for group [bold]{group_id}[/bold]")
    else:
        console.print("dry run: nothing was committed; add --execute to commit these offsets")


# ---------------------------------------------------------------------------
# delete
# ---------------------------------------------------------------------------


_DELETE_ERRORS = {
    NonEmptyGroupError.__name__: "the group is not empty (it has active members); stop them first",
    GroupIdNotFoundError.__name__: "the group does not exist",
}


@groups_app.command("delete")
def delete(
    group_ids: Annotated[list[str], typer.Argument(metavar="GROUP...")],
    bootstrap: Bootstrap = "127.0.0.1:9092",
) -> None:
    """Delete inactive consumer groups and their committed offsets."""
    with connect(bootstrap) as admin:
        results = admin.delete_groups(list(dict.fromkeys(group_ids)))
    failed = False
    for group_id in dict.fromkeys(group_ids):
        outcome = results.get(group_id, "no answer from the broker")
        if outcome == "OK":
            console.print(f"deleted group [bold]{group_id}[/bold]")
        else:
            failed = True
            reason = _DELETE_ERRORS.get(outcome, outcome)
            console.print(
                f"[red]error:[/red] cannot delete group {group_id!r}: {reason}", highlight=False
            )
    if failed:
        raise typer.Exit(1)

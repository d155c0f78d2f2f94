"""`herdless share-groups`: list, describe, reset the offsets of and delete share groups.

Kafka's kafka-share-groups.sh is the model: `describe` shows each partition's start
offset and lag (--offsets, the default), the members and their assignments (--members)
or the group's state (--state); `reset-offsets` is a dry run unless --execute and needs
the group Empty; `delete` takes the group's share state with it. A share group has no
committed offsets: its start offset is where its in-flight window begins, every record
before it settled (admin/share_group_state.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from herdless.admin.cells import format_partitions
from herdless.admin.client import error_text, find_coordinators
from herdless.admin.errors import AdminError
from herdless.admin.group_info import GroupInfo, Member
from herdless.admin.share_group_state import (
    ShareOffsets,
    ShareStart,
    alter_share_group_offsets,
    delete_share_group_offsets,
    describe_share_group,
    describe_share_groups,
    list_share_group_ids,
    share_offset_rows,
    start_offsets,
)
from herdless.cli.client import connect
from herdless.cli.errors import USAGE, error, fail
from herdless.cli.group_arguments import parse_topic, tp_text
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, command_group
from herdless.cli.output import Output, OutputOption, Table, View, chosen, say, show
from herdless.cli.reset_offsets import (
    ResetTopics,
    ToDatetime,
    ToEarliest,
    ToLatest,
    ToOffset,
    one_mode,
    parse_datetime_ms,
    partitions_to_reset,
    planned_offsets,
    topics_or_all,
)

if TYPE_CHECKING:
    from kafka import TopicPartition

share_groups_app = command_group(
    "List, describe, reset the offsets of and delete share groups (KIP-932)."
)

GroupArgument = Annotated[str, typer.Argument(metavar="GROUP")]
OFFSET_COLUMNS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "START-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "IN-FLIGHT",
    "ARCHIVED",
)
MEMBER_COLUMNS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
STATE_COLUMNS = ("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "#MEMBERS")


@share_groups_app.command("list")
def list_groups(
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """List share groups with their state and member count."""
    with connect(bootstrap) as admin:
        groups = describe_share_groups(admin, list_share_group_ids(admin)).values()
    data = [{"group": g.group_id, "state": g.state, "members": len(g.members)} for g in groups]
    table = Table(("GROUP", "STATE", "MEMBERS"), [tuple(d.values()) for d in data])
    show(View(data, [table], notes=[] if data else ["no share groups"]), output)


def _member_json(m: Member) -> dict[str, Any]:
    return {
        "consumer_id": m.member_id,
        "host": m.host,
        "client_id": m.client_id,
        "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in m.partitions or ()],
    }


def _offset_json(row: ShareOffsets) -> dict[str, Any]:
    return {
        "topic": row.tp.topic,
        "partition": row.tp.partition,
        "start_offset": row.start_offset,
        "log_end_offset": row.log_end,
        "lag": row.lag,
        "in_flight": row.in_flight,
        "archived": row.archived,
        "consumer_ids": [m.member_id for m in row.owners],
    }


def _group_json(
    group: GroupInfo, coordinator: str | None, rows: list[ShareOffsets]
) -> dict[str, Any]:
    return {
        "group": group.group_id,
        "state": group.state,
        "coordinator": coordinator,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.target_assignment_epoch,
        "assignor": group.protocol or None,
        "members": [_member_json(m) for m in group.members],
        "offsets": [_offset_json(row) for row in rows],
        "total_lag": sum(row.lag or 0 for row in rows),
    }


@share_groups_app.command("describe")
def describe(
    group_ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="GROUP", help="A group to describe; several may be given.", show_default=False
        ),
    ] = None,
    all_groups: Annotated[
        bool, typer.Option("--all-groups", help="Every share group the brokers know.")
    ] = False,
    offsets: Annotated[
        bool,
        typer.Option("--offsets", help="Per partition: start offset and lag (the default)."),
    ] = False,
    members: Annotated[
        bool, typer.Option("--members", help="Per member: ids, host and assigned partitions.")
    ] = False,
    state: Annotated[
        bool, typer.Option("--state", help="Per group: coordinator, state, epoch, member count.")
    ] = False,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Describe share groups as kafka-share-groups.sh --describe does: each partition's
    start offset and lag (log end offset - start offset), or the members (--members),
    or the state (--state).

    IN-FLIGHT (records not settled yet) and ARCHIVED (archived unaccepted, in the
    in-flight window) are herdless's, told where the group's coordinator leads the
    partition; '-' elsewhere.

    JSON output always holds all three.
    """
    if bool(group_ids) == all_groups:
        raise fail("name groups or give --all-groups, not both or neither", USAGE)
    if offsets + members + state > 1:
        raise fail("give at most one of --offsets, --members, --state", USAGE)
    mode = chosen(output)
    with connect(bootstrap) as admin:
        ids = list_share_group_ids(admin) if all_groups else list(dict.fromkeys(group_ids or []))
        infos = describe_share_groups(admin, ids)
        missing = [g for g in ids if g not in infos]
        if missing:
            raise fail(f"share group {missing[0]!r} does not exist")
        groups = [infos[g] for g in ids]
        rows: dict[str, list[ShareOffsets]] = {}
        if mode is Output.JSON or not (members or state):
            rows = {g.group_id: share_offset_rows(admin, g) for g in groups}
        coordinators: dict[str, str] = {}
        if mode is Output.JSON or state:
            coordinators = find_coordinators(admin, [g.group_id for g in groups])
    data = [_group_json(g, coordinators.get(g.group_id), rows.get(g.group_id, [])) for g in groups]
    if state:
        table = Table(
            STATE_COLUMNS,
            [
                (g.group_id, coordinators.get(g.group_id), g.state, g.group_epoch, len(g.members))
                for g in groups
            ],
        )
        show(View(data, [table]), output)
        return
    notes = [f"share group {g.group_id!r} has no active members" for g in groups if not g.members]
    if members:
        table = Table(
            MEMBER_COLUMNS,
            [
                (
                    g.group_id,
                    m.member_id,
                    m.host,
                    m.client_id,
                    len(m.partitions or ()),
                    format_partitions(m.partitions),
                )
                for g in groups
                for m in g.members
            ],
        )
        show(View(data, [table], notes=notes), output)
        return
    table = Table(
        OFFSET_COLUMNS,
        [
            (
                g.group_id,
                r.tp.topic,
                r.tp.partition,
                r.start_offset,
                r.log_end,
                r.lag,
                r.in_flight,
                r.archived,
            )
            for g in groups
            for r in rows[g.group_id]
        ],
    )
    unstarted = sum(1 for g in groups for r in rows[g.group_id] if r.start_offset is None)
    if unstarted:
        notes.append(
            f"{unstarted} assigned partition(s) not read yet: no start offset until the first fetch"
        )
    show(View(data, [table], notes=notes), output)


@share_groups_app.command("reset-offsets")
def reset_offsets(
    group_id: GroupArgument,
    topic: ResetTopics = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="Every topic the group has start offsets for.")
    ] = False,
    to_earliest: ToEarliest = False,
    to_latest: ToLatest = False,
    to_datetime: ToDatetime = None,
    to_offset: ToOffset = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the new start offsets only (the default).")
    ] = False,
    execute: Annotated[
        bool, typer.Option("--execute", help="Set the new start offsets; without it, a dry run.")
    ] = False,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Move a share group's start offsets, like kafka-share-groups.sh --reset-offsets.

    Prints the planned start offsets and changes nothing unless --execute. The group
    must be Empty (no members). New offsets are clamped into [log start, log end]; the
    records from a new start are delivered again, as if never delivered.
    """
    modes = {
        "--to-earliest": to_earliest,
        "--to-latest": to_latest,
        "--to-datetime": to_datetime is not None,
        "--to-offset": to_offset is not None,
    }
    one_mode(modes)
    if dry_run and execute:
        raise fail("give --dry-run or --execute, not both", USAGE)
    topics_or_all(topic, all_topics)
    timestamp_ms = parse_datetime_ms(to_datetime) if to_datetime is not None else None
    with connect(bootstrap) as admin:
        group = describe_share_group(admin, group_id)
        if group.state != "Empty":
            raise fail(
                f"the share group must be Empty to reset its offsets, but {group_id!r} is"
                f" {group.state} with {len(group.members)} member(s); stop its consumers first"
            )
        current = start_offsets(admin, group_id)
        tps = partitions_to_reset(admin, topic, current, "the share group has no start offsets")
        planned = planned_offsets(
            admin,
            tps,
            to_earliest=to_earliest,
            to_latest=to_latest,
            to_offset=to_offset,
            timestamp_ms=timestamp_ms,
        )
        if execute:
            _alter(admin, group_id, planned)
    data = {
        "group": group_id,
        "executed": execute,
        "partitions": [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "start_offset": _start(current.get(tp)),
                "new_start_offset": planned[tp],
            }
            for tp in tps
        ],
    }
    table = Table(
        ("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "NEW-START-OFFSET"),
        [(group_id, tp.topic, tp.partition, _start(current.get(tp)), planned[tp]) for tp in tps],
    )
    note = (
        f"set new start offsets for share group {group_id}"
        if execute
        else "dry run: nothing was changed; add --execute to set these start offsets"
    )
    show(View(data, [table], notes=[note]), output)


def _start(start: ShareStart | None) -> int | None:
    return None if start is None else start.start_offset


def _alter(admin: Any, group_id: str, planned: dict[TopicPartition, int]) -> None:
    try:
        failures = alter_share_group_offsets(admin, group_id, planned)
    except AdminError as exc:
        raise fail(str(exc)) from None
    failed = {tp: e for tp, e in failures.items() if e is not None}
    if failed:
        raise fail(
            "the broker refused the new start offsets: "
            + ", ".join(f"{tp_text(tp)} {e}" for tp, e in sorted(failed.items()))
        )


@share_groups_app.command("delete")
def delete(
    group_ids: Annotated[list[str], typer.Argument(metavar="GROUP...")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Delete Empty share groups and their share state (start offsets, in-flight records)."""
    from kafka import errors

    ids = list(dict.fromkeys(group_ids))
    with connect(bootstrap) as admin:
        found = describe_share_groups(admin, ids)
        results = admin.delete_groups([g for g in ids if g in found]) if found else {}
    failed = False
    for group_id in ids:
        if group_id not in found:
            failed = True
            error(f"cannot delete share group {group_id!r}: the share group does not exist")
            continue
        outcome = results.get(group_id, "no answer from the broker")
        if outcome == "OK":
            say(f"deleted share group {group_id}")
            continue
        failed = True
        if outcome == "NonEmptyGroupError":
            words = "the group has active members; stop them first"
        else:
            error_class = getattr(errors, outcome, None)
            words = error_text(error_class) if error_class is not None else outcome
        error(f"cannot delete share group {group_id!r}: {words}")
    if failed:
        raise typer.Exit(1)


@share_groups_app.command("delete-offsets")
def delete_offsets(
    group_id: GroupArgument,
    topic: Annotated[
        list[str],
        typer.Option(
            "--topic", "-t", metavar="TOPIC", help="A topic whose start offsets go; repeatable."
        ),
    ],
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Delete a share group's start offsets for whole topics (DeleteShareGroupOffsets);
    the group reads them again from where share.auto.offset.reset says. The group must
    be Empty."""
    names = []
    for spec in topic:
        name, partitions = parse_topic(spec)
        if partitions is not None:
            raise fail(
                "a share group's offsets are deleted for whole topics: give --topic T", USAGE
            )
        names.append(name)
    with connect(bootstrap) as admin:
        describe_share_group(admin, group_id)
        try:
            outcomes = delete_share_group_offsets(admin, group_id, names)
        except AdminError as exc:
            raise fail(str(exc)) from None
    data = [{"topic": t, "error": outcomes.get(t)} for t in dict.fromkeys(names)]
    rows = [(d["topic"], d["error"] or "deleted") for d in data]
    show(View(data, [Table(("TOPIC", "STATUS"), rows)]), output)
    failed = [d["topic"] for d in data if d["error"] is not None]
    if failed:
        raise fail(f"the start offsets of {', '.join(failed)} were not deleted")

"""`herdless groups`: list, describe, show the lag of, reset and delete consumer groups.

Like `herdless topics` it is an ordinary Kafka client (kafka-python's admin
client), so it works against any Kafka-compatible broker. Its views and options
follow Kafka's kafka-consumer-groups.sh (`describe --members`, `--state`,
`--all-groups`; `-` where there is no value), so an operator reads the same
thing from either tool.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from herdless.admin.cells import format_partitions
from herdless.admin.client import error_text, find_coordinators
from herdless.admin.group_info import CONSUMER, SHARE, STATES, GroupInfo, Member
from herdless.admin.group_state import (
    PartitionOffsets,
    committed_offsets,
    describe_group,
    describe_groups,
    list_group_ids,
    partition_offsets,
    uncommitted_note,
)
from herdless.cli.client import connect
from herdless.cli.errors import USAGE, error, fail
from herdless.cli.group_arguments import canonical_states, parse_topic, require_existing, tp_text
from herdless.cli.group_configs import configs
from herdless.cli.history import history
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, command_group
from herdless.cli.output import Output, OutputOption, Table, View, chosen, say, show
from herdless.cli.reset_offsets import reset_offsets

if TYPE_CHECKING:
    from kafka import KafkaAdminClient, TopicPartition

groups_app = command_group(
    "List, describe, show the lag of, reset offsets of and delete consumer groups."
)
groups_app.command("history")(history)
groups_app.command("configs")(configs)
groups_app.command("reset-offsets")(reset_offsets)

GroupArgument = Annotated[str, typer.Argument(metavar="GROUP")]
OFFSET_COLUMNS = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")
CONSUMER_COLUMNS = ("CONSUMER-ID", "HOST", "CLIENT-ID")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _offset_cells(row: PartitionOffsets) -> tuple[object, ...]:
    return (row.tp.topic, row.tp.partition, row.committed, row.log_end, row.lag)


def _consumer_cells(row: PartitionOffsets) -> tuple[object, ...]:
    owner = row.owner
    return (owner and owner.member_id, owner and owner.host, owner and owner.client_id)


def _offset_json(row: PartitionOffsets) -> dict[str, Any]:
    owner = row.owner
    return {
        "topic": row.tp.topic,
        "partition": row.tp.partition,
        "current_offset": row.committed,
        "log_start_offset": row.log_start,
        "log_end_offset": row.log_end,
        "lag": row.lag,
        "consumer_id": owner and owner.member_id,
        "host": owner and owner.host,
        "client_id": owner and owner.client_id,
    }


def _total_lag(rows: list[PartitionOffsets]) -> int:
    return sum(row.lag or 0 for row in rows)


# ---------------------------------------------------------------------------
# list
# ---------------------------------------------------------------------------


@groups_app.command("list")
def list_groups(
    state: Annotated[
        list[str] | None,
        typer.Option(
            "--state",
            "-s",
            metavar="STATE",
            help=f"Only groups in this state; repeatable: {', '.join(STATES)}.",
        ),
    ] = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """List consumer groups with their state, protocol type and member count."""
    states = canonical_states(state or [])
    with connect(bootstrap) as admin:
        groups = describe_groups(admin, list_group_ids(admin, states)).values()
    # Filter again on the described state: it is what is shown, and some brokers
    # ignore the filter.
    shown = [g for g in groups if not states or g.state in states]
    data = [
        {
            "group": g.group_id,
            "state": g.state,
            "protocol_type": g.protocol_type or None,
            "members": len(g.members),
        }
        for g in shown
    ]
    table = Table(("GROUP", "STATE", "PROTOCOL-TYPE", "MEMBERS"), [tuple(d.values()) for d in data])
    # The group's type (classic, consumer or share) beside what the table shows of it.
    for d, g in zip(data, shown, strict=True):
        d["type"] = g.group_protocol
    notes = (
        []
        if shown
        else ["no consumer groups" + (f" in state {', '.join(states)}" if states else "")]
    )
    show(View(data, [table], notes=notes), output)


# ---------------------------------------------------------------------------
# describe
# ---------------------------------------------------------------------------


def _group_notes(group: GroupInfo) -> list[str]:
    """What Kafka's tool says beside a group's rows."""
    if group.group_protocol == SHARE:
        return [f"{group.group_id!r} is a share group: `herdless share-groups describe` shows it"]
    if not group.members:
        return [f"consumer group {group.group_id!r} has no active members"]
    if group.state in ("PreparingRebalance", "CompletingRebalance"):
        return [f"consumer group {group.group_id!r} is rebalancing"]
    return []


def _partitions_json(partitions: tuple[TopicPartition, ...] | None) -> list[dict[str, Any]] | None:
    if partitions is None:
        return None
    return [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]


def _member_json(m: Member) -> dict[str, Any]:
    r = m.reconciliation
    return {
        "consumer_id": m.member_id,
        "group_instance_id": m.instance_id,
        "host": m.host,
        "client_id": m.client_id,
        "partitions": _partitions_json(m.partitions),
        # Consumer groups (KIP-848) only; null for classic ones.
        "rack": r and r.rack,
        "member_epoch": r and r.member_epoch,
        "member_state": r and r.state,
        "target_partitions": r and _partitions_json(r.target),
        "partitions_to_revoke": r and _partitions_json(r.to_revoke),
        "partitions_to_assign": r and _partitions_json(r.to_assign),
        "member_protocol": r and r.protocol,
    }


def _group_json(
    group: GroupInfo, coordinator: str | None, rows: list[PartitionOffsets]
) -> dict[str, Any]:
    return {
        "group": group.group_id,
        "state": group.state,
        "protocol_type": group.protocol_type or None,
        "assignment_strategy": group.protocol or None,
        "coordinator": coordinator,
        "group_protocol": group.group_protocol,
        "group_epoch": group.group_epoch,
        "target_assignment_epoch": group.target_assignment_epoch,
        "members": [_member_json(m) for m in group.members],
        "offsets": [_offset_json(row) for row in rows],
        "total_lag": _total_lag(rows),
    }


def _offsets_table(groups: list[GroupInfo], rows: dict[str, list[PartitionOffsets]]) -> Table:
    return Table(
        ("GROUP", *OFFSET_COLUMNS, *CONSUMER_COLUMNS),
        [
            (g.group_id, *_offset_cells(row), *_consumer_cells(row))
            for g in groups
            for row in rows[g.group_id]
        ],
    )


# Beside Kafka's columns when a consumer group (KIP-848) is among those described: how each
# member stands against the target assignment.
RECONCILIATION_COLUMNS = (
    "RACK",
    "MEMBER-EPOCH",
    "MEMBER-STATE",
    "TARGET-ASSIGNMENT",
    "TO-REVOKE",
    "TO-ASSIGN",
    "MEMBER-PROTOCOL",
)
EPOCH_COLUMNS = ("PROTOCOL", "GROUP-EPOCH", "TARGET-EPOCH")


def _any_consumer_group(groups: list[GroupInfo]) -> bool:
    return any(g.group_protocol == CONSUMER for g in groups)


def _reconciliation_cells(m: Member) -> tuple[object, ...]:
    r = m.reconciliation
    if r is None:
        return (None,) * len(RECONCILIATION_COLUMNS)
    return (
        r.rack,
        r.member_epoch,
        r.state,
        format_partitions(r.target),
        format_partitions(r.to_revoke),
        format_partitions(r.to_assign),
        r.protocol,
    )


def _members_table(groups: list[GroupInfo]) -> Table:
    columns = (
        "GROUP",
        "CONSUMER-ID",
        "GROUP-INSTANCE-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        "ASSIGNMENT",
    )
    extra = _any_consumer_group(groups)
    rows = []
    for g in groups:
        for m in g.members:
            row: tuple[object, ...] = (
                g.group_id,
                m.member_id,
                m.instance_id,
                m.host,
                m.client_id,
                len(m.partitions or ()),
                format_partitions(m.partitions),
            )
            rows.append(row + _reconciliation_cells(m) if extra else row)
    return Table(columns + RECONCILIATION_COLUMNS if extra else columns, rows)


def _state_table(groups: list[GroupInfo], coordinators: dict[str, str]) -> Table:
    columns = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
    extra = _any_consumer_group(groups)
    rows = []
    for g in groups:
        row = (g.group_id, coordinators.get(g.group_id), g.protocol, g.state, len(g.members))
        epochs = (g.group_protocol, g.group_epoch, g.target_assignment_epoch)
        rows.append(row + epochs if extra else row)
    return Table(columns + EPOCH_COLUMNS if extra else columns, rows)


@groups_app.command("describe")
def describe(
    group_ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="GROUP", help="A group to describe; several may be given.", show_default=False
        ),
    ] = None,
    all_groups: Annotated[
        bool, typer.Option("--all-groups", help="Every consumer group the brokers know.")
    ] = False,
    offsets: Annotated[
        bool,
        typer.Option("--offsets", help="Per partition: offsets, lag and owner (the default)."),
    ] = False,
    members: Annotated[
        bool, typer.Option("--members", help="Per member: ids, host and assigned partitions.")
    ] = False,
    state: Annotated[
        bool,
        typer.Option("--state", help="Per group: coordinator, assignor, state, member count."),
    ] = False,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Describe groups as kafka-consumer-groups.sh --describe does: their offsets and lag
    per partition, or their members (--members), or their state (--state).

    JSON output always holds all three.
    """
    if bool(group_ids) == all_groups:
        raise fail("name groups or give --all-groups, not both or neither", USAGE)
    if offsets + members + state > 1:
        raise fail("give at most one of --offsets, --members, --state", USAGE)
    mode = chosen(output)
    with connect(bootstrap) as admin:
        ids = list_group_ids(admin) if all_groups else list(group_ids or [])
        infos = describe_groups(admin, ids)
        for group_id in group_ids or []:
            require_existing(infos[group_id])
        groups = [g for g in infos.values() if g.exists]
        rows: dict[str, list[PartitionOffsets]] = {}
        if mode is Output.JSON or not (members or state):
            rows = {g.group_id: partition_offsets(admin, g) for g in groups}
        coordinators: dict[str, str] = {}
        if mode is Output.JSON or state:
            coordinators = find_coordinators(admin, [g.group_id for g in groups])
    data = [_group_json(g, coordinators.get(g.group_id), rows.get(g.group_id, [])) for g in groups]
    if state:
        show(View(data, [_state_table(groups, coordinators)]), output)
        return
    notes = [note for g in groups for note in _group_notes(g)]
    if members:
        show(View(data, [_members_table(groups)], notes=notes), output)
        return
    notes += uncommitted_note([row for g in groups for row in rows[g.group_id]])
    show(View(data, [_offsets_table(groups, rows)], notes=notes), output)


# ---------------------------------------------------------------------------
# lag
# ---------------------------------------------------------------------------


def _lag_view(group: GroupInfo, rows: list[PartitionOffsets], stamped: bool) -> View:
    total = _total_lag(rows)
    summary = f"total lag {total} over {_count(len(rows), 'partition')}"
    heading = f"group {group.group_id}  state {group.state}"
    if stamped:
        # When watching, the time shows that the view is live and how fresh it is.
        heading += f"  at {datetime.now().isoformat(sep=' ', timespec='seconds')}"
    data = {
        "group": group.group_id,
        "state": group.state,
        "partitions": [_offset_json(row) for row in rows],
        "total_lag": total,
        "partitions_without_commit": sum(1 for row in rows if row.committed is None),
    }
    table = Table(OFFSET_COLUMNS, [_offset_cells(row) for row in rows])
    return View(data, [table], heading=heading, notes=[summary, *uncommitted_note(rows)])


@groups_app.command("lag")
def lag(
    group_id: GroupArgument,
    watch: Annotated[
        float | None,
        typer.Option("--watch", "-w", min=0.1, help="Refresh every SECONDS until Ctrl-C."),
    ] = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Per-partition lag (log end offset - committed offset) of a group, and the total.

    A partition without a committed offset counts from its log start offset.
    """
    with connect(bootstrap) as admin:

        def snapshot() -> View:
            group = describe_group(admin, group_id)
            require_existing(group)
            return _lag_view(group, partition_offsets(admin, group), stamped=watch is not None)

        view = snapshot()
        if watch is None:
            show(view, output)
            return
        try:
            _watch(view, snapshot, watch, chosen(output))
        except KeyboardInterrupt:
            return


def _watch(view: View, snapshot: Any, every_s: float, mode: Output) -> None:
    from herdless.cli.output import console, renderable

    if mode is Output.TABLE and console().is_terminal:
        from rich.live import Live

        with Live(renderable(view), console=console(), auto_refresh=False) as live:
            while True:
                time.sleep(every_s)
                live.update(renderable(snapshot()), refresh=True)
    # Not redrawn in place (a pipe, a file, JSON): one snapshot after another.
    while True:
        show(view, mode)
        time.sleep(every_s)
        view = snapshot()


# ---------------------------------------------------------------------------
# delete, delete-offsets
# ---------------------------------------------------------------------------


_DELETE_ERRORS = {
    "NonEmptyGroupError": "the group is not empty (it has active members); stop them first",
    "GroupIdNotFoundError": "the group does not exist",
}


def _delete_error(outcome: str) -> str:
    """kafka-python names a failed deletion by its error class: in words instead."""
    from kafka import errors

    if outcome in _DELETE_ERRORS:
        return _DELETE_ERRORS[outcome]
    error_class = getattr(errors, outcome, None)
    return error_text(error_class) if error_class is not None else outcome


@groups_app.command("delete")
def delete(
    group_ids: Annotated[list[str], typer.Argument(metavar="GROUP...")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Delete inactive consumer groups and their committed offsets."""
    ids = list(dict.fromkeys(group_ids))
    with connect(bootstrap) as admin:
        results = admin.delete_groups(ids)
    failed = False
    for group_id in ids:
        outcome = results.get(group_id, "no answer from the broker")
        if outcome == "OK":
            say(f"deleted group {group_id}")
        else:
            failed = True
            error(f"cannot delete group {group_id!r}: {_delete_error(outcome)}")
    if failed:
        raise typer.Exit(1)


def _committed_partitions(
    admin: KafkaAdminClient, group_id: str, specs: list[str]
) -> list[TopicPartition]:
    """`--topic T` is every partition of T the group has an offset for (the topic may
    be gone already); `T:p1,p2` names partitions."""
    from kafka import TopicPartition

    committed = committed_offsets(admin, group_id)
    tps: set[TopicPartition] = set()
    for spec in specs:
        name, partitions = parse_topic(spec)
        if partitions is None:
            found = {tp for tp in committed if tp.topic == name}
            if not found:
                raise fail(f"group {group_id!r} has no committed offsets for topic {name!r}")
            tps |= found
        else:
            tps |= {TopicPartition(name, p) for p in partitions}
    return sorted(tps)


@groups_app.command("delete-offsets")
def delete_offsets(
    group_id: GroupArgument,
    topic: Annotated[
        list[str],
        typer.Option(
            "--topic",
            "-t",
            metavar="TOPIC[:P,...]",
            help="T (all its committed partitions) or T:p1,p2; repeatable.",
        ),
    ],
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Delete a group's committed offsets for some topics or partitions (OffsetDelete).

    The broker refuses while a member of the group is subscribed to the topic.
    """
    from kafka.errors import NoError

    with connect(bootstrap) as admin:
        group = describe_group(admin, group_id)
        require_existing(group)
        tps = _committed_partitions(admin, group_id, topic)
        outcomes = admin.delete_group_offsets(group_id, tps)
    data = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "error": None if outcomes[tp] is NoError else error_text(outcomes[tp]),
        }
        for tp in tps
    ]
    rows = [(d["topic"], d["partition"], d["error"] or "deleted") for d in data]
    show(View(data, [Table(("TOPIC", "PARTITION", "STATUS"), rows)]), output)
    failed = [tp_text(tp) for tp in tps if outcomes[tp] is not NoError]
    if failed:
        raise fail(f"the offsets of {', '.join(failed)} were not deleted")

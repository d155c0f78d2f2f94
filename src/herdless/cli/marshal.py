"""`herdless marshal status`: the world state of a Marshal group, read from the log.

It reads the coordination topic to its end with the same rationalizer the
consumers run, so it shows exactly what they agree on: who holds what, from
which offset. Heartbeat age, freshness and live members are judged at the
moment of reading, by this machine's clock (never behind the log's, which
stands still where nobody writes): what a human reading it now needs to know.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer

from herdless.cli.client import require_reachable
from herdless.cli.errors import fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, client_settings, command_group
from herdless.cli.output import OutputOption, Table, View, show

marshal_app = command_group(
    "Inspect groups that coordinate through the Marshal protocol (herdless.marshal)."
)


@marshal_app.command("status")
def status(
    group: Annotated[str, typer.Option("--group", "-g", help="The Marshal group id.")],
    coordination_topic: Annotated[
        str | None,
        # herdless.marshal pulls in librdkafka: named here so that --help stays quick
        # (a test keeps it equal to herdless.marshal.placement.DEFAULT_TOPIC).
        typer.Option(help="The coordination topic.", show_default="__marshal"),
    ] = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Who holds which partition, from which offset, and how fresh the claim is."""
    require_reachable(bootstrap)
    from herdless.marshal.log import MarshalError, read_state
    from herdless.marshal.messages import NO_OFFSET
    from herdless.marshal.placement import DEFAULT_TOPIC

    topic = coordination_topic or DEFAULT_TOPIC
    try:
        state = read_state(bootstrap, topic, dict(client_settings()))
    except MarshalError as exc:
        raise fail(str(exc)) from None
    except Exception as exc:  # the client library's own failures: one line, not a traceback
        raise fail(f"cannot read {topic} at {bootstrap}: {exc}") from None
    claims = state.group_claims(group)
    # Judged now, as the age beside it: the log's clock stands still on a partition
    # whose only writer has died, and by it alone a dead owner would look fresh.
    now_ms = int(time.time() * 1000)
    members = state.live_members(group, now_ms)
    if not claims and not members:
        raise fail(f"no Marshal group {group!r} in {topic}")
    rows = []
    for key in sorted(claims, key=lambda k: (k.topic, k.partition)):
        claim = claims[key]
        fresh = state.freshness(key, now_ms)
        rows.append(
            {
                "topic": key.topic,
                "partition": key.partition,
                "owner": claim.owner or None,
                "last_offset": None if claim.last_offset == NO_OFFSET else claim.last_offset,
                "claimed_through": None
                if claim.claimed_through == NO_OFFSET
                else claim.claimed_through,
                "heartbeat_age_s": round(max(0.0, now_ms - claim.heartbeat_at_ms) / 1000, 1),
                "freshness": fresh.value if fresh else "released",
            }
        )
    table = Table(
        (
            "TOPIC",
            "PARTITION",
            "OWNER",
            "LAST-OFFSET",
            "CLAIMED-THROUGH",
            "HEARTBEAT-AGE-S",
            "FRESHNESS",
        ),
        [tuple(row.values()) for row in rows],
    )
    data = {"group": group, "claims": rows, "live_members": sorted(members)}
    notes = [f"live members: {', '.join(sorted(members)) if members else '-'}"]
    show(View(data, [table], heading=f"group {group}", notes=notes), output)

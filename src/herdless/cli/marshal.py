"""`herdless marshal status`: the world state of a Marshal group, read from the log.

It reads the coordination topic to its end with the same rationalizer the
consumers run, so it shows exactly what they agree on. Freshness is the
log's verdict (by the broker's timestamps); the heartbeat age beside it is
by this machine's clock, for a human reading it now.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table

from herdless.cli.client import Bootstrap, console, fail, require_reachable
from herdless.marshal.log import MarshalError, read_state
from herdless.marshal.messages import NO_OFFSET
from herdless.marshal.placement import DEFAULT_TOPIC

marshal_app = typer.Typer(
    help="Inspect groups that coordinate through the Marshal protocol (herdless.marshal).",
    no_args_is_help=True,
)

NONE = "-"


@marshal_app.command("status")
def status(
    group: Annotated[str, typer.Option("--group", "-g", help="The Marshal group id.")],
    coordination_topic: Annotated[
        str, typer.Option(help="The coordination topic.")
    ] = DEFAULT_TOPIC,
    bootstrap: Bootstrap = "127.0.0.1:9092",
) -> None:
    """Who holds which partition, from which offset, and how fresh the claim is."""
    require_reachable(bootstrap)
    try:
        state = read_state(bootstrap, coordination_topic)
    except MarshalError as exc:
        raise fail(str(exc)) from None
    except Exception as exc:  # the client library's own failures: one line, not a traceback
        raise fail(f"cannot read {coordination_topic} at {bootstrap}: {exc}") from None
    claims = state.group_claims(group)
    members = state.live_members(group)
    if not claims and not members:
        raise fail(f"no Marshal group {group!r} in {coordination_topic}")
    now_ms = time.time() * 1000
    table = Table(
        "topic", "partition", "owner", "last offset", "claimed through", "heartbeat age",
        "freshness", title=f"group {group}",
    )  # fmt: skip
    for key in sorted(claims, key=lambda k: (k.topic, k.partition)):
        claim = claims[key]
        fresh = state.freshness(key)
        table.add_row(
            key.topic,
            str(key.partition),
            claim.owner or NONE,
            _offset(claim.last_offset),
            _offset(claim.claimed_through),
            f"{max(0.0, now_ms - claim.heartbeat_at_ms) / 1000:.1f}s",
            fresh.value if fresh else "released",
        )
    console.print(table)
    console.print(f"live members: {', '.join(members) if members else NONE}", highlight=False)


def _offset(offset: int) -> str:
    return NONE if offset == NO_OFFSET else str(offset)

"""What a `herdless groups` command was given, checked: group states, the partitions
`--topic T[:p1,p2]` names, and a group that must exist. Each mistake fails the
command with one line naming it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from herdless.admin.group_info import STATES, GroupInfo
from herdless.admin.topic_state import partition_counts
from herdless.cli.errors import USAGE, fail

if TYPE_CHECKING:
    from kafka import KafkaAdminClient, TopicPartition


def require_existing(group: GroupInfo) -> None:
    if not group.exists:
        raise fail(f"consumer group {group.group_id!r} does not exist")


def canonical_states(states: Iterable[str]) -> list[str]:
    """The states as brokers spell them: --state accepts any case, as Kafka's tool does."""
    by_lower = {s.lower(): s for s in STATES}
    canonical = []
    for state in states:
        if state.lower() not in by_lower:
            raise fail(f"unknown group state {state!r}; states are {', '.join(STATES)}", USAGE)
        canonical.append(by_lower[state.lower()])
    return canonical


def parse_topic(spec: str, option: str = "--topic") -> tuple[str, list[int] | None]:
    """'T' is every partition of T; 'T:0,2' is partitions 0 and 2."""
    name, sep, parts = spec.partition(":")
    if not name:
        raise fail(f"{option} expects T or T:p1,p2, got {spec!r}", USAGE)
    if not sep:
        return name, None
    try:
        partitions = [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise fail(
            f"{option} expects T or T:p1,p2 with partition numbers, got {spec!r}", USAGE
        ) from None
    if not partitions:
        raise fail(f"{option} {spec!r} names no partitions", USAGE)
    return name, partitions


def named_partitions(admin: KafkaAdminClient, specs: Iterable[str]) -> list[TopicPartition]:
    """The partitions `--topic T[:p1,p2]` options name; a missing topic or partition fails."""
    from kafka import TopicPartition

    wanted = [parse_topic(spec) for spec in specs]
    counts = partition_counts(admin, (name for name, _ in wanted))
    tps: set[TopicPartition] = set()
    for name, partitions in wanted:
        if name not in counts:
            raise fail(f"topic {name!r} does not exist")
        for p in partitions if partitions is not None else range(counts[name]):
            if not 0 <= p < counts[name]:
                raise fail(f"topic {name!r} has no partition {p} (it has {counts[name]})")
            tps.add(TopicPartition(name, p))
    return sorted(tps)


def tp_text(tp: TopicPartition) -> str:
    """A partition as --topic names it."""
    return f"{tp.topic}:{tp.partition}"

"""One look at the brokers: cluster, topics with their sizes, groups with their lag,
open and hanging transactions.

Each part is asked for on its own, so a part the brokers cannot answer (a
coordinator loading its groups, a broker without DescribeLogDirs) leaves the
others shown, with the reason in words beside the part that is missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from herdless.admin.client import explain, find_coordinators, from_any_broker
from herdless.admin.cluster_state import cluster_state
from herdless.admin.errors import AdminError
from herdless.admin.group_info import GroupInfo
from herdless.admin.group_state import (
    PartitionOffsets,
    describe_groups,
    groups_committed_offsets,
    list_group_ids,
    offset_rows,
)
from herdless.admin.share_group_state import SHARE, ShareOffsets, share_rows, start_offsets
from herdless.admin.topic_state import partition_rows
from herdless.admin.transaction_state import (
    ACTIVE_STATES,
    describe_transactions,
    hanging_transactions,
    list_transactions,
)
from herdless.coordinator.internal_topics import OFFSETS_TOPIC

if TYPE_CHECKING:
    from kafka import KafkaAdminClient, TopicPartition

T = TypeVar("T")

# What the topics page says when it shows no sizes, by why.
SIZES_UNSUPPORTED = "the brokers do not answer DescribeLogDirs: sizes are not shown"


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    internal: bool
    # `herdless topics describe`'s partition rows, each with `size_bytes` added: the
    # size of the leader's replica, or None when the brokers did not say.
    partitions: list[dict[str, Any]]

    @property
    def records(self) -> int:
        return sum(p["records"] or 0 for p in self.partitions)

    @property
    def size_bytes(self) -> int | None:
        sizes = [p["size_bytes"] for p in self.partitions]
        return None if None in sizes else sum(sizes)


@dataclass(frozen=True, slots=True)
class Group:
    info: GroupInfo
    rows: list[PartitionOffsets]
    coordinator: str | None
    # A share group's partitions (KIP-932), which have start offsets, not committed
    # ones; None for a classic or consumer group.
    share: list[ShareOffsets] | None = None

    def lags(self) -> Iterator[tuple[str, int]]:
        """(topic, lag) of each partition the group is behind on or has none known."""
        for row in self.rows if self.share is None else self.share:
            yield row.tp.topic, row.lag or 0

    @property
    def topics(self) -> set[str]:
        rows = self.rows if self.share is None else self.share
        return {row.tp.topic for row in rows}

    @property
    def total_lag(self) -> int:
        return sum(lag for _, lag in self.lags())


@dataclass(frozen=True, slots=True)
class Transactions:
    # `herdless transactions describe`'s rows of the transactions open now (Ongoing or
    # Prepare*), oldest first.
    open: list[dict[str, Any]]
    # `herdless transactions find-hanging`'s rows: open on a partition, and no
    # coordinator will end them.
    hanging: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Snapshot:
    taken_at: float  # seconds since the epoch
    cluster: dict[str, Any] | None = None  # `herdless cluster describe`'s JSON document
    topics: list[Topic] = field(default_factory=list)
    groups: dict[str, Group] = field(default_factory=dict)
    transactions: Transactions | None = None
    # Why a part is missing or incomplete: "cluster", "topics", "sizes", "groups",
    # "transactions".
    problems: dict[str, str] = field(default_factory=dict)


def take_snapshot(admin: KafkaAdminClient, bootstrap: str) -> Snapshot:
    problems: dict[str, str] = {}

    def part(name: str, ask: Callable[[], T]) -> T | None:
        """What `ask` answers, or None with the reason kept under `name`."""
        from kafka.errors import KafkaError

        try:
            return ask()
        except AdminError as exc:
            problems[name] = str(exc)
        except KafkaError as exc:
            problems[name] = explain(exc, bootstrap)
        return None

    described = part("topics", lambda: from_any_broker(admin.describe_topics))
    if described is None:
        # Without topics nothing else can be told: offsets and lag are per partition.
        return Snapshot(time.time(), problems=problems)
    described = sorted(described, key=lambda t: (t["is_internal"], t["name"]))
    cluster = part("cluster", lambda: cluster_state(admin, described))
    rows = part("topics", lambda: partition_rows(admin, described)) or {}
    leaders = {
        (name, p["partition"]): p["leader"] for name, partitions in rows.items() for p in partitions
    }
    sizes = part("sizes", lambda: log_sizes(admin, leaders)) or {}
    topics = [
        Topic(
            t["name"],
            t["is_internal"],
            [{**p, "size_bytes": sizes.get((t["name"], p["partition"]))} for p in rows[t["name"]]],
        )
        for t in described
        if t["name"] in rows
    ]
    groups = part("groups", lambda: _groups(admin, topics)) or {}
    transactions = part("transactions", lambda: _transactions(admin, topics))
    return Snapshot(time.time(), cluster, topics, groups, transactions, problems)


def log_sizes(
    admin: KafkaAdminClient, leaders: Mapping[tuple[str, int], int]
) -> dict[tuple[str, int], int]:
    """Each partition's size in bytes on its leader, from every broker's DescribeLogDirs
    (each broker tells of the replicas it holds)."""
    from kafka.errors import IncompatibleBrokerVersion, UnsupportedVersionError

    wanted: dict[str, list[int]] = {}
    for topic, partition in leaders:
        wanted.setdefault(topic, []).append(partition)
    if not wanted:
        return {}
    try:
        answers = admin.describe_log_dirs(wanted)
    except (IncompatibleBrokerVersion, UnsupportedVersionError):
        raise AdminError(SIZES_UNSUPPORTED) from None
    sizes = {}
    for answer in answers:
        for log_dir in answer["log_dirs"]:
            if log_dir.get("error_code"):
                continue
            for topic in log_dir["topics"]:
                for p in topic["partitions"]:
                    key = (topic["name"], p["partition_index"])
                    if leaders.get(key) == answer["broker"] and not p.get("is_future_key"):
                        sizes[key] = p["partition_size"]
    return sizes


def _groups(admin: KafkaAdminClient, topics: Iterable[Topic]) -> dict[str, Group]:
    from kafka import TopicPartition

    infos = [g for g in describe_groups(admin, list_group_ids(admin)).values() if g.exists]
    ids = [g.group_id for g in infos]
    # A share group commits no offsets: OffsetFetch does not know it (GROUP_ID_NOT_FOUND).
    committed = groups_committed_offsets(
        admin, [g.group_id for g in infos if g.group_protocol != SHARE]
    )
    coordinators = find_coordinators(admin, ids)
    starts: dict[TopicPartition, int] = {}
    ends: dict[TopicPartition, int] = {}
    for topic in topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p["partition"])
            if p["log_end_offset"] is not None:
                starts[tp], ends[tp] = p["log_start_offset"], p["log_end_offset"]
    return {
        g.group_id: Group(
            g,
            offset_rows(g, committed.get(g.group_id, {}), starts, ends),
            coordinators.get(g.group_id),
            share_rows(g, start_offsets(admin, g.group_id), ends)
            if g.group_protocol == SHARE
            else None,
        )
        for g in sorted(infos, key=lambda g: g.group_id)
    }


def _transactions(admin: KafkaAdminClient, topics: Iterable[Topic]) -> Transactions:
    """The open transactions as their coordinators describe them, and those hanging on
    partitions, found as `herdless transactions find-hanging` finds them: on every
    partition with a leader that transactions write (of the internal topics, only the
    offsets that transactions commit)."""
    from kafka import TopicPartition

    now_ms = int(time.time() * 1000)
    listed = [row["transactional_id"] for row in list_transactions(admin, ACTIVE_STATES)]
    described = describe_transactions(admin, listed, now_ms) if listed else []
    # One may have ended between the two questions.
    still_open = [row for row in described if row["state"] in ACTIVE_STATES]
    still_open.sort(key=lambda row: -(row["duration_ms"] or 0))
    partitions = [
        TopicPartition(topic.name, p["partition"])
        for topic in topics
        if not topic.internal or topic.name == OFFSETS_TOPIC
        for p in topic.partitions
        if p["leader"] is not None and p["leader"] >= 0
    ]
    hanging = hanging_transactions(admin, partitions, now_ms) if partitions else []
    return Transactions(still_open, hanging)

"""What `herdless groups` and the console read of groups: members, offsets and lag.

Its numbers and rules follow Kafka's kafka-consumer-groups.sh, so an operator
reads the same thing from either tool: the rows are every partition a member
owns and every partition with a committed offset; lag is log end minus
committed offset. One difference, said wherever lag is shown: a partition with
no committed offset counts its lag from its log start offset (Kafka's tool
leaves it out), since its records are all still unread by the group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from herdless.admin.client import coordinator_ids
from herdless.admin.errors import AdminError
from herdless.admin.group_info import (
    CONSUMER,
    MEMBER_PROTOCOLS,
    MEMBER_STATES,
    SHARE,
    GroupInfo,
    Member,
    Reconciliation,
)
from herdless.admin.topic_state import log_offsets

if TYPE_CHECKING:
    from kafka import KafkaAdminClient, TopicPartition

# One OffsetFetch for all groups is one answer a broker builds in one go: 200 groups
# of 50 partitions held a herdless broker's other requests up to 0.2 s
# (bench/console_cost.py); five at a time kept them within what no console costs.
GROUPS_PER_OFFSET_FETCH = 5


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    tp: TopicPartition
    committed: int | None  # None: the group has no committed offset here
    log_start: int | None  # None: the topic or partition no longer exists
    log_end: int | None
    owner: Member | None

    @property
    def lag(self) -> int | None:
        start = self.committed if self.committed is not None else self.log_start
        if start is None or self.log_end is None:
            return None
        return self.log_end - start


# ---------------------------------------------------------------------------
# Groups and members
# ---------------------------------------------------------------------------


def describe_groups(admin: KafkaAdminClient, group_ids: Iterable[str]) -> dict[str, GroupInfo]:
    """One DescribeGroups per coordinator for all the groups."""
    ids = list(dict.fromkeys(group_ids))
    if not ids:
        return {}
    described = admin.describe_groups(ids)
    infos = {group_id: _group_info(group_id, described[group_id]) for group_id in ids}
    # DescribeGroups shows a consumer group (KIP-848) as Dead, as Kafka does.
    dead = [group_id for group_id, info in infos.items() if not info.exists]
    if dead:
        infos.update(_describe_consumer_groups(admin, dead))
    # And a share group (KIP-932) as a group of another type: GROUP_ID_NOT_FOUND.
    dead = [group_id for group_id, info in infos.items() if not info.exists]
    if dead:
        from herdless.admin.share_group_state import describe_share_groups

        infos.update(describe_share_groups(admin, dead))
    return infos


def _describe_consumer_groups(
    admin: KafkaAdminClient, group_ids: list[str]
) -> dict[str, GroupInfo]:
    """The groups among `group_ids` that are consumer groups, through ConsumerGroupDescribe
    at each coordinator; none from brokers that do not serve it."""
    from kafka.errors import KafkaError

    from herdless.protocol.consumer_group_messages import ConsumerGroupDescribeRequest

    by_coordinator: dict[int, list[str]] = {}
    for group_id, node in coordinator_ids(admin, group_ids).items():
        by_coordinator.setdefault(node, []).append(group_id)

    async def ask() -> list[Any]:
        described = []
        for node, ids in by_coordinator.items():
            # v1 says which protocol each member speaks; Kafka 3.7-3.9 serve v0 only.
            for version in (1, 0):
                request = ConsumerGroupDescribeRequest[version](
                    group_ids=ids, include_authorized_operations=False
                )
                try:
                    described += (await admin._manager.send(request, node_id=node)).groups
                    break
                except KafkaError:
                    if version == 0:
                        raise
        return described

    try:
        described = admin._manager.run(ask)
    except KafkaError:
        return {}  # a broker without the API (Kafka before 3.7): DescribeGroups' answer
    infos = {}
    for group in described:
        if group.error_code != 0:
            continue  # GROUP_ID_NOT_FOUND: not a consumer group either
        members = tuple(
            sorted(
                (_consumer_member(m, group.assignment_epoch) for m in group.members),
                key=lambda m: (m.client_id, m.member_id),
            )
        )
        infos[group.group_id] = GroupInfo(
            group.group_id,
            group.group_state,
            "consumer",
            group.assignor_name,
            members,
            group_protocol=CONSUMER,
            group_epoch=group.group_epoch,
            target_assignment_epoch=group.assignment_epoch,
        )
    return infos


def _consumer_member(m: Any, target_epoch: int) -> Member:
    assigned = _topic_partitions(m.assignment.topic_partitions)
    target = _topic_partitions(m.target_assignment.topic_partitions)
    pending = _topic_partitions(getattr(m, "partitions_pending_revocation", None) or ())
    state = MEMBER_STATES.get(getattr(m, "member_state", -1))
    if state is None and m.member_epoch == target_epoch and assigned == target:
        state = MEMBER_STATES[0]  # a broker that does not say: stable is plain to see
    return Member(
        member_id=m.member_id,
        client_id=m.client_id,
        host=m.client_host,
        instance_id=m.instance_id,
        partitions=assigned,
        reconciliation=Reconciliation(
            protocol=MEMBER_PROTOCOLS.get(getattr(m, "member_type", -1)),
            member_epoch=m.member_epoch,
            state=state,
            rack=m.rack_id,
            target=target,
            to_revoke=tuple(sorted(set(pending) | (set(assigned) - set(target)))),
            to_assign=tuple(sorted(set(target) - set(assigned))),
        ),
    )


def _topic_partitions(topics: Any) -> tuple[TopicPartition, ...]:
    from kafka import TopicPartition

    return tuple(sorted(TopicPartition(t.topic_name, p) for t in topics for p in t.partitions))


def describe_group(admin: KafkaAdminClient, group_id: str) -> GroupInfo:
    return describe_groups(admin, [group_id])[group_id]


def list_group_ids(
    admin: KafkaAdminClient, states: list[str] | None = None, broker_ids: list[int] | None = None
) -> list[str]:
    """The groups the brokers coordinate (all brokers, unless `broker_ids` names some):
    each broker lists only the groups it coordinates."""
    from kafka.errors import UnsupportedVersionError

    try:
        listed = admin.list_groups(broker_ids=broker_ids, states_filter=states or None)
    except UnsupportedVersionError:
        # ListGroups before v4 has no state filter; callers filter on the described state.
        listed = admin.list_groups(broker_ids=broker_ids)
    return sorted({g["group_id"] for g in listed})


def _group_info(group_id: str, raw: Mapping[str, Any]) -> GroupInfo:
    if raw.get("error"):
        # DescribeGroups v6+ names an unknown group an error; before, it is just Dead.
        if "GroupIdNotFound" in raw["error"]:
            return GroupInfo(group_id, "Dead", "", "", ())
        raise AdminError(f"cannot describe group {group_id!r}: {raw['error']}")
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
    from kafka import TopicPartition

    if not isinstance(assignment, Mapping) or "assigned_partitions" not in assignment:
        return None
    return tuple(
        sorted(
            TopicPartition(entry["topic"], partition)
            for entry in assignment["assigned_partitions"]
            for partition in entry["partitions"]
        )
    )


# ---------------------------------------------------------------------------
# Offsets
# ---------------------------------------------------------------------------


def committed_offsets(admin: KafkaAdminClient, group_id: str) -> dict[TopicPartition, int]:
    return groups_committed_offsets(admin, [group_id])[group_id]


def groups_committed_offsets(
    admin: KafkaAdminClient, group_ids: Iterable[str]
) -> dict[str, dict[TopicPartition, int]]:
    """Each group's committed offsets: OffsetFetch for a few groups at a time where the
    broker takes several in one (v8+), else one group at a time."""
    from kafka.errors import UnsupportedVersionError

    ids = list(dict.fromkeys(group_ids))
    batch = GROUPS_PER_OFFSET_FETCH
    fetched: dict[str, Any] = {}
    pending = ids
    while pending:
        some, pending = pending[:batch], pending[batch:]
        try:
            fetched |= admin.list_group_offsets(dict.fromkeys(some))
        except UnsupportedVersionError:
            if len(some) == 1:
                raise
            batch, pending = 1, some + pending
    # -1 is how OffsetFetch says "nothing committed here".
    return {
        group_id: {
            tp: oam.offset for tp, oam in fetched.get(group_id, {}).items() if oam.offset >= 0
        }
        for group_id in ids
    }


def partition_offsets(admin: KafkaAdminClient, group: GroupInfo) -> list[PartitionOffsets]:
    """Kafka's rows for a group, its offsets and its partitions' offsets asked for."""
    from kafka.admin import OffsetSpec

    # A share group commits no offsets (OffsetFetch does not know it): its members' rows.
    committed = {} if group.group_protocol == SHARE else committed_offsets(admin, group.group_id)
    tps = set(committed) | {tp for m in group.members for tp in m.partitions or ()}
    ends = log_offsets(admin, tps, OffsetSpec.LATEST)
    starts = log_offsets(admin, tps, OffsetSpec.EARLIEST)
    return offset_rows(group, committed, starts, ends)


def offset_rows(
    group: GroupInfo,
    committed: Mapping[TopicPartition, int],
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
) -> list[PartitionOffsets]:
    """Kafka's rows: every partition a member owns, and every partition with a
    committed offset that no member owns (its consumer columns show '-')."""
    owners = {tp: m for m in group.members for tp in m.partitions or ()}
    return [
        PartitionOffsets(tp, committed.get(tp), starts.get(tp), ends.get(tp), owners.get(tp))
        for tp in sorted(set(committed) | set(owners))
    ]


def uncommitted_note(rows: list[PartitionOffsets]) -> list[str]:
    """What every lag total says about partitions without a committed offset."""
    count = sum(1 for row in rows if row.committed is None and row.lag is not None)
    if not count:
        return []
    which = "partition has" if count == 1 else "partitions have"
    return [f"{count} {which} no committed offset: lag counted from the log start offset"]

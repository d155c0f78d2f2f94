"""What `herdless share-groups`, `herdless groups` and the console read of share groups
(KIP-932): members and their assignments through ShareGroupDescribe, start offsets
through DescribeShareGroupOffsets, and the admin's changes to them.

A share group has no committed offsets: each partition has a start offset, before which
every record is settled (accepted, or archived), and an in-flight window after it. Its
lag is as Kafka's kafka-share-groups.sh counts it before Kafka 4.2: the log end offset
less the start offset, which counts in-flight records not yet settled as well as those
never delivered. It is computed here from ListOffsets, so that it is the same whichever
broker answers and against any broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from herdless.admin.client import coordinator_ids
from herdless.admin.errors import AdminError
from herdless.admin.group_info import SHARE, GroupInfo, Member
from herdless.admin.topic_state import log_offsets

if TYPE_CHECKING:
    from kafka import KafkaAdminClient, TopicPartition

UNINITIALIZED = -1


@dataclass(frozen=True, slots=True)
class ShareStart:
    """What DescribeShareGroupOffsets tells of one partition of a share group."""

    start_offset: int
    # herdless's: records not settled yet in the in-flight window, and those archived
    # in it; None where the broker cannot tell (another broker leads the partition, or
    # it is not herdless).
    in_flight: int | None = None
    archived: int | None = None


@dataclass(frozen=True, slots=True)
class ShareOffsets:
    """One partition of a share group: where it starts, and how far the log is beyond."""

    tp: TopicPartition
    start_offset: int | None  # None: the group has not started reading it
    log_end: int | None  # None: the partition no longer exists
    owners: tuple[Member, ...]
    in_flight: int | None = None
    archived: int | None = None

    @property
    def lag(self) -> int | None:
        if self.start_offset is None or self.log_end is None:
            return None
        return max(self.log_end - self.start_offset, 0)


def _by_coordinator(admin: KafkaAdminClient, group_ids: Iterable[str]) -> dict[int, list[str]]:
    nodes: dict[int, list[str]] = {}
    for group_id, node in coordinator_ids(admin, list(group_ids)).items():
        nodes.setdefault(node, []).append(group_id)
    return nodes


def _send(admin: KafkaAdminClient, requests: list[tuple[int, Any]]) -> list[Any]:
    """Each request to its broker; the answers in order."""

    async def ask() -> list[Any]:
        return [await admin._manager.send(request, node_id=node) for node, request in requests]

    return admin._manager.run(ask)  # type: ignore[no-any-return]


def describe_share_groups(
    admin: KafkaAdminClient, group_ids: Iterable[str]
) -> dict[str, GroupInfo]:
    """The groups among `group_ids` that are share groups; none from brokers that do not
    serve ShareGroupDescribe (Kafka before 4.1)."""
    from kafka.errors import KafkaError

    from herdless.protocol.share_group_messages import ShareGroupDescribeRequest

    ids = list(dict.fromkeys(group_ids))
    if not ids:
        return {}
    requests = [
        (node, ShareGroupDescribeRequest[1](group_ids=some, include_authorized_operations=False))
        for node, some in _by_coordinator(admin, ids).items()
    ]
    try:
        answers = _send(admin, requests)
    except KafkaError:
        return {}
    infos = {}
    for answer in answers:
        for group in answer.groups:
            if group.error_code != 0:
                continue  # GROUP_ID_NOT_FOUND: not a share group
            members = tuple(
                sorted(
                    (_member(m) for m in group.members), key=lambda m: (m.client_id, m.member_id)
                )
            )
            infos[group.group_id] = GroupInfo(
                group.group_id,
                group.group_state,
                SHARE,
                group.assignor_name,
                members,
                group_protocol=SHARE,
                group_epoch=group.group_epoch,
                target_assignment_epoch=group.assignment_epoch,
            )
    return infos


def _member(m: Any) -> Member:
    from kafka import TopicPartition

    partitions = tuple(
        sorted(
            TopicPartition(t.topic_name, p)
            for t in m.assignment.topic_partitions
            for p in t.partitions
        )
    )
    return Member(m.member_id, m.client_id, m.client_host, None, partitions)


def list_share_group_ids(admin: KafkaAdminClient) -> list[str]:
    """Every share group the brokers coordinate (ListGroups filtered by type, KIP-848)."""
    listed = admin.list_groups(types_filter=[SHARE])
    return sorted({g["group_id"] for g in listed})


def describe_share_group(admin: KafkaAdminClient, group_id: str) -> GroupInfo:
    """The share group of that id; AdminError when there is none."""
    found = describe_share_groups(admin, [group_id]).get(group_id)
    if found is None:
        raise AdminError(f"share group {group_id!r} does not exist")
    return found


def start_offsets(admin: KafkaAdminClient, group_id: str) -> dict[TopicPartition, ShareStart]:
    """Each partition the group has started reading, and where it starts."""
    from kafka import TopicPartition

    from herdless.admin.client import error_text
    from herdless.protocol.share_group_messages import DescribeShareGroupOffsetsRequest

    (node,) = _by_coordinator(admin, [group_id])
    Request = DescribeShareGroupOffsetsRequest[0]
    request = Request(groups=[Request.DescribeGroup(group_id=group_id, topics=None)])
    (answer,) = _send(admin, [(node, request)])
    (group,) = answer.groups
    if group.error_code != 0:
        raise AdminError(
            f"cannot read the offsets of share group {group_id!r}:"
            f" {error_text(group.error_code, group.error_message)}"
        )
    return {
        TopicPartition(t.topic_name, p.partition_index): ShareStart(
            p.start_offset, _told(p.in_flight_records), _told(p.archived_records)
        )
        for t in group.topics
        for p in t.partitions
        if p.error_code == 0 and p.start_offset != UNINITIALIZED
    }


def _told(count: int) -> int | None:
    return None if count < 0 else count


def share_offset_rows(admin: KafkaAdminClient, group: GroupInfo) -> list[ShareOffsets]:
    """A row for every partition a member is assigned or the group has a start offset for."""
    from kafka.admin import OffsetSpec

    starts = start_offsets(admin, group.group_id)
    assigned = {tp for member in group.members for tp in member.partitions or ()}
    ends = log_offsets(admin, set(starts) | assigned, OffsetSpec.LATEST)
    return share_rows(group, starts, ends)


def share_rows(
    group: GroupInfo,
    starts: Mapping[TopicPartition, ShareStart],
    ends: Mapping[TopicPartition, int],
) -> list[ShareOffsets]:
    """The rows of a share group: every partition it has a start offset for or a member
    is assigned, with the members that share it."""
    owners: dict[TopicPartition, list[Member]] = {}
    for member in group.members:
        for tp in member.partitions or ():
            owners.setdefault(tp, []).append(member)
    rows = []
    for tp in sorted(set(starts) | set(owners)):
        start = starts.get(tp)
        rows.append(
            ShareOffsets(
                tp,
                None if start is None else start.start_offset,
                ends.get(tp),
                tuple(owners.get(tp, ())),
                None if start is None else start.in_flight,
                None if start is None else start.archived,
            )
        )
    return rows


def alter_share_group_offsets(
    admin: KafkaAdminClient, group_id: str, offsets: Mapping[TopicPartition, int]
) -> dict[TopicPartition, str | None]:
    """AlterShareGroupOffsets: each partition's error in words, None where it moved.
    AdminError when the whole request is refused (a group with members, none at all)."""
    from kafka import TopicPartition

    from herdless.admin.client import error_text
    from herdless.protocol.share_group_messages import AlterShareGroupOffsetsRequest

    Request = AlterShareGroupOffsetsRequest[0]
    Topic = Request.AlterTopic
    by_topic: dict[str, list[Any]] = {}
    for tp, offset in sorted(offsets.items()):
        by_topic.setdefault(tp.topic, []).append(
            Topic.AlterPartition(partition_index=tp.partition, start_offset=offset)
        )
    (node,) = _by_coordinator(admin, [group_id])
    request = Request(
        group_id=group_id,
        topics=[Topic(topic_name=t, partitions=p) for t, p in by_topic.items()],
    )
    (answer,) = _send(admin, [(node, request)])
    if answer.error_code != 0:
        raise AdminError(
            f"cannot reset the offsets of share group {group_id!r}:"
            f" {error_text(answer.error_code, answer.error_message)}"
        )
    return {
        TopicPartition(t.topic_name, p.partition_index): (
            None if p.error_code == 0 else error_text(p.error_code, p.error_message)
        )
        for t in answer.responses
        for p in t.partitions
    }


def delete_share_group_offsets(
    admin: KafkaAdminClient, group_id: str, topics: Iterable[str]
) -> dict[str, str | None]:
    """DeleteShareGroupOffsets: each topic's error in words, None where it went."""
    from herdless.admin.client import error_text
    from herdless.protocol.share_group_messages import DeleteShareGroupOffsetsRequest

    (node,) = _by_coordinator(admin, [group_id])
    Request = DeleteShareGroupOffsetsRequest[0]
    request = Request(
        group_id=group_id,
        topics=[Request.DeleteTopic(topic_name=t) for t in dict.fromkeys(topics)],
    )
    (answer,) = _send(admin, [(node, request)])
    if answer.error_code != 0:
        raise AdminError(
            f"cannot delete the offsets of share group {group_id!r}:"
            f" {error_text(answer.error_code, answer.error_message)}"
        )
    return {
        t.topic_name: None if t.error_code == 0 else error_text(t.error_code, t.error_message)
        for t in answer.responses
    }

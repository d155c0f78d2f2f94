"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets
(92): a share group's start offsets for admins (KIP-932), wire in and out.

The group coordinator says whether the group is a share group and whether it is Empty;
the offsets themselves are the share coordinator's, reached through the Persister
(broker/share/share_offsets.py). Authorization is Kafka's (KafkaApis): DESCRIBE on the
group and on each topic to describe, READ on the group and each topic to alter, DELETE
on the group and READ on each topic to delete. A group that is not Empty cannot have its
offsets altered or deleted (NON_EMPTY_GROUP): its members are consuming from them.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from herdless.broker.coordinators.group_coordinator import CoordinatorError
from herdless.broker.handlers.authorization import authorized_names
from herdless.broker.handlers.groups import group_refused, share_group
from herdless.broker.handlers.share_requests import known_error_code
from herdless.broker.share.share_offsets import ShareOffsets, StartOffset, denied
from herdless.coordinator.share_group import ShareGroupState
from herdless.coordinator.share_state.state import ShareStateError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

NO_TOPIC_ID = uuid.UUID(int=0)


def share_offsets(context: BrokerContext) -> ShareOffsets:
    persister = context.share_persister
    if persister is None:
        raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return ShareOffsets(persister, context.metadata, context.replicas, context.share_partitions)


async def handle_describe_share_group_offsets(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
    groups = []
    for asked in request.body.groups:
        groups.append(await _describe_group(context, request, Response.DescribedGroup, asked))
    return Response(throttle_time_ms=0, groups=groups)


async def _describe_group(context: BrokerContext, request: Request, Group: Any, asked: Any) -> Any:
    group_id = asked.group_id

    def failed(code: ErrorCode, message: str | None = None) -> Any:
        return Group(group_id=group_id, topics=[], error_code=code, error_message=message)

    if group_refused(context, request, AclOperation.DESCRIBE, group_id):
        return failed(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    described = await share_group(context, group_id)
    if described.error_code != ErrorCode.NONE:
        return failed(described.error_code, described.error_message)
    try:
        offsets = share_offsets(context)
    except CoordinatorError as exc:
        return failed(exc.error_code)
    wanted = None
    if asked.topics is not None:
        wanted = [(t.topic_name, list(t.partitions)) for t in asked.topics]
    found = await offsets.describe(group_id, wanted)
    names = {o.topic for o in found}
    allowed = authorized_names(context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    by_topic: dict[str, list[StartOffset]] = {}
    for offset in found:
        if offset.topic not in allowed:
            # Nothing of a topic the caller may not describe is told.
            offset = denied(offset.topic, offset.topic_id, offset.partition)
        by_topic.setdefault(offset.topic, []).append(offset)
    Topic = Group.DescribedTopic
    Partition = Topic.DescribedPartition
    return Group(
        group_id=group_id,
        error_code=ErrorCode.NONE,
        error_message=None,
        topics=[
            Topic(
                topic_name=topic,
                topic_id=partitions[0].topic_id,
                partitions=[
                    Partition(
                        partition_index=o.partition,
                        start_offset=o.start_offset,
                        leader_epoch=o.leader_epoch,
                        lag=o.lag,
                        error_code=o.error_code,
                        error_message=o.error_message,
                        in_flight_records=o.in_flight,
                        archived_records=o.archived,
                    )
                    for o in partitions
                ],
            )
            for topic, partitions in by_topic.items()
        ],
    )


async def _empty_share_group(
    context: BrokerContext, request: Request, operation: AclOperation, group_id: str
) -> tuple[ErrorCode, str | None]:
    """Whether an admin may change the group's offsets: allowed, a share group, Empty."""
    if group_refused(context, request, operation, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    described = await share_group(context, group_id)
    if described.error_code != ErrorCode.NONE:
        return described.error_code, described.error_message
    if described.group_state != str(ShareGroupState.EMPTY):
        return ErrorCode.NON_EMPTY_GROUP, (
            f"The group {group_id} has members; its offsets can be changed once it is Empty."
        )
    return ErrorCode.NONE, None


async def _offsets_of_empty_group(
    context: BrokerContext, request: Request, operation: AclOperation, group_id: str
) -> tuple[ErrorCode, str | None, ShareOffsets | None]:
    """The share group's offsets, to change: only once the group is Empty, and while the
    share coordinator is reachable (its error otherwise)."""
    error, message = await _empty_share_group(context, request, operation, group_id)
    if error != ErrorCode.NONE:
        return error, message, None
    try:
        return ErrorCode.NONE, None, share_offsets(context)
    except CoordinatorError as exc:
        return exc.error_code, message, None


async def handle_alter_share_group_offsets(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
    body = request.body
    group_id = body.group_id
    error, message, offsets = await _offsets_of_empty_group(
        context, request, AclOperation.READ, group_id
    )
    names = [t.topic_name for t in body.topics]
    allowed = authorized_names(context, request, AclOperation.READ, ResourceType.TOPIC, names)
    responses = []
    for topic in body.topics:
        name = topic.topic_name
        topic_id = None if offsets is None else offsets.topic_id(name)
        count = 0 if offsets is None else offsets.partitions(name) or 0
        answered = []
        for asked in topic.partitions:
            if error != ErrorCode.NONE:
                code, text = error, message
            elif name not in allowed:
                code, text = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
            elif topic_id is None or not 0 <= asked.partition_index < count:
                code, text = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
            elif asked.start_offset < 0:
                code, text = ErrorCode.INVALID_REQUEST, "A start offset cannot be negative."
            else:
                assert offsets is not None
                code, text = await _altered(offsets, group_id, topic_id, asked)
            answered.append(
                Response.AlteredTopic.AlteredPartition(
                    partition_index=asked.partition_index, error_code=code, error_message=text
                )
            )
        responses.append(
            Response.AlteredTopic(
                topic_name=name,
                topic_id=NO_TOPIC_ID if topic_id is None else topic_id,
                partitions=answered,
            )
        )
    return Response(
        throttle_time_ms=0, error_code=error, error_message=message, responses=responses
    )


async def _altered(
    offsets: ShareOffsets, group_id: str, topic_id: Any, asked: Any
) -> tuple[ErrorCode, str | None]:
    try:
        await offsets.alter(group_id, topic_id, asked.partition_index, asked.start_offset)
    except ShareStateError as exc:
        return known_error_code(exc.error_code), str(exc)
    log.info(
        "share group %s: start offset of topic %s partition %d set to %d",
        group_id,
        topic_id,
        asked.partition_index,
        asked.start_offset,
    )
    return ErrorCode.NONE, None


async def handle_delete_share_group_offsets(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
    body = request.body
    group_id = body.group_id
    error, message, offsets = await _offsets_of_empty_group(
        context, request, AclOperation.DELETE, group_id
    )
    if error != ErrorCode.NONE or offsets is None:
        return Response(throttle_time_ms=0, error_code=error, error_message=message, responses=[])
    names = [t.topic_name for t in body.topics]
    allowed = authorized_names(context, request, AclOperation.READ, ResourceType.TOPIC, names)
    responses = []
    for topic in body.topics:
        name = topic.topic_name
        topic_id = offsets.topic_id(name)
        code, text = ErrorCode.NONE, None
        if name not in allowed:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic_id is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            try:
                await offsets.delete(group_id, topic_id, offsets.partitions(name) or 0)
                log.info("share group %s: offsets of topic %s deleted", group_id, name)
            except ShareStateError as exc:
                code, text = known_error_code(exc.error_code), str(exc)
        responses.append(
            Response.DeletedTopic(
                topic_name=name,
                topic_id=NO_TOPIC_ID if topic_id is None else topic_id,
                error_code=code,
                error_message=text,
            )
        )
    return Response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=responses
    )

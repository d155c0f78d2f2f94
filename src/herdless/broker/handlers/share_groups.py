"""ShareGroupHeartbeat and ShareGroupDescribe (KIP-932): wire in, coordinator, wire out.

Both take the cluster's topics as data, as the consumer group APIs do
(consumer_groups.py): the heartbeat to assign the subscribed topics' partitions,
the describe to name the topics of assignments, which the API carries by id.
Authorization is Kafka's: READ on the group and DESCRIBE on each topic subscribed to
for a heartbeat; DESCRIBE on the group for a describe, whose members' topics the
caller must be able to describe too (TOPIC_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from herdless.broker.coordinators.consumer_topics import topics_image
from herdless.broker.coordinators.group_coordinator import CoordinatorError
from herdless.broker.handlers.authorization import (
    authorized_names,
    authorized_operations,
    operations_field,
)
from herdless.broker.handlers.consumer_groups import NOT_ASKED, subscription_refusal
from herdless.broker.handlers.groups import group_refused, run_operation
from herdless.coordinator import share_messages as m
from herdless.coordinator.consumer_messages import DescribedTopicPartitions
from herdless.coordinator.topic_metadata import by_topic
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)


async def handle_share_group_heartbeat(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.SHARE_GROUP_HEARTBEAT)
    names = body.subscribed_topic_names
    refusal = subscription_refusal(context, request, body.group_id, names)
    if refusal is not None:
        code, message = refusal
        return Response(
            throttle_time_ms=0,
            error_code=code,
            error_message=message,
            member_id=None,
            member_epoch=0,
            heartbeat_interval_ms=0,
            assignment=None,
        )
    heartbeat = m.ShareGroupHeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        rack_id=body.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client_id=request.client_id or "",
        client_host=request.client_host,
    )
    topics = topics_image(context.metadata, heartbeat.subscribed_topic_names or ())
    result = await run_operation(
        context,
        heartbeat.group_id,
        lambda shard, token, now: shard.share_group_heartbeat(heartbeat, topics, token, now),
        m.ShareGroupHeartbeatResponse,
    )
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "share heartbeat group=%s member=%s epoch=%d -> error=%s epoch=%d assigned=%s",
            heartbeat.group_id,
            heartbeat.member_id,
            heartbeat.member_epoch,
            result.error_code.name,
            result.member_epoch,
            None if result.assignment is None else len(result.assignment),
        )
    assignment = None
    if result.assignment is not None:
        Partitions = Response.Assignment.TopicPartitions
        assignment = Response.Assignment(
            topic_partitions=[
                Partitions(topic_id=topic_id, partitions=partitions)
                for topic_id, partitions in by_topic(result.assignment).items()
            ]
        )
    return Response(
        throttle_time_ms=0,
        error_code=result.error_code,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )


async def handle_share_group_describe(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.SHARE_GROUP_DESCRIBE)
    topics = topics_image(context.metadata)
    with_operations = request.body.include_authorized_operations
    groups = []
    for group_id in request.body.group_ids:
        operations = NOT_ASKED
        if group_refused(context, request, AclOperation.DESCRIBE, group_id):
            described = m.DescribedShareGroup(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        else:
            try:
                (described,) = await context.groups.run(
                    group_id,
                    lambda s, token, now, g=group_id: s.share_group_describe([g], topics, token),
                )
            except CoordinatorError as exc:
                described = m.DescribedShareGroup(group_id, exc.error_code)
            described = _without_hidden_topics(context, request, described)
            if with_operations and described.error_code == ErrorCode.NONE:
                operations = operations_field(
                    authorized_operations(context, request, ResourceType.GROUP, group_id)
                )
        groups.append(_described(Response.DescribedGroup, described, operations))
    return Response(throttle_time_ms=0, groups=groups)


def _without_hidden_topics(
    context: BrokerContext, request: Request, described: m.DescribedShareGroup
) -> m.DescribedShareGroup:
    """Kafka's rule: a group whose members use topics the caller may not describe is not
    shown, so that describing a group does not reveal them."""
    if context.acls is None or described.error_code != ErrorCode.NONE:
        return described
    used = sorted({name for x in described.members for name in x.subscribed_topic_names})
    allowed = authorized_names(context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, used)
    if set(used) <= allowed:
        return described
    return m.DescribedShareGroup(
        described.group_id,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "The described group uses topics that the client is not authorized to describe.",
    )


def _described(Group: Any, described: m.DescribedShareGroup, operations: int) -> Any:
    Member = Group.Member
    Assignment = Member.Assignment

    def assignment(partitions: tuple[DescribedTopicPartitions, ...]) -> Any:
        return Assignment(
            topic_partitions=[
                Assignment.TopicPartitions(
                    topic_id=p.topic_id, topic_name=p.topic_name, partitions=list(p.partitions)
                )
                for p in partitions
            ]
        )

    return Group(
        error_code=described.error_code,
        error_message=described.error_message,
        group_id=described.group_id,
        group_state=described.group_state,
        group_epoch=described.group_epoch,
        assignment_epoch=described.assignment_epoch,
        assignor_name=described.assignor_name,
        members=[
            Member(
                member_id=x.member_id,
                rack_id=x.rack_id,
                member_epoch=x.member_epoch,
                client_id=x.client_id,
                client_host=x.client_host,
                subscribed_topic_names=list(x.subscribed_topic_names),
                assignment=assignment(x.assignment),
            )
            for x in described.members
        ],
        authorized_operations=operations,
    )

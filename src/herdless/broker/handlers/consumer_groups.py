"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848): wire in, coordinator, wire out.

Both take the cluster's topics as data: the heartbeat to subscribe, assign and
notice new partitions, the describe to name the topics of assignments, which
the API carries by id.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from herdless.broker.coordinators.consumer_topics import topics_image
from herdless.broker.coordinators.group_coordinator import CoordinatorError
from herdless.broker.handlers.authorization import (
    REFUSALS,
    authorized_names,
    authorized_operations,
    operations_field,
)
from herdless.broker.handlers.groups import group_refused, run_operation
from herdless.coordinator import consumer_messages as m
from herdless.coordinator.topic_metadata import (
    TopicIdPartition,
    TopicsImage,
    by_topic,
    from_topics,
)
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

# ConsumerGroupDescribe v1 says what protocol each member speaks (KIP-1099): the classic
# one (a member not yet restarted after an online upgrade), or this one.
CLASSIC_MEMBER_TYPE = 0
CONSUMER_MEMBER_TYPE = 1
# An authorized-operations field not asked for (Kafka's default, Integer.MIN_VALUE).
NOT_ASKED = -(2**31)

log = logging.getLogger(__name__)


def _image(context: BrokerContext, names: tuple[str, ...] | None = None) -> TopicsImage:
    return topics_image(context.metadata, names or ())


async def handle_consumer_group_heartbeat(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    names = body.subscribed_topic_names
    owned = body.topic_partitions
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
    heartbeat = m.ConsumerGroupHeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=body.subscribed_topic_regex if request.api_version >= 1 else None,
        server_assignor=body.server_assignor,
        owned_partitions=(
            None if owned is None else from_topics((t.topic_id, t.partitions) for t in owned)
        ),
        client_id=request.client_id or "",
        client_host=request.client_host,
        api_version=request.api_version,
    )
    topics = _image(context, heartbeat.subscribed_topic_names)
    result = await run_operation(
        context,
        heartbeat.group_id,
        lambda shard, token, now: shard.consumer_group_heartbeat(heartbeat, topics, token, now),
        m.ConsumerGroupHeartbeatResponse,
    )
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "heartbeat group=%s member=%s epoch=%d rebalance_timeout=%d owned=%s"
            " -> error=%s epoch=%d assignment=%s",
            heartbeat.group_id,
            result.member_id or heartbeat.member_id,
            heartbeat.member_epoch,
            heartbeat.rebalance_timeout_ms,
            _partitions_text(heartbeat.owned_partitions),
            result.error_code.name,
            result.member_epoch,
            _partitions_text(result.assignment),
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


def subscription_refusal(
    context: BrokerContext, request: Request, group_id: str, subscribed: list[str] | None
) -> tuple[ErrorCode, str] | None:
    """Kafka's checks of a heartbeat: READ on the group, and DESCRIBE on every topic it
    subscribes to by name (a member must not learn of topics it may not describe by
    being assigned their partitions)."""
    if context.acls is None:
        return None
    if group_refused(context, request, AclOperation.READ, group_id):
        return REFUSALS[ResourceType.GROUP]
    if subscribed:
        allowed = authorized_names(
            context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, subscribed
        )
        refused = sorted(set(subscribed) - allowed)
        if refused:
            return (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                f"Topic authorization failed for {', '.join(refused)}.",
            )
    return None


async def handle_consumer_group_describe(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.CONSUMER_GROUP_DESCRIBE)
    Group = Response.DescribedGroup
    topics = _image(context)
    with_operations = request.body.include_authorized_operations
    groups = []
    for group_id in request.body.group_ids:
        operations = NOT_ASKED
        if group_refused(context, request, AclOperation.DESCRIBE, group_id):
            described = m.DescribedConsumerGroup(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        else:
            try:
                (described,) = await context.groups.run(
                    group_id,
                    lambda s, token, now, g=group_id: s.consumer_group_describe([g], topics, token),
                )
            except CoordinatorError as exc:
                described = m.DescribedConsumerGroup(group_id, exc.error_code)
            if with_operations and described.error_code == ErrorCode.NONE:
                operations = operations_field(
                    authorized_operations(context, request, ResourceType.GROUP, group_id)
                )
        groups.append(
            Group(
                error_code=described.error_code,
                error_message=described.error_message,
                group_id=described.group_id,
                group_state=described.group_state,
                group_epoch=described.group_epoch,
                assignment_epoch=described.assignment_epoch,
                assignor_name=described.assignor_name,
                members=[_member(Group.Member, x) for x in described.members],
                authorized_operations=operations,
            )
        )
    return Response(throttle_time_ms=0, groups=groups)


def _member(Member: Any, member: m.DescribedConsumerGroupMember) -> Any:
    Assignment = Member.Assignment

    def topic_partitions(partitions: tuple[m.DescribedTopicPartitions, ...]) -> list[Any]:
        return [
            Member.TopicPartitions(
                topic_id=p.topic_id, topic_name=p.topic_name, partitions=list(p.partitions)
            )
            for p in partitions
        ]

    def assignment(partitions: tuple[m.DescribedTopicPartitions, ...]) -> Any:
        return Assignment(topic_partitions=topic_partitions(partitions))

    return Member(
        member_id=member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        member_epoch=member.member_epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex,
        assignment=assignment(member.assignment),
        target_assignment=assignment(member.target_assignment),
        member_type=CLASSIC_MEMBER_TYPE if member.uses_classic_protocol else CONSUMER_MEMBER_TYPE,
        member_state=member.member_state,
        # Left out (null) when there is nothing to revoke: the tagged field costs nothing.
        partitions_pending_revocation=topic_partitions(member.pending_revocation) or None,
    )


def _partitions_text(partitions: Iterable[TopicIdPartition] | None) -> str:
    """Partitions as `null` (not sent) or `[<topic id prefix>:0-3,7 ...]`, short enough for a
    log line per heartbeat of a member holding hundreds."""
    if partitions is None:
        return "null"
    topics = []
    for topic_id, numbers in by_topic(partitions).items():
        runs: list[str] = []
        start = previous = numbers[0]
        for number in [*numbers[1:], None]:
            if number is not None and number == previous + 1:
                previous = number
                continue
            runs.append(str(start) if start == previous else f"{start}-{previous}")
            if number is not None:
                start = previous = number
        topics.append(f"{str(topic_id)[:8]}:{','.join(runs)}")
    return f"[{' '.join(topics)}]"

"""ShareAcknowledge (KIP-932) v1: a share consumer's acknowledgements alone, in its share
session (which only ShareFetch opens). Each partition's acknowledgements are applied
and written before the answer, and each partition told its outcome; at the final epoch
the session then closes and the member's remaining records are released."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.broker.clock import monotonic_ms
from herdless.broker.handlers.share_requests import (
    RequestRefused,
    acknowledge,
    check_request,
    node_endpoints,
    requested_acknowledgements,
    resolve,
    shares_of,
)
from herdless.broker.share.share_sessions import ShareSessionError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.protocol.fetch_metadata import FINAL_EPOCH

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext


async def handle_share_acknowledge(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.SHARE_ACKNOWLEDGE)
    try:
        shares = shares_of(context)
        check_request(context, request, body.group_id, body.member_id)
        named, acknowledgements = requested_acknowledgements(body.topics or ())
        key = (body.group_id, body.member_id)
        try:
            shares.sessions.for_acknowledge(key, body.share_session_epoch, monotonic_ms())
        except ShareSessionError as exc:
            raise RequestRefused(exc.error_code, str(exc)) from None
    except RequestRefused as error:
        refused = error.logged(request)
        return Response(
            throttle_time_ms=0,
            error_code=refused.error_code,
            error_message=str(refused),
            responses=[],
            node_endpoints=[],
        )
    group_id, member_id = body.group_id, body.member_id
    resolved = resolve(context, request, named)
    outcomes = await acknowledge(shares, group_id, member_id, resolved, acknowledgements)
    if body.share_session_epoch == FINAL_EPOCH:
        await shares.end_session(group_id, member_id)
    Topic = Response.ShareAcknowledgeTopicResponse
    Partition = Topic.PartitionData
    topics: dict[Any, Any] = {}
    for partition in named:
        item = resolved[partition]
        code, message = outcomes.get(partition, (item.error_code, item.error_message))
        topic = topics.get(item.topic_id)
        if topic is None:
            topic = topics[item.topic_id] = Topic(topic_id=item.topic_id, partitions=[])
        topic.partitions.append(
            Partition(
                partition_index=item.partition,
                error_code=code,
                error_message=message,
                current_leader=Partition.LeaderIdAndEpoch(
                    leader_id=item.current_leader[0], leader_epoch=item.current_leader[1]
                ),
            )
        )
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        responses=list(topics.values()),
        node_endpoints=node_endpoints(context, request, resolved.values(), Response.NodeEndpoint),
    )

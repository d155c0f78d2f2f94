"""DescribeTopicPartitions (KIP-966): Metadata's facts about topics, a page at a time.

Served as Kafka's DescribeTopicPartitionsRequestHandler serves it. Topics are walked in
name order from the request's cursor; an answer holds at most the request's
ResponsePartitionLimit partitions, capped by the broker's
`max.request.partition.size.limit` (2000), and names where the next page starts.
Topics the caller may not describe are left out of an answer about all of them and
refused by name otherwise, without saying whether they exist. A ZooKeeper cluster has
no eligible leader replicas (KIP-966's ELR lives in KRaft's partition records), so both
ELR lists are empty, as Kafka's are for a partition without them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from herdless.broker.coordinators.group_coordinator import INTERNAL_TOPICS
from herdless.broker.handlers.authorization import (
    authorize,
    authorized_operations,
    operations_field,
)
from herdless.cluster.metadata import TopicMetadata
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.protocol.topic_names import topic_name_problem
from herdless.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

# Kafka gives no topic id away with a refusal or for a topic that does not exist.
_NO_TOPIC_ID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class _Cursor:
    topic: str
    partition: int


async def handle_describe_topic_partitions(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
    TopicResponse = Response.DescribeTopicPartitionsResponseTopic
    cursor = (
        None
        if body.cursor is None
        else _Cursor(body.cursor.topic_name, body.cursor.partition_index)
    )
    all_topics = not body.topics
    after = "" if cursor is None else cursor.topic
    requested = context.metadata.topic_names() if all_topics else [t.name for t in body.topics]
    names = sorted({name for name in requested if name >= after})
    if not _cursor_starts(cursor, names, all_topics):
        # Kafka's InvalidRequestException: every topic asked for refused, nothing else.
        return Response(
            throttle_time_ms=0,
            topics=[
                TopicResponse(
                    error_code=ErrorCode.INVALID_REQUEST,
                    name=t.name,
                    topic_id=_NO_TOPIC_ID,
                    is_internal=False,
                    partitions=[],
                )
                for t in body.topics
            ],
            next_cursor=None,
        )

    # The request's limit within the broker's; below 1 taken as 1, as Kafka takes it.
    remaining = max(
        min(context.config.max_request_partition_size_limit, body.response_partition_limit), 1
    )
    topics: list[Any] = []
    refused: list[Any] = []
    next_cursor = None
    for name in names:
        # Asked as each topic is reached, as Kafka's lazy filter asks: a topic past the
        # end of the page is neither decided nor logged.
        if not authorize(context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if not all_topics:
                refused.append(
                    TopicResponse(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        name=name,
                        topic_id=_NO_TOPIC_ID,
                        is_internal=False,
                        partitions=[],
                    )
                )
            continue
        if remaining == 0:
            # The page ended with the last topic's last partition: the next page starts
            # at this one (which may not exist; the next answer says so).
            next_cursor = Response.Cursor(topic_name=name, partition_index=0)
            break
        topic = context.metadata.topic(name)
        if topic is None:
            if not all_topics:
                topics.append(_missing(name, TopicResponse))
            continue
        start = cursor.partition if cursor is not None and name == cursor.topic else 0
        answer, next_partition = _describe(topic, start, remaining, TopicResponse)
        topics.append(answer)
        if next_partition is not None:
            next_cursor = Response.Cursor(topic_name=name, partition_index=next_partition)
            break
        remaining -= len(answer.partitions)

    for answer in topics:
        answer.topic_authorized_operations = operations_field(
            authorized_operations(context, request, ResourceType.TOPIC, answer.name)
        )
    return Response(throttle_time_ms=0, topics=topics + refused, next_cursor=next_cursor)


def _cursor_starts(cursor: _Cursor | None, names: list[str], all_topics: bool) -> bool:
    """Whether the cursor can start this request's walk, by Kafka's two rules: a request
    that names topics names the cursor's, and no partition index is negative."""
    if cursor is None:
        return True
    return (all_topics or cursor.topic in names) and cursor.partition >= 0


def _describe(
    topic: TopicMetadata, start: int, most: int, TopicResponse: Any
) -> tuple[Any, int | None]:
    """The topic's partitions from `start`, at most `most` of them, and the partition the
    next page starts at (None when this one reaches the topic's last)."""
    PartitionResponse = TopicResponse.DescribeTopicPartitionsResponsePartition
    count = len(topic.partitions)
    end = min(count, start + most)
    partitions = [
        # Kafka names a partition without a leader by leader -1 alone, with no error.
        PartitionResponse(
            error_code=ErrorCode.NONE,
            partition_index=p.partition,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            eligible_leader_replicas=[],
            last_known_elr=[],
            offline_replicas=list(p.offline_replicas),
        )
        for p in topic.partitions
        if start <= p.partition < end
    ]
    answer = TopicResponse(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=partitions,
    )
    return answer, (end if end < count else None)


def _missing(name: str, TopicResponse: Any) -> Any:
    """A topic asked for by name that does not exist, or cannot (an illegal name)."""
    error = (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if topic_name_problem(name) is None
        else ErrorCode.INVALID_TOPIC_EXCEPTION
    )
    return TopicResponse(
        error_code=error,
        name=name,
        topic_id=_NO_TOPIC_ID,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[],
    )

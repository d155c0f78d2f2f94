"""OffsetForLeaderEpoch: where a leader epoch ends in the leader's log (KIP-101, KIP-320).

Followers ask it after a leader change to find where their log diverges from
the new leader's; consumers ask it after a leader change to check that the
offset they hold was not truncated away.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import authorize_cluster, authorized_names
from herdless.broker.replication.replica_manager import PartitionError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

UNDEFINED = -1


async def handle_offset_for_leader_epoch(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    TopicResult = Response.OffsetForLeaderTopicResult
    PartitionResult = TopicResult.EpochEndOffset
    names = [topic.topic for topic in request.body.topics]
    # Brokers ask with CLUSTER_ACTION; consumers (KIP-320) with DESCRIBE on each topic.
    if authorize_cluster(context, request, AclOperation.CLUSTER_ACTION, log_denied=False):
        described = set(names)
    else:
        described = authorized_names(
            context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, names
        )
    topics = []
    for topic in request.body.topics:
        partitions = []
        for wanted in topic.partitions:
            result = PartitionResult(
                error_code=ErrorCode.NONE,
                partition=wanted.partition,
                leader_epoch=UNDEFINED,
                end_offset=UNDEFINED,
            )
            partitions.append(result)
            if topic.topic not in described:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                partition_log = context.replicas.leader_log(
                    topic.topic, wanted.partition, wanted.current_leader_epoch
                )
            except PartitionError as exc:
                result.error_code = exc.error_code
                continue
            leader_epoch = context.replicas.leader_epoch(partition_log)
            if wanted.leader_epoch >= 0 and wanted.leader_epoch == leader_epoch:
                # The leader's own epoch ends at its log end, even in a partition never
                # written to (Kafka's leader files its epoch as it takes over; one broker
                # alone files it at the first append). Told UNDEFINED, librdkafka validating
                # offset 0 after a reconnect reset to the end and skipped what came meanwhile.
                result.leader_epoch, result.end_offset = leader_epoch, partition_log.log_end_offset
                continue
            result.leader_epoch, result.end_offset = partition_log.end_offset_for_epoch(
                wanted.leader_epoch
            )
        topics.append(TopicResult(topic=topic.topic, partitions=partitions))
    return Response(throttle_time_ms=0, topics=topics)

"""The share coordinator's state APIs, which only brokers send (KIP-932):
InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState and ReadShareGroupStateSummary.

Each asks Kafka's authorization first (CLUSTER_ACTION on the cluster, as Kafka's
KafkaApis does for these broker-to-broker APIs), then runs every named share partition
on its shard of `__share_group_state`, each answered on its own: its error code
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, FENCED_STATE_EPOCH,
FENCED_LEADER_EPOCH, INVALID_REQUEST...) and message, and its state where it asked
for one. A request that names no topic id, a negative partition or an unknown delivery
state is refused for that partition with INVALID_REQUEST, and nothing is written.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import authorize_cluster
from herdless.coordinator.share_state import (
    PartitionState,
    RecordState,
    SharePartitionKey,
    StateBatch,
)
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

_NO_TOPIC_ID = uuid.UUID(int=0)
_DELIVERY_STATES = frozenset(int(state) for state in RecordState)

# One partition's answer: an error code, or what it read.
Answer = ErrorCode | PartitionState
# Runs one partition of a request on the coordinator: its answer.
PartitionCall = Callable[[SharePartitionKey, Any], Awaitable[Answer]]


class _Invalid(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def _serve(
    context: BrokerContext,
    request: Request,
    api_key: ApiKey,
    topic_result: str,
    call: PartitionCall,
    result_fields: Callable[[Answer], dict[str, Any]],
) -> Any:
    """Run `call` for every partition the request names, all at once, and answer each;
    `topic_result` names the response's class of a topic's results."""
    body = request.body
    Response = response_class(api_key)
    TopicResult = getattr(Response, topic_result)
    PartitionResult = TopicResult.PartitionResult
    jobs: list[tuple[uuid.UUID, int, Awaitable[Answer]]] = []
    allowed = authorize_cluster(context, request, AclOperation.CLUSTER_ACTION)
    for topic in body.topics:
        for partition in topic.partitions:
            jobs.append(
                (
                    topic.topic_id,
                    partition.partition,
                    _one(context, allowed, body.group_id, topic.topic_id, partition, call),
                )
            )
    answers = await asyncio.gather(*(job for _, _, job in jobs))
    results: dict[uuid.UUID, list[Any]] = {}
    for (topic_id, index, _), (answer, message) in zip(jobs, answers, strict=True):
        error = answer if isinstance(answer, ErrorCode) else ErrorCode.NONE
        results.setdefault(topic_id, []).append(
            PartitionResult(
                partition=index,
                error_code=error,
                error_message=message,
                **result_fields(answer),
            )
        )
    return Response(
        results=[
            TopicResult(topic_id=topic_id, partitions=partitions)
            for topic_id, partitions in results.items()
        ]
    )


async def _one(
    context: BrokerContext,
    allowed: bool,
    group_id: str,
    topic_id: uuid.UUID,
    partition: Any,
    call: PartitionCall,
) -> tuple[Answer, str | None]:
    if not allowed:
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
    if context.share_coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "this broker has no share coordinator"
    try:
        if not group_id:
            raise _Invalid("the group id is empty")
        if topic_id is None or topic_id == _NO_TOPIC_ID:
            raise _Invalid("the topic id is missing")
        if partition.partition < 0:
            raise _Invalid(f"partition {partition.partition} is negative")
        answer = await call(SharePartitionKey(group_id, topic_id, partition.partition), partition)
    except _Invalid as exc:
        return ErrorCode.INVALID_REQUEST, exc.message
    if isinstance(answer, ErrorCode) and answer != ErrorCode.NONE:
        return answer, _MESSAGES.get(answer)
    return answer, None


_MESSAGES = {
    ErrorCode.FENCED_STATE_EPOCH: "the share partition's state epoch is newer than the request's",
    ErrorCode.FENCED_LEADER_EPOCH: "the share partition's leader epoch is newer than the request's",
}


def _no_fields(answer: Answer) -> dict[str, Any]:
    return {}


# -- the five APIs -------------------------------------------------------------------------


async def handle_initialize_share_group_state(context: BrokerContext, request: Request) -> Any:
    async def call(key: SharePartitionKey, partition: Any) -> Answer:
        assert context.share_coordinator is not None
        if partition.start_offset < -1:
            raise _Invalid(f"start offset {partition.start_offset} is negative")
        return await context.share_coordinator.initialize(
            key, partition.state_epoch, partition.start_offset
        )

    return await _serve(
        context,
        request,
        ApiKey.INITIALIZE_SHARE_GROUP_STATE,
        "InitializeStateResult",
        call,
        _no_fields,
    )


async def handle_read_share_group_state(context: BrokerContext, request: Request) -> Any:
    async def call(key: SharePartitionKey, partition: Any) -> Answer:
        assert context.share_coordinator is not None
        return await context.share_coordinator.read_state(key, partition.leader_epoch)

    Batch = response_class(ApiKey.READ_SHARE_GROUP_STATE).ReadStateResult.PartitionResult.StateBatch

    def fields(answer: Answer) -> dict[str, Any]:
        if not isinstance(answer, PartitionState):
            return {"state_epoch": 0, "start_offset": -1, "state_batches": []}
        return {
            "state_epoch": answer.state_epoch,
            "start_offset": answer.start_offset,
            "state_batches": [
                Batch(
                    first_offset=batch.first_offset,
                    last_offset=batch.last_offset,
                    delivery_state=int(batch.delivery_state),
                    delivery_count=batch.delivery_count,
                )
                for batch in answer.batches
            ],
        }

    return await _serve(
        context, request, ApiKey.READ_SHARE_GROUP_STATE, "ReadStateResult", call, fields
    )


async def handle_write_share_group_state(context: BrokerContext, request: Request) -> Any:
    async def call(key: SharePartitionKey, partition: Any) -> Answer:
        assert context.share_coordinator is not None
        batches = []
        for batch in partition.state_batches:
            if batch.delivery_state not in _DELIVERY_STATES:
                raise _Invalid(f"unknown delivery state {batch.delivery_state}")
            if batch.first_offset < 0 or batch.last_offset < batch.first_offset:
                raise _Invalid(
                    f"state batch {batch.first_offset}-{batch.last_offset} is not a range"
                    " of offsets"
                )
            batches.append(
                StateBatch(
                    batch.first_offset,
                    batch.last_offset,
                    RecordState(batch.delivery_state),
                    batch.delivery_count,
                )
            )
        if partition.start_offset < -1:
            raise _Invalid(f"start offset {partition.start_offset} is negative")
        return await context.share_coordinator.write(
            key,
            partition.state_epoch,
            partition.leader_epoch,
            partition.start_offset,
            tuple(batches),
        )

    return await _serve(
        context, request, ApiKey.WRITE_SHARE_GROUP_STATE, "WriteStateResult", call, _no_fields
    )


async def handle_delete_share_group_state(context: BrokerContext, request: Request) -> Any:
    async def call(key: SharePartitionKey, partition: Any) -> Answer:
        assert context.share_coordinator is not None
        return await context.share_coordinator.delete(key)

    return await _serve(
        context, request, ApiKey.DELETE_SHARE_GROUP_STATE, "DeleteStateResult", call, _no_fields
    )


async def handle_read_share_group_state_summary(context: BrokerContext, request: Request) -> Any:
    async def call(key: SharePartitionKey, partition: Any) -> Answer:
        assert context.share_coordinator is not None
        return await context.share_coordinator.read_summary(key, partition.leader_epoch)

    def fields(answer: Answer) -> dict[str, Any]:
        if not isinstance(answer, PartitionState):
            return {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1}
        return {
            "state_epoch": answer.state_epoch,
            "leader_epoch": answer.leader_epoch,
            "start_offset": answer.start_offset,
        }

    return await _serve(
        context,
        request,
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        "ReadStateSummaryResult",
        call,
        fields,
    )

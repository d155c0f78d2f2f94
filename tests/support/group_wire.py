"""Group-coordinator requests sent raw to one chosen broker, with no client in between.

A client library finds the coordinator, follows it when it moves and retries what
fails; these requests go to the broker a test names and bring back exactly what it
answered, so a test can ask a particular broker whether it coordinates a group.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from tests.support.broker import BrokerProcess
from tests.support.wire import Wire

KEY_TYPE_GROUP = 0
NO_GENERATION = -1


def find_coordinator_request(group: str) -> Any:
    return FindCoordinatorRequest[3](key=group, key_type=KEY_TYPE_GROUP)


def heartbeat_request(group: str, generation: int, member_id: str) -> Any:
    return HeartbeatRequest[4](
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None
    )


def offset_fetch_request(group: str, topic: str, partitions: list[int]) -> Any:
    Topic = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest[7](
        group_id=group,
        topics=[Topic(name=topic, partition_indexes=partitions)],
        require_stable=False,
    )


def offset_commit_request(
    group: str,
    topic: str,
    offsets: dict[int, int],
    generation: int = NO_GENERATION,
    member_id: str = "",
    metadata: str = "",
) -> Any:
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition
    return OffsetCommitRequest[8](
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=None,
        topics=[
            Topic(
                name=topic,
                partitions=[
                    Partition(
                        partition_index=partition,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata=metadata,
                    )
                    for partition, offset in sorted(offsets.items())
                ],
            )
        ],
    )


RESPONSE_CLASSES = {
    FindCoordinatorRequest: FindCoordinatorResponse,
    HeartbeatRequest: HeartbeatResponse,
    OffsetFetchRequest: OffsetFetchResponse,
    OffsetCommitRequest: OffsetCommitResponse,
}


def response_class(request: Any) -> type:
    return next(r for q, r in RESPONSE_CLASSES.items() if isinstance(request, q))


def ask(broker: BrokerProcess, request: Any, timeout: float = 10.0) -> Any:
    """Send `request` to `broker` on a new connection; its answer."""
    wire = Wire(broker, timeout)
    try:
        return wire.call(request, response_class(request))
    finally:
        wire.close()


def error_of(response: Any) -> int:
    """The answer's error code: the request's own, else the first partition's that failed."""
    if isinstance(response, OffsetCommitResponse):
        codes = [p.error_code for t in response.topics for p in t.partitions]
        return next((code for code in codes if code), 0)
    if isinstance(response, OffsetFetchResponse) and not response.error_code:
        codes = [p.error_code for t in response.topics for p in t.partitions]
        return next((code for code in codes if code), 0)
    return response.error_code


def fetched_offsets(response: Any) -> dict[int, int]:
    """partition -> committed offset in an OffsetFetch answer (-1: nothing committed)."""
    return {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}

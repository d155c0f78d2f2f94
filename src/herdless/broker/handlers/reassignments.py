"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455), as a
ZooKeeper-era Kafka broker serves them.

Both are the controller's; a broker that is not answers NOT_CONTROLLER, and clients ask
the controller Metadata names. One broker alone is the only replica of each partition:
it can be reassigned to itself (nothing to do) and nothing is ever being reassigned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import authorize_cluster
from herdless.cluster.controller import ReassignmentResult
from herdless.cluster.errors import ControllerMoved
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

Key = tuple[str, int]


async def handle_alter_partition_reassignments(context: BrokerContext, request: Request) -> Any:
    body = request.body
    targets: dict[Key, tuple[int, ...] | None] = {
        (t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
        for t in body.topics
        for p in t.partitions
    }
    if not authorize_cluster(context, request, AclOperation.ALTER):
        denied = ReassignmentResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return _alter_response(
            request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, dict.fromkeys(targets, denied)
        )
    allow_rf_change = getattr(body, "allow_replication_factor_change", True)
    controller = context.controller()
    if controller is None and not context.config.clustered:
        results = {key: _alone(context, key, target) for key, target in targets.items()}
    elif controller is None:
        return _alter_response(request, ErrorCode.NOT_CONTROLLER, {})
    else:
        results = await controller.alter_reassignments(targets, allow_rf_change)
    return _alter_response(request, ErrorCode.NONE, results)


def _alone(context: BrokerContext, key: Key, target: tuple[int, ...] | None) -> ReassignmentResult:
    found = context.metadata.topic(key[0])
    if found is None or all(p.partition != key[1] for p in found.partitions):
        return ReassignmentResult(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        )
    if target is None:
        return ReassignmentResult(
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
            f"Partition {key[0]}-{key[1]} is not being reassigned.",
        )
    if target != (context.node_id,):
        return ReassignmentResult(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The proposed assignment contains non-live brokers: {list(target)}.",
        )
    return ReassignmentResult(ErrorCode.NONE)


def _alter_response(
    request: Request, error: ErrorCode, results: dict[Key, ReassignmentResult]
) -> Any:
    Response = response_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
    Topic = Response.ReassignableTopicResponse
    Partition = Topic.ReassignablePartitionResponse
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), result in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            Partition(
                partition_index=partition,
                error_code=result.error,
                error_message=result.message,
            )
        )
    return Response(
        throttle_time_ms=0,
        allow_replication_factor_change=getattr(
            request.body, "allow_replication_factor_change", True
        ),
        error_code=error,
        error_message=None if error == ErrorCode.NONE else error.name,
        responses=[
            Topic(name=topic, partitions=partitions) for topic, partitions in by_topic.items()
        ],
    )


async def handle_list_partition_reassignments(context: BrokerContext, request: Request) -> Any:
    body = request.body
    if not authorize_cluster(context, request, AclOperation.DESCRIBE):
        return _list_response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, {})
    asked: list[Key] | None = (
        None
        if body.topics is None
        else [(t.name, p) for t in body.topics for p in t.partition_indexes]
    )
    controller = context.controller()
    if controller is None and not context.config.clustered:
        return _list_response(ErrorCode.NONE, {})
    if controller is None:
        return _list_response(ErrorCode.NOT_CONTROLLER, {})
    try:
        listed = await controller.list_reassignments(asked)
    except ControllerMoved:
        return _list_response(ErrorCode.NOT_CONTROLLER, {})
    return _list_response(
        ErrorCode.NONE,
        {key: (r.replicas, r.adding, r.removing) for key, r in listed.items()},
    )


def _list_response(
    error: ErrorCode, listed: dict[Key, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]
) -> Any:
    Response = response_class(ApiKey.LIST_PARTITION_REASSIGNMENTS)
    Topic = Response.OngoingTopicReassignment
    Partition = Topic.OngoingPartitionReassignment
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), (replicas, adding, removing) in sorted(listed.items()):
        by_topic.setdefault(topic, []).append(
            Partition(
                partition_index=partition,
                replicas=list(replicas),
                adding_replicas=list(adding),
                removing_replicas=list(removing),
            )
        )
    return Response(
        throttle_time_ms=0,
        error_code=error,
        error_message=None if error == ErrorCode.NONE else error.name,
        topics=[Topic(name=topic, partitions=partitions) for topic, partitions in by_topic.items()],
    )

"""Leadership: ElectLeaders (KIP-460) and ControlledShutdown, as a ZooKeeper-era Kafka
broker serves them.

Both are the controller's. A broker that is not the controller answers NOT_CONTROLLER
(per partition for ElectLeaders), and clients ask the controller Metadata names, as
Kafka's admin client does. One broker alone is its own controller and the only replica
of each partition, which therefore already has its preferred leader: ElectLeaders
answers ELECTION_NOT_NEEDED for each partition that exists.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import authorize_cluster
from herdless.cluster.controller import ElectionResult, ElectionType
from herdless.cluster.errors import ClusterError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

# Between two looks at whether this broker's metadata shows the leaders just elected.
_LEADER_POLL_S = 0.01

Key = tuple[str, int]


async def handle_elect_leaders(context: BrokerContext, request: Request) -> Any:
    body = request.body
    asked: list[Key] | None = (
        None
        if body.topic_partitions is None
        else [(t.topic, p) for t in body.topic_partitions for p in t.partitions]
    )
    if not authorize_cluster(context, request, AclOperation.ALTER):
        denied = ElectionResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return _response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, dict.fromkeys(asked or [], denied))
    # v0 knows only the preferred election.
    asked_type = getattr(body, "election_type", ElectionType.PREFERRED)
    if asked_type not in ElectionType._value2member_map_:
        refused = ElectionResult(ErrorCode.INVALID_REQUEST, f"unknown election type {asked_type}")
        return _response(ErrorCode.INVALID_REQUEST, dict.fromkeys(asked or [], refused))
    election_type = ElectionType(asked_type)
    controller = context.controller()
    if controller is None and not context.config.clustered:
        results = _alone(context, asked)
    elif controller is None:
        results = dict.fromkeys(asked or [], ElectionResult(ErrorCode.NOT_CONTROLLER))
    else:
        results = await controller.elect_leaders(election_type, asked)
        await _until_leaders_known(context, results, body.timeout_ms / 1000)
    if asked is None:
        # Over every partition, only those elected or failed are told (as Kafka does).
        results = {k: r for k, r in results.items() if r.error != ErrorCode.ELECTION_NOT_NEEDED}
    return _response(ErrorCode.NONE, results)


def _alone(context: BrokerContext, asked: list[Key] | None) -> dict[Key, ElectionResult]:
    if asked is None:
        asked = [
            (name, p.partition)
            for name in context.metadata.topic_names()
            for p in _partitions(context, name)
        ]
    results = {}
    for topic, partition in asked:
        known = any(p.partition == partition for p in _partitions(context, topic))
        results[(topic, partition)] = (
            ElectionResult(ErrorCode.ELECTION_NOT_NEEDED)
            if known
            else ElectionResult(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
            )
        )
    return results


def _partitions(context: BrokerContext, topic: str) -> tuple[Any, ...]:
    found = context.metadata.topic(topic)
    return () if found is None else found.partitions


async def _until_leaders_known(
    context: BrokerContext, results: dict[Key, ElectionResult], timeout_s: float
) -> None:
    """Answer once this broker's metadata names the leaders elected, as Kafka's
    DelayedElectLeader does, so that a client's next Metadata request finds them; at the
    latest after the request's timeout."""
    elected = {k: r.leader for k, r in results.items() if r.error == ErrorCode.NONE}

    def known() -> bool:
        return all(
            any(p.partition == partition and p.leader == leader for p in _partitions(context, t))
            for (t, partition), leader in elected.items()
        )

    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_s, 0)
    while not known() and loop.time() < deadline:
        await asyncio.sleep(_LEADER_POLL_S)


def _response(error: ErrorCode, results: dict[Key, ElectionResult]) -> Any:
    Response = response_class(ApiKey.ELECT_LEADERS)
    Result = Response.ReplicaElectionResult
    Partition = Result.PartitionResult
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), result in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            Partition(
                partition_id=partition,
                error_code=result.error,
                error_message=result.message,
            )
        )
    return Response(
        throttle_time_ms=0,
        error_code=error,
        replica_election_results=[
            Result(topic=topic, partition_result=partitions)
            for topic, partitions in by_topic.items()
        ],
    )


async def handle_controlled_shutdown(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.CONTROLLED_SHUTDOWN)
    if not authorize_cluster(context, request, AclOperation.CLUSTER_ACTION):
        return Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, remaining_partitions=[])
    controller = context.controller()
    if controller is None and not context.config.clustered:
        # Alone, this broker is the controller, and its partitions have nowhere to go.
        known = body.broker_id == context.node_id
        error = ErrorCode.NONE if known else ErrorCode.BROKER_NOT_AVAILABLE
        return Response(error_code=error, remaining_partitions=[])
    if controller is None:
        return Response(error_code=ErrorCode.NOT_CONTROLLER, remaining_partitions=[])
    epoch = getattr(body, "broker_epoch", -1)
    try:
        remaining = await controller.controlled_shutdown(body.broker_id, epoch)
    except ClusterError as exc:
        return Response(error_code=exc.error_code, remaining_partitions=[])
    Remaining = Response.RemainingPartition
    return Response(
        error_code=ErrorCode.NONE,
        remaining_partitions=[Remaining(topic_name=t, partition_index=p) for t, p in remaining],
    )

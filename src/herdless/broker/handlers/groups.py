"""The classic group protocol and offsets: wire messages in, coordinator operations, wire out.

The coordinator speaks its own plain dataclasses (herdless.coordinator.messages);
this module is the translation, with each version's quirks: v0 JoinGroup has no
rebalance timeout, LeaveGroup before v3 names one member, OffsetFetch from v8
batches groups.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from functools import cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from herdless.broker.coordinators.consumer_topics import topics_image
from herdless.broker.coordinators.group_coordinator import CoordinatorError, Operation
from herdless.broker.handlers.authorization import (
    authorize,
    authorize_cluster,
    authorized_names,
    authorized_operations,
)
from herdless.broker.handlers.share_requests import known_error_code
from herdless.broker.handlers.txn_verification import add_offsets_partition
from herdless.broker.share.share_offsets import ShareOffsets
from herdless.coordinator import messages as m
from herdless.coordinator.consumer_protocol import subscribed_topics
from herdless.coordinator.share_group import ShareGroupState
from herdless.coordinator.share_messages import DescribedShareGroup
from herdless.coordinator.share_state.state import ShareStateError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.protocol.offset_commit import CommitResponse
from herdless.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

T = TypeVar("T")


async def run_operation(
    context: BrokerContext, group_id: str, operation: Operation, on_error: Callable[[ErrorCode], T]
) -> T:
    """Run a coordinator operation, or answer as the API does when the group can't be served."""
    try:
        return await context.groups.run(group_id, operation)
    except CoordinatorError as exc:
        return on_error(exc.error_code)


def group_refused(
    context: BrokerContext, request: Request, operation: AclOperation, group_id: str
) -> bool:
    """Whether the caller may not do `operation` on the group (GROUP_AUTHORIZATION_FAILED).
    Without an authorizer: one attribute test, on the paths of every heartbeat."""
    return context.acls is not None and not authorize(
        context, request, operation, ResourceType.GROUP, group_id
    )


async def handle_join_group(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.JOIN_GROUP)
    if group_refused(context, request, AclOperation.READ, body.group_id):
        return _joined(Response, m.JoinGroupResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED), request)
    join = m.JoinGroupRequest(
        group_id=body.group_id,
        session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=(
            body.session_timeout_ms if request.api_version == 0 else body.rebalance_timeout_ms
        ),
        member_id=body.member_id,
        protocol_type=body.protocol_type,
        protocols=tuple(m.Protocol(p.name, bytes(p.metadata)) for p in body.protocols),
        group_instance_id=body.group_instance_id,
        client_id=request.client_id or "",
        client_host=request.client_host,
        reason=body.reason,
        api_version=request.api_version,
    )
    # A member joining a consumer group (KIP-848's online upgrade) is assigned by the
    # coordinator, which needs the topics it subscribes to.
    subscribed = subscribed_topics(join.protocols[0].metadata) if join.protocols else None
    topics = topics_image(context.metadata, subscribed or ())
    result = await run_operation(
        context,
        join.group_id,
        lambda shard, token, now: shard.join_group(join, token, now, topics),
        lambda error: m.JoinGroupResponse(error, member_id=body.member_id),
    )
    return _joined(Response, result, request)


def _joined(Response: Any, result: m.JoinGroupResponse, request: Request) -> Any:
    return Response(
        throttle_time_ms=0,
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=_name(result.protocol_name, request.api_version, nullable_from=7),
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            Response.JoinGroupResponseMember(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                metadata=member.metadata,
            )
            for member in result.members
        ],
    )


def _name(value: str | None, version: int, nullable_from: int) -> str | None:
    """Older versions have no null for this string: send an empty one."""
    if value is None and version < nullable_from:
        return ""
    return value


async def handle_sync_group(context: BrokerContext, request: Request) -> Any:
    body = request.body
    if group_refused(context, request, AclOperation.READ, body.group_id):
        return _synced(m.SyncGroupResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    sync = m.SyncGroupRequest(
        group_id=body.group_id,
        generation_id=body.generation_id,
        member_id=body.member_id,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in body.assignments),
        group_instance_id=body.group_instance_id,
        protocol_type=body.protocol_type,
        protocol_name=body.protocol_name,
    )
    result = await run_operation(
        context,
        sync.group_id,
        lambda shard, token, now: shard.sync_group(sync, token, now),
        lambda error: m.SyncGroupResponse(error),
    )
    return _synced(result)


def _synced(result: m.SyncGroupResponse) -> Any:
    return response_class(ApiKey.SYNC_GROUP)(
        throttle_time_ms=0,
        error_code=result.error_code,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def handle_heartbeat(context: BrokerContext, request: Request) -> Any:
    body = request.body
    if context.acls is not None and group_refused(
        context, request, AclOperation.READ, body.group_id
    ):
        return _heartbeat_response(int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    heartbeat = m.HeartbeatRequest(
        group_id=body.group_id,
        generation_id=body.generation_id,
        member_id=body.member_id,
        group_instance_id=body.group_instance_id,
    )
    result = await run_operation(
        context,
        heartbeat.group_id,
        lambda shard, token, now: shard.heartbeat(heartbeat, token, now),
        m.HeartbeatResponse,
    )
    return _heartbeat_response(int(result.error_code))


@cache
def _heartbeat_response(error_code: int) -> Any:
    """Heartbeat answers differ only in their error code, and the compiled encoder never
    changes a message: one of each, not a kafka-python message built per heartbeat."""
    return response_class(ApiKey.HEARTBEAT)(throttle_time_ms=0, error_code=error_code)


async def handle_leave_group(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.LEAVE_GROUP)
    if request.api_version < 3:
        members: tuple[m.LeavingMember, ...] = (m.LeavingMember(body.member_id),)
    else:
        members = tuple(
            m.LeavingMember(x.member_id, x.group_instance_id, x.reason) for x in body.members
        )
    leave = m.LeaveGroupRequest(body.group_id, members)
    if group_refused(context, request, AclOperation.READ, body.group_id):
        result = m.LeaveGroupResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    else:
        result = await run_operation(
            context,
            leave.group_id,
            lambda shard, token, now: shard.leave_group(leave, token, now),
            lambda error: m.LeaveGroupResponse(error),
        )
    error = result.error_code
    if request.api_version < 3 and error is ErrorCode.NONE and result.members:
        error = result.members[0].error_code
    return Response(
        throttle_time_ms=0,
        error_code=error,
        members=[
            Response.MemberResponse(
                member_id=x.member_id,
                group_instance_id=x.group_instance_id,
                error_code=x.error_code,
            )
            for x in result.members
        ],
    )


async def handle_offset_commit(context: BrokerContext, request: Request) -> Any:
    body = request.body
    commit = m.OffsetCommitRequest(
        group_id=body.group_id,
        # Decoded as CommitTopic and CommitPartition tuples (protocol/offset_commit.py).
        topics=tuple(body.topics),
        generation_id=body.generation_id_or_member_epoch,
        member_id=body.member_id or "",
        group_instance_id=body.group_instance_id,
        retention_time_ms=body.retention_time_ms if 2 <= request.api_version <= 4 else -1,
        api_version=request.api_version,
    )
    # As Kafka does: the group needs READ, else every partition is refused; so does each
    # topic, else its partitions are.
    unauthorized: tuple[m.CommitTopic, ...] = ()
    if context.acls is not None:
        if group_refused(context, request, AclOperation.READ, commit.group_id):
            return CommitResponse(
                0, _every_partition(commit.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
            )
        commit, unauthorized = _readable_topics(context, request, commit)
    answered = await _store_commit(
        context,
        commit,
        unauthorized,
        lambda shard, stored, token, now: shard.offset_commit(stored, token, now),
    )
    return CommitResponse(0, answered)


_Commit = TypeVar("_Commit", m.OffsetCommitRequest, m.TxnOffsetCommitRequest)


def _readable_topics(
    context: BrokerContext, request: Request, commit: _Commit
) -> tuple[_Commit, tuple[m.CommitTopic, ...]]:
    """The commit of the topics the caller may READ, and the topics it may not."""
    allowed = authorized_names(
        context, request, AclOperation.READ, ResourceType.TOPIC, [t.name for t in commit.topics]
    )
    if len(allowed) == len({t.name for t in commit.topics}):
        return commit, ()
    refused = tuple(t for t in commit.topics if t.name not in allowed)
    return replace(commit, topics=tuple(t for t in commit.topics if t.name in allowed)), refused


async def handle_txn_offset_commit(context: BrokerContext, request: Request) -> Any:
    """Offsets committed inside a transaction (send_offsets_to_transaction), pending in
    the group's coordinator until the transaction's marker reaches it."""
    body = request.body
    version = request.api_version
    Response = response_class(ApiKey.TXN_OFFSET_COMMIT)
    commit = m.TxnOffsetCommitRequest(
        group_id=body.group_id,
        transactional_id=body.transactional_id,
        producer_id=body.producer_id,
        producer_epoch=body.producer_epoch,
        topics=tuple(
            m.CommitTopic(
                t.name,
                tuple(
                    m.CommitPartition(
                        p.partition_index,
                        p.committed_offset,
                        p.committed_metadata,
                        p.committed_leader_epoch if version >= 2 else -1,
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
        # v3+ (KIP-447): the member that commits, checked as an OffsetCommit's is.
        generation_id=body.generation_id if version >= 3 else m.NO_GENERATION,
        member_id=(body.member_id or "") if version >= 3 else m.UNKNOWN_MEMBER_ID,
        group_instance_id=body.group_instance_id if version >= 3 else None,
    )

    def answer(topics: tuple[m.TopicErrors, ...]) -> Any:
        return Response(
            throttle_time_ms=0, topics=_topic_errors(Response, topics, "TxnOffsetCommit")
        )

    # As Kafka: WRITE on the transactional id first, then READ on the group, each
    # refusing every partition; then READ on each topic, refusing its partitions.
    unauthorized: tuple[m.CommitTopic, ...] = ()
    if context.acls is not None:
        if not authorize(
            context,
            request,
            AclOperation.WRITE,
            ResourceType.TRANSACTIONAL_ID,
            commit.transactional_id,
        ):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            return answer(_every_partition(commit.topics, error))
        if group_refused(context, request, AclOperation.READ, commit.group_id):
            return answer(_every_partition(commit.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        commit, unauthorized = _readable_topics(context, request, commit)
    if version >= ADD_OFFSETS_TXN_OFFSET_COMMIT_VERSION:
        error = await add_offsets_partition(
            context,
            commit.transactional_id,
            commit.producer_id,
            commit.producer_epoch,
            commit.group_id,
        )
        if error != ErrorCode.NONE:
            return answer(_every_partition(commit.topics, error))
    answered = await _store_commit(
        context,
        commit,
        unauthorized,
        lambda shard, stored, token, now: shard.txn_offset_commit(stored, token, now),
    )
    return answer(answered)


_PARTITION = itemgetter(0)  # of a CommitPartition
# From v5 a TxnOffsetCommit adds the group's offsets partition to the transaction.
ADD_OFFSETS_TXN_OFFSET_COMMIT_VERSION = 5


async def _store_commit(
    context: BrokerContext,
    commit: Any,
    unauthorized: tuple[m.CommitTopic, ...],
    store: Callable[[Any, Any, Hashable, Any], Any],
) -> tuple[m.TopicErrors, ...]:
    """An OffsetCommit's or TxnOffsetCommit's partitions that exist, stored by `store`
    on the group's shard; every partition answered, those that do not exist with
    UNKNOWN_TOPIC_OR_PARTITION and the `unauthorized` with TOPIC_AUTHORIZATION_FAILED."""
    # As Kafka does, a partition that does not exist is refused here and never stored.
    known: list[m.CommitTopic] = []
    unknown: list[m.CommitTopic] = []
    for t in commit.topics:
        # The topic's partitions in the cluster: a group's coordinator need not host a
        # replica of the partitions the group commits.
        count = context.metadata.partition_count(t.name) or 0
        partitions = t.partitions
        # The lowest and highest partition found in C: a loop per partition cost more.
        if not partitions or (
            min(partitions, key=_PARTITION).partition >= 0
            and max(partitions, key=_PARTITION).partition < count
        ):
            known.append(t)
            continue
        here = tuple(p for p in partitions if 0 <= p.partition < count)
        if here:
            known.append(m.CommitTopic(t.name, here))
        unknown.append(m.CommitTopic(t.name, tuple(p for p in t.partitions if p not in here)))
    answered: tuple[m.TopicErrors, ...] = ()
    if known:
        # The common case, every partition known, is stored as it came.
        stored = replace(commit, topics=tuple(known)) if unknown else commit
        result = await run_operation(
            context,
            commit.group_id,
            lambda shard, token, now: store(shard, stored, token, now),
            lambda error: m.OffsetCommitResponse(_every_partition(stored.topics, error)),
        )
        answered = result.topics
    if unknown:
        answered += _every_partition(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if unauthorized:
        answered += _every_partition(unauthorized, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return answered


def _every_partition(topics: Any, error: ErrorCode) -> tuple[m.TopicErrors, ...]:
    return tuple(
        m.TopicErrors(
            t.name,
            tuple(
                m.PartitionError(p if isinstance(p, int) else p.partition, error)
                for p in t.partitions
            ),
        )
        for t in topics
    )


def _topic_errors(Response: Any, topics: tuple[m.TopicErrors, ...], prefix: str) -> list[Any]:
    Topic = getattr(Response, f"{prefix}ResponseTopic")
    Partition = getattr(Topic, f"{prefix}ResponsePartition")
    return [
        Topic(
            name=t.name,
            partitions=[
                Partition(partition_index=p.partition, error_code=p.error_code)
                for p in t.partitions
            ],
        )
        for t in topics
    ]


async def handle_offset_fetch(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.OFFSET_FETCH)
    if request.api_version < 8:
        topics = _fetch_topics(body.topics, "partition_indexes")
        fetched = await _fetch_group(context, request, body.group_id, topics, body.require_stable)
        Topic = Response.OffsetFetchResponseTopic
        return Response(
            throttle_time_ms=0,
            topics=_fetched_topics(Topic, Topic.OffsetFetchResponsePartition, fetched.topics),
            error_code=fetched.error_code,
        )
    Group = Response.OffsetFetchResponseGroup
    Topic = Group.OffsetFetchResponseTopics
    groups = []
    for group in body.groups:
        topics = _fetch_topics(group.topics, "partition_indexes")
        # v9+: a member of a consumer group says who it is, and is checked (KIP-848).
        member_id, member_epoch = (
            (group.member_id, group.member_epoch) if request.api_version >= 9 else (None, -1)
        )
        fetched = await _fetch_group(
            context, request, group.group_id, topics, body.require_stable, member_id, member_epoch
        )
        groups.append(
            Group(
                group_id=group.group_id,
                topics=_fetched_topics(Topic, Topic.OffsetFetchResponsePartitions, fetched.topics),
                error_code=fetched.error_code,
            )
        )
    return Response(throttle_time_ms=0, groups=groups)


def _fetch_topics(topics: Any, partitions_field: str) -> tuple[m.FetchTopic, ...] | None:
    if topics is None:
        return None
    return tuple(m.FetchTopic(t.name, tuple(getattr(t, partitions_field))) for t in topics)


async def _fetch_group(
    context: BrokerContext,
    request: Request,
    group_id: str,
    topics: tuple[m.FetchTopic, ...] | None,
    require_stable: bool,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> m.OffsetFetchResponse:
    """One group's offsets, as Kafka answers them: the group needs DESCRIBE; a topic the
    caller may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED where named and left
    out of an answer about every partition."""
    unauthorized: tuple[m.FetchTopic, ...] = ()
    if context.acls is not None:
        if group_refused(context, request, AclOperation.DESCRIBE, group_id):
            return m.OffsetFetchResponse(group_id, (), ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if topics is not None:
            allowed = _describable(context, request, (t.name for t in topics))
            unauthorized = tuple(t for t in topics if t.name not in allowed)
            topics = tuple(t for t in topics if t.name in allowed)
    fetch = m.OffsetFetchRequest(group_id, topics, require_stable, member_id, member_epoch)
    fetched = await run_operation(
        context,
        group_id,
        lambda shard, token, now: shard.offset_fetch(fetch, token, now),
        lambda error: m.OffsetFetchResponse(group_id, (), error),
    )
    if context.acls is None or fetched.error_code != ErrorCode.NONE:
        return fetched
    if topics is None:
        allowed = _describable(context, request, (t.name for t in fetched.topics))
        return replace(fetched, topics=tuple(t for t in fetched.topics if t.name in allowed))
    if unauthorized:
        refused = tuple(
            m.FetchedTopic(
                t.name,
                tuple(
                    m.FetchedPartition(p, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for p in t.partitions
                ),
            )
            for t in unauthorized
        )
        return replace(fetched, topics=fetched.topics + refused)
    return fetched


def _describable(context: BrokerContext, request: Request, names: Any) -> set[str]:
    return authorized_names(context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, names)


def _fetched_topics(Topic: Any, Partition: Any, topics: tuple[m.FetchedTopic, ...]) -> list[Any]:
    return [
        Topic(
            name=t.name,
            partitions=[
                Partition(
                    partition_index=p.partition,
                    committed_offset=p.offset,
                    committed_leader_epoch=p.leader_epoch,
                    metadata=p.metadata,
                    error_code=p.error_code,
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]


async def handle_offset_delete(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.OFFSET_DELETE)
    # OffsetDelete names partitions as structs; flatten to indexes.
    delete = m.OffsetDeleteRequest(
        body.group_id,
        tuple(
            m.FetchTopic(t.name, tuple(p.partition_index for p in t.partitions))
            for t in body.topics
        ),
    )
    # As Kafka: DELETE on the group, else nothing; READ on each topic, else its partitions
    # are refused.
    unauthorized: tuple[m.FetchTopic, ...] = ()
    if context.acls is not None:
        if group_refused(context, request, AclOperation.DELETE, body.group_id):
            return Response(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[]
            )
        allowed = authorized_names(
            context, request, AclOperation.READ, ResourceType.TOPIC, [t.name for t in delete.topics]
        )
        unauthorized = tuple(t for t in delete.topics if t.name not in allowed)
        delete = replace(delete, topics=tuple(t for t in delete.topics if t.name in allowed))
    result = await run_operation(
        context,
        delete.group_id,
        lambda shard, token, now: shard.offset_delete(delete, token, now),
        lambda error: m.OffsetDeleteResponse(error),
    )
    if unauthorized:
        refused = _every_partition(unauthorized, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        result = replace(result, topics=result.topics + refused)
    return Response(
        error_code=result.error_code,
        throttle_time_ms=0,
        topics=_topic_errors(Response, result.topics, "OffsetDelete"),
    )


async def handle_list_groups(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.LIST_GROUPS)
    states = body.states_filter or ()
    types = body.types_filter or ()
    listed: list[m.ListedGroup] = []
    error = ErrorCode.NONE
    for partition in context.groups.coordinating():
        try:
            listed += await context.groups.run_on(
                partition, lambda s, token, now: s.list_groups(token, states, types)
            )
        except CoordinatorError as exc:
            # Kafka lists what it can and reports a shard still loading.
            error = exc.error_code
    # Every group to a caller that may describe the cluster; to any other, the groups it
    # may describe (Kafka's rule since KIP-231), without logging the others as denials.
    if context.acls is not None and not authorize_cluster(
        context, request, AclOperation.DESCRIBE, log_denied=False
    ):
        allowed = authorized_names(
            context,
            request,
            AclOperation.DESCRIBE,
            ResourceType.GROUP,
            [g.group_id for g in listed],
            log_denied=False,
        )
        listed = [g for g in listed if g.group_id in allowed]
    return Response(
        throttle_time_ms=0,
        error_code=error,
        groups=[
            Response.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.group_state,
                group_type=g.group_type,
            )
            for g in listed
        ],
    )


async def handle_describe_groups(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DESCRIBE_GROUPS)
    Group = Response.DescribedGroup
    version = request.api_version
    with_operations = version >= 3 and request.body.include_authorized_operations
    groups = []
    for group_id in request.body.groups:
        operations = None
        if group_refused(context, request, AclOperation.DESCRIBE, group_id):
            described = m.DescribedGroup(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, "")
        else:
            try:
                (described,) = await context.groups.run(
                    group_id,
                    lambda s, token, now, g=group_id: s.describe_groups([g], token, version),
                )
            except CoordinatorError as exc:
                described = m.DescribedGroup(group_id, exc.error_code, "")
            if with_operations and described.error_code == ErrorCode.NONE:
                operations = authorized_operations(context, request, ResourceType.GROUP, group_id)
        groups.append(
            Group(
                error_code=described.error_code,
                error_message=None,
                group_id=described.group_id,
                group_state=described.group_state,
                protocol_type=described.protocol_type,
                protocol_data=described.protocol_data,
                members=[
                    Group.DescribedGroupMember(
                        member_id=x.member_id,
                        group_instance_id=x.group_instance_id,
                        client_id=x.client_id,
                        client_host=x.client_host,
                        member_metadata=x.member_metadata,
                        member_assignment=x.member_assignment,
                    )
                    for x in described.members
                ],
                authorized_operations=operations,
            )
        )
    return Response(throttle_time_ms=0, groups=groups)


async def handle_delete_groups(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DELETE_GROUPS)
    names = request.body.groups_names
    allowed = authorized_names(context, request, AclOperation.DELETE, ResourceType.GROUP, names)
    results = []
    for group_id in names:
        if group_id not in allowed:
            results.append((group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        try:
            await _delete_share_state(context, group_id)
            deleted = await context.groups.run(
                group_id, lambda s, token, now, g=group_id: s.delete_groups([g], token, now)
            )
            results += deleted.results
        except CoordinatorError as exc:
            results.append((group_id, exc.error_code))
        except ShareStateError as exc:
            results.append((group_id, known_error_code(exc.error_code)))
    return Response(
        throttle_time_ms=0,
        results=[Response.DeletableGroupResult(group_id=g, error_code=e) for g, e in results],
    )


async def _delete_share_state(context: BrokerContext, group_id: str) -> None:
    """An Empty share group's state goes before the group does, as Kafka's group
    coordinator deletes it: were the group to go first, a failure would leave state no
    group names. A group of another type, or not Empty, is left to delete_groups to judge."""
    persister = context.share_persister
    if persister is None:
        return
    described = await share_group(context, group_id)
    if described.error_code != ErrorCode.NONE or described.group_state != str(
        ShareGroupState.EMPTY
    ):
        return
    offsets = ShareOffsets(persister, context.metadata, context.replicas, context.share_partitions)
    await offsets.delete_group(group_id)


async def share_group(context: BrokerContext, group_id: str) -> DescribedShareGroup:
    """The share group as its coordinator describes it; GROUP_ID_NOT_FOUND when there is
    no share group of that id (none, or a group of another type)."""
    topics = topics_image(context.metadata)
    try:
        (described,) = await context.groups.run(
            group_id, lambda s, token, now: s.share_group_describe([group_id], topics, token)
        )
    except CoordinatorError as exc:
        return DescribedShareGroup(group_id, exc.error_code)
    return described

"""ShareFetch (KIP-932) v1: a share consumer's acknowledgements, then records acquired for
it, in its share session.

In order, as Kafka serves it: the session is opened, continued or ended
(share_sessions.py); the acknowledgements the request carries are applied and
written, each partition's outcome told in its AcknowledgeErrorCode; at the final
epoch the session closes and the member's records are released, with nothing
fetched. Otherwise records are acquired from the session's partitions, up to
MaxRecords in all, and answered with their AcquiredRecords ranges and delivery
counts; beyond Kafka, a partition that several members fetch here gives each at most an
even share of its record locks. With nothing to acquire the fetch long-polls for MaxWaitMs,
woken by an append or by records released; once anything is acquired it is answered, whatever
MinBytes says, so no acquired record waits out its lock in a parked fetch.

A full fetch (epoch 0) answers every partition it names; later ones only those with
records, an error or acknowledgements.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from herdless.broker.clock import monotonic_ms
from herdless.broker.handlers.share_requests import (
    RequestRefused,
    Resolved,
    acknowledge,
    check_request,
    known_error_code,
    node_endpoints,
    requested_acknowledgements,
    resolve,
    shares_of,
)
from herdless.broker.share.share_group_settings import ShareGroupSettings
from herdless.broker.share.share_partition_manager import Acquisition
from herdless.broker.share.share_sessions import ShareSessionError, ShareSessionPartition
from herdless.coordinator.share_state.state import ShareStateError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH
from herdless.security.session import NO_REQUESTS_BEHIND

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext
    from herdless.broker.share.leader import ShareLeader


async def handle_share_fetch(context: BrokerContext, request: Request) -> Any:
    body = request.body
    try:
        shares = shares_of(context)
        check_request(context, request, body.group_id, body.member_id)
        named, acknowledgements = requested_acknowledgements(body.topics or ())
        epoch = body.share_session_epoch
        if epoch == INITIAL_EPOCH and acknowledgements:
            raise RequestRefused(
                ErrorCode.INVALID_REQUEST, "a share session's first fetch acknowledges nothing"
            )
        forgotten = [
            (topic.topic_id, index)
            for topic in body.forgotten_topics_data or ()
            for index in topic.partitions
        ]
        key = (body.group_id, body.member_id)
        try:
            session = shares.sessions.for_fetch(key, epoch, named, forgotten, monotonic_ms())
        except ShareSessionError as exc:
            raise RequestRefused(exc.error_code, str(exc)) from None
        if epoch == INITIAL_EPOCH and request.session is not None:
            request.session.on_close.append(shares.end_with_connection(session))
    except RequestRefused as error:
        refused = error.logged(request)
        return _response(refused.error_code, str(refused))
    group_id, member_id = body.group_id, body.member_id
    settings = shares.settings(group_id)
    fetched = [] if epoch == FINAL_EPOCH else list(session.partitions)
    resolved = resolve(context, request, {*fetched, *acknowledgements})
    if epoch == INITIAL_EPOCH:
        # A member starting to fetch may follow an admin's change to the group's offsets,
        # made while it was Empty at the share coordinator: state held here of partitions
        # no member holds records of is read again.
        await shares.partitions.reload_idle([resolved[p].key(group_id) for p in fetched])
    acknowledged = await acknowledge(shares, group_id, member_id, resolved, acknowledgements)
    if epoch == FINAL_EPOCH:
        await shares.end_session(group_id, member_id)
    acquired: dict[ShareSessionPartition, Acquisition] = {}
    if fetched and body.max_records > 0:
        acquired = await _acquire(context, shares, request, resolved, fetched)
        for partition in acquired:
            # Read last next time, so that the byte budget goes round every partition.
            session.partitions.pop(partition, None)
            session.partitions[partition] = None
    answered = named if epoch == INITIAL_EPOCH else [*fetched, *acknowledgements]
    return _response(
        ErrorCode.NONE,
        None,
        settings.partition.record_lock_duration_ms,
        _topics(resolved, answered, acknowledged, acquired, full=epoch == INITIAL_EPOCH),
        node_endpoints(context, request, resolved.values(), _endpoint_class()),
    )


async def _acquire(
    context: BrokerContext,
    shares: ShareLeader,
    request: Request,
    resolved: dict[ShareSessionPartition, Resolved],
    fetched: list[ShareSessionPartition],
) -> dict[ShareSessionPartition, Acquisition]:
    body = request.body
    group_id = body.group_id
    settings = shares.settings(group_id)
    deadline = time.monotonic() + max(body.max_wait_ms, 0) / 1000
    served = [
        (item, item.log, item.topic)
        for item in (resolved[p] for p in fetched)
        if item.log is not None and item.topic is not None
    ]
    wanted = [(topic, item.partition) for item, _, topic in served]
    behind = request.session.behind if request.session is not None else NO_REQUESTS_BEHIND
    acquired: dict[ShareSessionPartition, Acquisition] = {}
    while served:
        if any(shares.partitions.ready(item.key(group_id), log) for item, log, _ in served):
            records_left = body.max_records
            bytes_left = body.max_bytes if body.max_bytes > 0 else 0x7FFFFFFF
            for index, (item, log, topic) in enumerate(served):
                if records_left <= 0 or bytes_left <= 0:
                    break
                # The partitions still to read share what is left of the byte budget.
                share = max(bytes_left // (len(served) - index), 1)
                try:
                    got = await shares.partitions.acquire(
                        item.key(group_id),
                        topic,
                        log,
                        item.leader_epoch,
                        settings,
                        body.member_id,
                        min(records_left, _lock_share(shares, group_id, item, settings)),
                        share,
                    )
                except ShareStateError as exc:
                    item.error_code = known_error_code(exc.error_code)
                    item.error_message = str(exc)
                    continue
                if got.acquired:
                    acquired[(item.topic_id, item.partition)] = got
                    records_left -= sum(r.last_offset - r.first_offset + 1 for r in got.acquired)
                    bytes_left -= len(got.records)
            if acquired:
                break
        remaining = deadline - time.monotonic()
        if remaining <= 0 or context.stopping or behind.waiting():
            break
        await context.replicas.wait_for_appends(wanted, remaining, behind)
    return acquired


def _lock_share(
    shares: ShareLeader, group_id: str, item: Resolved, settings: ShareGroupSettings
) -> int:
    """The most one fetch acquires of a partition several members fetch here: their even
    share of its record locks (group.share.partition.max.record.locks).

    MaxRecords alone let the first few members hold every lock: at librdkafka's 500 a
    poll and Kafka's 2,000 locks, four members of sixteen had records and twelve waited.
    A member that asks for less than its share gets what it asks; batches stay whole."""
    members = shares.sessions.sharing(group_id, (item.topic_id, item.partition))
    return max(settings.partition.max_record_locks // max(members, 1), 1)


def _topics(
    resolved: dict[ShareSessionPartition, Resolved],
    answered: list[ShareSessionPartition],
    acknowledged: dict[ShareSessionPartition, tuple[ErrorCode, str | None]],
    acquired: dict[ShareSessionPartition, Acquisition],
    *,
    full: bool,
) -> list[Any]:
    Topic = response_class(ApiKey.SHARE_FETCH).ShareFetchableTopicResponse
    Partition = Topic.PartitionData
    topics: dict[Any, Any] = {}
    seen: set[ShareSessionPartition] = set()
    for key in answered:
        if key in seen or key not in resolved:
            continue
        seen.add(key)
        item = resolved[key]
        got = acquired.get(key)
        ack_code, ack_message = acknowledged.get(key, (ErrorCode.NONE, None))
        if not full and got is None and key not in acknowledged and not item.error_code:
            continue  # nothing new to say of it
        data = Partition(
            partition_index=item.partition,
            error_code=item.error_code,
            error_message=item.error_message,
            acknowledge_error_code=ack_code,
            acknowledge_error_message=ack_message,
            current_leader=Partition.LeaderIdAndEpoch(
                leader_id=item.current_leader[0], leader_epoch=item.current_leader[1]
            ),
            # Never null: librdkafka refuses a null record set (MessageSetSize -1).
            records=got.records if got is not None else b"",
            acquired_records=[
                Partition.AcquiredRecords(
                    first_offset=r.first_offset,
                    last_offset=r.last_offset,
                    delivery_count=r.delivery_count,
                )
                for r in (got.acquired if got is not None else ())
            ],
        )
        topic = topics.get(item.topic_id)
        if topic is None:
            topic = topics[item.topic_id] = Topic(topic_id=item.topic_id, partitions=[])
        topic.partitions.append(data)
    return list(topics.values())


def _endpoint_class() -> Any:
    return response_class(ApiKey.SHARE_FETCH).NodeEndpoint


def _response(
    error_code: ErrorCode,
    message: str | None,
    lock_timeout_ms: int = 0,
    topics: list[Any] | None = None,
    endpoints: list[Any] | None = None,
) -> Any:
    return response_class(ApiKey.SHARE_FETCH)(
        throttle_time_ms=0,
        error_code=error_code,
        error_message=message,
        acquisition_lock_timeout_ms=lock_timeout_ms,
        responses=topics or [],
        node_endpoints=endpoints or [],
    )

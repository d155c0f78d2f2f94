"""What ShareFetch and ShareAcknowledge have in common: the partitions a request names
by topic id, each resolved to the log this broker leads or to the error it is answered,
and acknowledgements applied partition by partition (KafkaApis' share handling).

Authorization as Kafka checks it: READ on the group, else the whole request is
GROUP_AUTHORIZATION_FAILED; READ on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import authorize, authorized_names
from herdless.broker.replication.replica_manager import PartitionError
from herdless.broker.share.share_sessions import ShareSessionPartition
from herdless.coordinator.share_partitions.acknowledgements import (
    AcknowledgementBatch,
    acknowledgement_batches,
)
from herdless.coordinator.share_partitions.partition import InvalidRecordState
from herdless.coordinator.share_state.state import SharePartitionKey, ShareStateError
from herdless.protocol.codec import Request
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType
from herdless.storage import PartitionLog

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext
    from herdless.broker.share.leader import ShareLeader

log = logging.getLogger(__name__)

NO_LEADER = (-1, -1)


class RequestRefused(Exception):
    """The whole request is answered with this error and nothing else."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code

    def logged(self, request: Request) -> RequestRefused:
        """Itself, once said in the log: one line for each request refused."""
        body = request.body
        log.info(
            "%s of share group %s member %s refused with %s: %s",
            type(body).__name__.removesuffix("Request"),
            body.group_id,
            body.member_id,
            self.error_code.name,
            self,
        )
        return self


@dataclass(slots=True)
class Resolved:
    """A partition of the request: the log to serve it from, or why it cannot be."""

    topic_id: uuid.UUID
    partition: int
    topic: str | None = None
    log: PartitionLog | None = None
    leader_epoch: int = -1
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    # Where the partition's leader is, told with NOT_LEADER_OR_FOLLOWER.
    current_leader: tuple[int, int] = NO_LEADER

    def key(self, group_id: str) -> SharePartitionKey:
        return SharePartitionKey(group_id, self.topic_id, self.partition)


def shares_of(context: BrokerContext) -> ShareLeader:
    shares = context.share_partitions
    if shares is None:
        raise RequestRefused(ErrorCode.UNSUPPORTED_VERSION, "share groups are not served here")
    return shares


def check_request(context: BrokerContext, request: Request, group_id: Any, member_id: Any) -> None:
    """RequestRefused unless the request names a group and member and may read the group."""
    if not group_id:
        raise RequestRefused(ErrorCode.INVALID_REQUEST, "a share request must name its group")
    if not member_id:
        raise RequestRefused(ErrorCode.INVALID_REQUEST, "a share request must name its member")
    if not authorize(context, request, AclOperation.READ, ResourceType.GROUP, group_id):
        raise RequestRefused(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")


Acknowledgements = dict[ShareSessionPartition, tuple[AcknowledgementBatch, ...]]


def requested_acknowledgements(
    topics: Iterable[Any],
) -> tuple[list[ShareSessionPartition], Acknowledgements]:
    """The partitions named, in order and once each (a client may name a topic twice), and
    the acknowledgements of those that carry some; RequestRefused (INVALID_REQUEST) for a
    malformed acknowledgement."""
    named: dict[ShareSessionPartition, None] = {}
    raw: dict[ShareSessionPartition, list[tuple[int, int, Sequence[int]]]] = {}
    for topic in topics:
        for partition in topic.partitions:
            key = (topic.topic_id, partition.partition_index)
            named.setdefault(key, None)
            for batch in partition.acknowledgement_batches or ():
                raw.setdefault(key, []).append(
                    (batch.first_offset, batch.last_offset, batch.acknowledge_types or ())
                )
    acknowledgements: Acknowledgements = {}
    for key, batches in raw.items():
        try:
            acknowledgements[key] = acknowledgement_batches(batches)
        except ValueError as exc:
            raise RequestRefused(ErrorCode.INVALID_REQUEST, str(exc)) from None
    return list(named), acknowledgements


def resolve(
    context: BrokerContext, request: Request, partitions: Iterable[ShareSessionPartition]
) -> dict[ShareSessionPartition, Resolved]:
    """Each partition with its topic's name and the log this broker leads, or the error
    it is answered: UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED, or the leader's
    (NOT_LEADER_OR_FOLLOWER with where the leader is, UNKNOWN_TOPIC_OR_PARTITION)."""
    resolved = {key: Resolved(*key) for key in partitions}
    names: dict[uuid.UUID, str | None] = {}
    for item in resolved.values():
        if item.topic_id not in names:
            names[item.topic_id] = context.metadata.topic_name(item.topic_id)
        item.topic = names[item.topic_id]
    known = [name for name in names.values() if name is not None]
    allowed = authorized_names(context, request, AclOperation.READ, ResourceType.TOPIC, known)
    for item in resolved.values():
        if item.topic is None:
            item.error_code = ErrorCode.UNKNOWN_TOPIC_ID
        elif item.topic not in allowed:
            item.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            item.error_message = "Topic authorization failed."
        else:
            try:
                item.log = context.replicas.leader_log(item.topic, item.partition)
            except PartitionError as exc:
                item.error_code = exc.error_code
                item.error_message = exc.message
                if exc.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    item.current_leader = current_leader(context, item.topic, item.partition)
                continue
            item.leader_epoch = context.replicas.leader_epoch(item.log)
    return resolved


def current_leader(context: BrokerContext, topic: str, partition: int) -> tuple[int, int]:
    metadata = context.metadata.topic(topic)
    if metadata is None:
        return NO_LEADER
    for described in metadata.partitions:
        if described.partition == partition:
            return described.leader, described.leader_epoch
    return NO_LEADER


def node_endpoints(
    context: BrokerContext, request: Request, resolved: Iterable[Resolved], endpoint_class: Any
) -> list[Any]:
    """The brokers named as the current leader of a partition answered
    NOT_LEADER_OR_FOLLOWER, on the listener the request came in on."""
    endpoints = []
    seen: set[int] = set()
    for item in resolved:
        leader = item.current_leader[0]
        if item.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER or leader < 0 or leader in seen:
            continue
        seen.add(leader)
        broker = context.metadata.broker(leader)
        address = None if broker is None else broker.address_for(request)
        if broker is None or address is None:
            continue
        endpoints.append(
            endpoint_class(node_id=leader, host=address[0], port=address[1], rack=broker.rack)
        )
    return endpoints


async def acknowledge(
    shares: ShareLeader,
    group_id: str,
    member_id: str,
    resolved: dict[ShareSessionPartition, Resolved],
    acknowledgements: Acknowledgements,
) -> dict[ShareSessionPartition, tuple[ErrorCode, str | None]]:
    """Apply each partition's acknowledgements; the error each is answered with. One that
    fails changes nothing of its partition and is logged once."""
    outcomes: dict[ShareSessionPartition, tuple[ErrorCode, str | None]] = {}
    for key, batches in acknowledgements.items():
        item = resolved[key]
        if item.error_code != ErrorCode.NONE:
            outcomes[key] = (item.error_code, item.error_message)
            continue
        try:
            await shares.partitions.acknowledge(item.key(group_id), member_id, batches)
        except InvalidRecordState as exc:
            log.info(
                "share group %s member %s: acknowledgement of %s-%d refused: %s",
                group_id,
                member_id,
                item.topic,
                item.partition,
                exc,
            )
            outcomes[key] = (ErrorCode.INVALID_RECORD_STATE, str(exc))
            continue
        except ShareStateError as exc:
            log.warning(
                "share group %s: the acknowledgement of %s-%d could not be written: %s",
                group_id,
                item.topic,
                item.partition,
                exc,
            )
            outcomes[key] = (known_error_code(exc.error_code), str(exc))
            continue
        outcomes[key] = (ErrorCode.NONE, None)
    return outcomes


def known_error_code(code: int) -> ErrorCode:
    """`code` as an ErrorCode; one herdless does not name is told as UNKNOWN_SERVER_ERROR."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR

"""Requests and responses of the coordinator, as plain data of its own.

They carry the fields of Kafka's messages that the coordinator reads or
writes, named as Kafka names them; the broker translates to and from the wire
classes, filling version-dependent defaults (None becomes "" for versions
where a field is not nullable). `api_version` is there only where Kafka's
behaviour depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from herdless.protocol.errors import ErrorCode
from herdless.protocol.offset_commit import NO_LEADER_EPOCH as NO_LEADER_EPOCH
from herdless.protocol.offset_commit import CommitPartition as CommitPartition
from herdless.protocol.offset_commit import CommitTopic as CommitTopic
from herdless.protocol.offset_commit import PartitionError as PartitionError
from herdless.protocol.offset_commit import TopicErrors as TopicErrors

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_OFFSET = -1
DEFAULT_RETENTION = -1


@dataclass(frozen=True, slots=True)
class Protocol:
    name: str
    metadata: bytes


# --- JoinGroup -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # v0 has none: the broker passes the session timeout
    member_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None
    api_version: int = 9


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error_code: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()


# --- SyncGroup -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()  # (member_id, assignment), leader only
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error_code: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


# --- Heartbeat, LeaveGroup -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    """v0-v2 carry one member id; the broker passes it as a one-member list."""

    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True, slots=True)
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    """For v0-v2 the broker answers with the one member's error as the top-level error."""

    error_code: ErrorCode
    members: tuple[LeftMember, ...] = ()


# --- offsets -------------------------------------------------------------------
# A commit's partitions and the answers for each are the wire's own tuples
# (protocol.offset_commit: CommitTopic, CommitPartition, TopicErrors, PartitionError).


# Not frozen: every commit makes one, and a frozen dataclass takes three times as long.
@dataclass(slots=True)
class OffsetCommitRequest:
    group_id: str
    topics: tuple[CommitTopic, ...]
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    retention_time_ms: int = DEFAULT_RETENTION  # v2-v4 only
    api_version: int = 8


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    topics: tuple[TopicErrors, ...]


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    """Offsets committed inside `producer_id`'s transaction: they count once its COMMIT
    marker is written to the group's partition. The member fields come from v3 on.
    Answered as OffsetCommit is (OffsetCommitResponse): an error per partition."""

    group_id: str
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: tuple[CommitTopic, ...]
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class FetchTopic:
    name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    group_id: str
    topics: tuple[FetchTopic, ...] | None = None  # None: every committed partition
    require_stable: bool = False
    # v9+: who asks, checked for consumer groups (KIP-848); None and -1 for anyone else.
    member_id: str | None = None
    member_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error_code: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class FetchedTopic:
    name: str
    partitions: tuple[FetchedPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    group_id: str
    topics: tuple[FetchedTopic, ...]
    error_code: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[FetchTopic, ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    error_code: ErrorCode
    topics: tuple[TopicErrors, ...] = ()


# --- group administration --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeleteGroupsResponse:
    results: tuple[tuple[str, ErrorCode], ...]  # (group_id, error)


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True, slots=True)
class MemberReconciliation:
    """How long after a consumer group's new target a member reached its epoch (it had
    revoked what it had to) and held all of its target; None: not (yet), or never."""

    member_id: str
    epoch_reached_ms: int | None
    assigned_ms: int | None
    left: bool = False


@dataclass(frozen=True, slots=True)
class RebalanceRecord:
    """One entry of a group's rebalance history (soft state: not persisted).

    A classic group's is a rebalance from one generation to the next; a consumer
    group's is a new target assignment, its epochs in the generation fields, with
    each member's way to it.
    """

    cause: str
    detail: str
    from_generation: int
    to_generation: int | None  # None while the rebalance is in progress
    started_ms: int
    ended_ms: int | None
    members_before: tuple[str, ...]
    members_after: tuple[str, ...] | None
    protocol: str = "classic"
    # A consumer group's target replaced by a newer one before every member reached it.
    superseded: bool = False
    reconciliations: tuple[MemberReconciliation, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error_code: ErrorCode
    group_state: str
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()
    generation_id: int = NO_GENERATION
    leader: str | None = None
    rebalance_history: tuple[RebalanceRecord, ...] = field(default=())

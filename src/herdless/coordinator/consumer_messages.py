"""Requests and responses of consumer groups (KIP-848), as plain data of the coordinator.

Named after ConsumerGroupHeartbeat and ConsumerGroupDescribe's fields. Partitions
are sets of (topic id, partition); None keeps the API's "not sent" or "not
changed" apart from an empty set wherever the API does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from herdless.coordinator.topic_metadata import Partitions
from herdless.protocol.errors import ErrorCode

# ConsumerGroupHeartbeat v1 (KIP-1082): the member makes up its own id and keeps it.
MIN_VERSION_CLIENT_MEMBER_ID = 1


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1  # -1: unchanged
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged
    subscribed_topic_regex: str | None = None  # None: unchanged; "": none
    server_assignor: str | None = None  # None: unchanged, or the group's default
    owned_partitions: Partitions | None = None  # None: unchanged since the last heartbeat
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # The partitions the member may use now; None when unchanged since it was last told.
    assignment: Partitions | None = None


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroupMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    # A member that still speaks the classic protocol inside the group (an online upgrade).
    uses_classic_protocol: bool = False
    # Beyond Kafka's fields (herdless sends them as tagged fields): where the member is in
    # reconciliation (MemberState's value), and what it still owns but must give up.
    member_state: int = -1
    pending_revocation: tuple[DescribedTopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    error_code: ErrorCode
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerGroupMember, ...] = ()

"""Requests and responses of share groups (KIP-932), as plain data of the coordinator.

Named after ShareGroupHeartbeat and ShareGroupDescribe's fields; None keeps the
API's "not changed" apart from an empty list wherever the API does.
"""

from __future__ import annotations

from dataclasses import dataclass

from herdless.coordinator.consumer_messages import DescribedTopicPartitions
from herdless.coordinator.topic_metadata import Partitions
from herdless.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatRequest:
    group_id: str
    # Made up by the member (a UUID) and kept for its whole life.
    member_id: str
    member_epoch: int  # 0 to join, -1 to leave
    rack_id: str | None = None  # None: unchanged
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatResponse:
    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # The partitions the member may fetch from now; None when it was told them already.
    assignment: Partitions | None = None


@dataclass(frozen=True, slots=True)
class DescribedShareGroupMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[DescribedTopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    group_id: str
    error_code: ErrorCode
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedShareGroupMember, ...] = ()

"""What a ConsumerGroupHeartbeat may say, and what it changes of its member.

The checks Kafka makes of a heartbeat before it touches the group (the request's
own validity, the member's epoch) and the member as the heartbeat updates it;
consumer_group_manager.py does the rest. A refusal is HeartbeatRefused, raised before
anything is written.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TypeVar

from herdless.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
)
from herdless.coordinator.consumer_messages import (
    MIN_VERSION_CLIENT_MEMBER_ID,
    ConsumerGroupHeartbeatRequest,
)
from herdless.coordinator.reconciliation import MemberState
from herdless.protocol.errors import ErrorCode

T = TypeVar("T")


class HeartbeatRefused(Exception):
    """The request gets this error and changes nothing."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def validate(req: ConsumerGroupHeartbeatRequest, assignors: tuple[str, ...]) -> None:
    """Refuse a request Kafka refuses whatever the group's state: INVALID_REQUEST,
    UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION."""

    def invalid(message: str) -> HeartbeatRefused:
        return HeartbeatRefused(ErrorCode.INVALID_REQUEST, message)

    epoch = req.member_epoch
    needs_member_id = (
        req.api_version >= MIN_VERSION_CLIENT_MEMBER_ID
        or epoch > 0
        or epoch == LEAVE_GROUP_MEMBER_EPOCH
    )
    if needs_member_id and not req.member_id.strip():
        raise invalid("MemberId can't be empty.")
    for name, value in (
        ("GroupId", req.group_id),
        ("InstanceId", req.instance_id),
        ("RackId", req.rack_id),
    ):
        if value is not None and not value.strip():
            raise invalid(f"{name} can't be empty.")
    if epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.owned_partitions is None or req.owned_partitions:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null"
                " when (re-)joining."
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise HeartbeatRefused(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(assignors)}.",
        )
    if req.subscribed_topic_regex:
        try:
            re.compile(req.subscribed_topic_regex)
        except re.error as exc:
            raise HeartbeatRefused(
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid"
                f" regular expression: {exc}.",
            ) from None


def check_epoch(member: ConsumerGroupMember, req: ConsumerGroupHeartbeatRequest) -> None:
    """Kafka's member epoch check: the epoch the member has, or, when the answer that moved
    it on was lost, the previous one with no partition it was not given. Epoch 0 is a
    member that lost everything (fenced, or restarted) rejoining under its own id.

    Kafka fences a member at its previous epoch that does not say what it owns; herdless
    takes it at its word. A member moves to a new epoch only once it has nothing left to
    revoke, so what it held at the previous one is in its assignment still (or it said it
    had let it go), and the answer tells it the rest. librdkafka says nothing of what it
    owns in the heartbeat after one that timed out: fencing it there costs its partitions
    and a rejoin, which its heartbeat backoff can put off for tens of seconds."""
    owned = req.owned_partitions
    if member.state is MemberState.UNKNOWN and (owned is None or owned):
        raise HeartbeatRefused(
            ErrorCode.FENCED_MEMBER_EPOCH,
            "The consumer group member is in a unknown state. The member must abandon all its"
            " partitions and rejoin.",
        )
    received = req.member_epoch
    expected = member.member_epoch
    if received in (0, expected):
        return
    # The answer that moved the member on was lost: it may still use what it had.
    previous = member.assignment.previous_member_epoch
    lost_answer = received < expected and received == previous
    if lost_answer and (owned is None or owned <= member.assigned):
        return
    raise HeartbeatRefused(
        ErrorCode.FENCED_MEMBER_EPOCH,
        f"The consumer group member has a {'greater' if received > expected else 'smaller'}"
        f" member epoch ({received}) than the one known by the group coordinator ({expected})."
        " The member must abandon all its partitions and rejoin.",
    )


def updated_member(
    member: ConsumerGroupMember, req: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupMember:
    """The member with what the request changes; None and -1 fields change nothing."""

    def given(value: T | None, current: T) -> T:
        return current if value is None else value

    regex = req.subscribed_topic_regex
    names = req.subscribed_topic_names
    return replace(
        member,
        instance_id=given(req.instance_id, member.instance_id),
        rack_id=given(req.rack_id, member.rack_id),
        client_id=req.client_id,
        client_host=req.client_host,
        subscribed_topic_names=member.subscribed_topic_names if names is None else frozenset(names),
        subscribed_topic_regex=member.subscribed_topic_regex if regex is None else regex or None,
        rebalance_timeout_ms=given(
            None if req.rebalance_timeout_ms == -1 else req.rebalance_timeout_ms,
            member.rebalance_timeout_ms,
        ),
        server_assignor=given(req.server_assignor, member.server_assignor),
        classic=None,  # a classic member restarted with the new protocol speaks it from now
    )

"""What a group is as the admin tools show it: its protocol, state and members, in the
words `herdless groups`, `herdless share-groups` and the console share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafka import TopicPartition

# The classic protocol's states, spelled as brokers report them.
STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")


# ConsumerGroupDescribe's members, by the value of Kafka's MemberState (herdless says it).
MEMBER_STATES = {0: "stable", 1: "unrevoked partitions", 2: "unreleased partitions"}
CLASSIC = "classic"
CONSUMER = "consumer"
# A share group (KIP-932), which admin/share_group_state.py reads.
SHARE = "share"
# ConsumerGroupDescribe v1's MemberType (KIP-1099): which protocol a member of a consumer
# group speaks; a classic one has not restarted with the new protocol since an upgrade.
MEMBER_PROTOCOLS = {0: CLASSIC, 1: CONSUMER}


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """Where a member of a consumer group (KIP-848) is on its way to its target."""

    member_epoch: int
    # MEMBER_STATES' words; None when the broker does not say (Kafka's brokers).
    state: str | None
    rack: str | None
    target: tuple[TopicPartition, ...]
    # Still owned, to be given up: what the broker says is pending revocation, and
    # anything assigned outside the target.
    to_revoke: tuple[TopicPartition, ...]
    # In the target, not yet assigned (held by another member until it revokes them).
    to_assign: tuple[TopicPartition, ...]
    # MEMBER_PROTOCOLS' words; None when the broker does not say (ConsumerGroupDescribe v0).
    protocol: str | None = None


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    # None when the assignment is not in the consumer protocol's format (or the
    # group is rebalancing and the broker sends none).
    partitions: tuple[TopicPartition, ...] | None
    reconciliation: Reconciliation | None = None  # consumer groups only


@dataclass(frozen=True, slots=True)
class GroupInfo:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[Member, ...]
    group_protocol: str = CLASSIC  # or CONSUMER: KIP-848's; or share (KIP-932)
    group_epoch: int | None = None  # consumer groups only, as the target assignment epoch
    target_assignment_epoch: int | None = None

    @property
    def exists(self) -> bool:
        return self.state != "Dead"

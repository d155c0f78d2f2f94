"""Reconciliation: how one member's assignment moves towards its target, safely.

The target assignment says where partitions should be; a member's current
assignment says what it may use now. A member moves towards its target on its
own, heartbeat by heartbeat, with no group-wide barrier, under two rules that
together mean no partition ever has two owners:

- revocations first: while the member still owns partitions it must give up,
  it stays at its epoch (UNREVOKED_PARTITIONS) and is given nothing new;
- a partition is given to a member only once no other member owns it: one
  still held elsewhere is left out (UNRELEASED_PARTITIONS) and handed over at a
  later heartbeat, after its owner has revoked it.

A member reaches the target's epoch as soon as it has nothing left to revoke;
it is STABLE once it also has every partition of its target. This is Kafka's
CurrentAssignmentBuilder, including its later refinements: a topic the member
no longer subscribes to counts as not in its target, and a partition the member
is itself revoking may be given straight back to it.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from herdless.coordinator.topic_metadata import NO_PARTITIONS, Partitions, TopicIdPartition


class MemberState(enum.IntEnum):
    """The value is what ConsumerGroupCurrentMemberAssignmentValue stores."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    # A state a newer version wrote: the member is made to start again from nothing.
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    """A member's side of reconciliation, as its current assignment record holds it."""

    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = NO_PARTITIONS
    pending_revocation: Partitions = NO_PARTITIONS

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def at_epoch(self, epoch: int, **changes: object) -> CurrentAssignment:
        """This state moved to `epoch` (remembering the one it leaves), with `changes`."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)


# The epoch at which another member owns a partition, or None if no member owns it.
OwnerEpoch = Callable[[TopicIdPartition], int | None]


def reconcile(
    current: CurrentAssignment,
    target_epoch: int,
    target: Partitions,
    subscribed_topic_ids: frozenset[uuid.UUID],
    owner_epoch: OwnerEpoch,
    owned: Partitions | None,
) -> CurrentAssignment:
    """The member's next state. `owned` is what the member said it owns in this heartbeat,
    None if it did not say; `owner_epoch` answers for partitions as currently owned,
    this member's included. A member in the UNKNOWN state must have said it owns
    nothing (Kafka fences it otherwise): it starts again from the target's epoch."""

    def advance(member_epoch: int) -> CurrentAssignment:
        return _next(
            current, member_epoch, target_epoch, target, subscribed_topic_ids, owner_epoch, owned
        )

    if current.state is MemberState.STABLE:
        if current.member_epoch != target_epoch:
            return advance(current.member_epoch)
        return _drop_unsubscribed(current, subscribed_topic_ids, owned)
    if current.state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, current.pending_revocation):
            return _drop_unsubscribed(current, subscribed_topic_ids, owned)
        return advance(current.member_epoch)
    if current.state is MemberState.UNRELEASED_PARTITIONS:
        return advance(current.member_epoch)
    # UNKNOWN: the caller has fenced a member in it unless it said it owns nothing.
    return advance(target_epoch)


def _still_owns(owned: Partitions | None, revoking: Partitions) -> bool:
    """Until the member says what it owns, it is taken to own all it was asked to revoke."""
    if owned is None:
        return bool(revoking)
    return not owned.isdisjoint(revoking)


def _drop_unsubscribed(
    current: CurrentAssignment, subscribed_topic_ids: frozenset[uuid.UUID], owned: Partitions | None
) -> CurrentAssignment:
    """A member that stopped subscribing to a topic gives up its partitions now, without
    waiting for a new target assignment."""
    dropped = frozenset(tp for tp in current.assigned if tp.topic_id not in subscribed_topic_ids)
    if not dropped:
        return current
    assigned = current.assigned - dropped
    revoking = current.pending_revocation | dropped
    if _still_owns(owned, revoking):
        return current.at_epoch(
            current.member_epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=assigned,
            pending_revocation=revoking,
        )
    return current.at_epoch(current.member_epoch, assigned=assigned)


def _next(
    current: CurrentAssignment,
    member_epoch: int,
    target_epoch: int,
    target: Partitions,
    subscribed_topic_ids: frozenset[uuid.UUID],
    owner_epoch: OwnerEpoch,
    owned: Partitions | None,
) -> CurrentAssignment:
    target = frozenset(tp for tp in target if tp.topic_id in subscribed_topic_ids)
    kept = current.assigned & target
    revoking = current.assigned - kept
    wanted = target - kept
    # Held by another member: not yet. Held by this member because it is revoking it:
    # it may have it back at once, since no one else can hold it meanwhile.
    unreleased = frozenset(
        tp for tp in wanted if owner_epoch(tp) is not None and tp not in current.pending_revocation
    )
    if revoking and _still_owns(owned, revoking):
        return current.at_epoch(
            member_epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=kept,
            pending_revocation=revoking,
        )
    return current.at_epoch(
        target_epoch,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assigned=kept | (wanted - unreleased),
        pending_revocation=NO_PARTITIONS,
    )

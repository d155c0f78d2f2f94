"""A bounded log of each group's rebalances, for describe and for operators.

It is soft state like parked requests: rebuilt empty after a reload, because
Kafka's record formats have no place for it and tooling must keep decoding
our `__consumer_offsets`. Its times are the wall clock's: they are published in
`__rebalance_history` and read beside other brokers' and operators' times.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from enum import Enum

from herdless.coordinator.messages import RebalanceRecord


class RebalanceCause(Enum):
    MEMBER_JOINED = "member joined"
    MEMBER_METADATA_CHANGED = "member metadata changed"
    LEADER_REJOINED = "leader rejoined"
    MEMBER_LEFT = "member left"
    SESSION_EXPIRED = "session expired"
    NEW_MEMBER_JOIN_TIMEOUT = "new member join timed out"
    SYNC_EXPIRED = "members did not sync"
    STATIC_MEMBER_REPLACED = "static member replaced"
    # Consumer groups (KIP-848): what bumps the group epoch, and so brings a new target.
    SUBSCRIPTION_CHANGED = "subscription changed"
    TOPIC_METADATA_CHANGED = "topic metadata changed"
    REVOCATION_EXPIRED = "member did not revoke in time"


class RebalanceHistory:
    def __init__(self, size: int) -> None:
        self._entries: deque[RebalanceRecord] = deque(maxlen=size)
        self._open = False

    def started(
        self,
        cause: RebalanceCause,
        detail: str,
        generation: int,
        wall_ms: int,
        members: tuple[str, ...],
    ) -> None:
        if self._open:
            # A rebalance restarted from CompletingRebalance is the same rebalance
            # continuing; the first cause is the one worth reporting.
            return
        self._entries.append(
            RebalanceRecord(cause.value, detail, generation, None, wall_ms, None, members, None)
        )
        self._open = True

    def ended(
        self, generation: int, wall_ms: int, members: tuple[str, ...]
    ) -> RebalanceRecord | None:
        """Close the open entry; return it, complete, or None if none was open."""
        if not self._open:
            return None
        last = self._entries[-1]
        finished = replace(last, to_generation=generation, ended_ms=wall_ms, members_after=members)
        self._entries[-1] = finished
        self._open = False
        return finished

    def event(
        self,
        cause: RebalanceCause,
        detail: str,
        generation: int,
        wall_ms: int,
        before: tuple[str, ...],
        after: tuple[str, ...],
    ) -> RebalanceRecord:
        """A membership change that completed without a rebalance (a static member's return)."""
        entry = RebalanceRecord(
            cause.value, detail, generation, generation, wall_ms, wall_ms, before, after
        )
        self._entries.append(entry)
        return entry

    def entries(self) -> tuple[RebalanceRecord, ...]:
        return tuple(self._entries)

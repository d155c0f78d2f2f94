"""The timers of a shard's consumer groups (KIP-848), by the names Kafka gives them.

For each member: its session timeout, which every heartbeat moves on; its rebalance
timeout to revoke what it was asked to (REVOCATION); and, for a member speaking the
classic protocol, its deadline to rejoin once told to (CLASSIC_JOIN) and to sync once
joined (CLASSIC_SYNC). For each group: when its next target assignment is due
(ASSIGNMENT). A member whose timer fires is fenced, as any member made to leave.

The shard's timer table (timers.py) holds them; this module only decides keys, deadlines
and what firing does, so ConsumerGroupManager and the classic members share one set of rules.
"""

from __future__ import annotations

from collections.abc import Callable

from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember
from herdless.coordinator.group_store import GroupStore
from herdless.coordinator.history import RebalanceCause
from herdless.coordinator.now import Now
from herdless.coordinator.result import Result, TimerKey, TimerKind
from herdless.coordinator.timers import CoordinatorTimer

# ConsumerGroupManager.fence_member and .update_target_assignment: what firing does.
Fence = Callable[[Result, str, str, RebalanceCause, Now], None]
TargetUpdate = Callable[[Result, ConsumerGroup, Now], None]


class ConsumerGroupTimers:
    def __init__(
        self,
        config: CoordinatorConfig,
        store: GroupStore,
        timer: CoordinatorTimer,
        fence: Fence,
        update_target_assignment: TargetUpdate,
    ) -> None:
        self._config = config
        # A timer that fires looks its group up as it is then.
        self._groups = store.consumer
        self._timer = timer
        self._fence = fence
        self._update_target_assignment = update_target_assignment

    # ======================================================================
    # every member
    # ======================================================================

    def schedule_session_timeout(
        self, out: Result, group_id: str, member_id: str, now: Now
    ) -> None:
        """The group's session timeout (the broker's unless the group sets its own), or
        the one a classic member joined with."""
        classic = self._groups[group_id].members[member_id].classic
        if classic is not None:
            timeout_ms = classic.session_timeout_ms
        else:
            timeout_ms = self._config.consumer_session_timeout_for(group_id)
        self._timer.schedule(
            out,
            TimerKey(TimerKind.SESSION, group_id, member_id),
            now.monotonic_ms + timeout_ms,
            lambda o, now: self._fence(o, group_id, member_id, RebalanceCause.SESSION_EXPIRED, now),
        )

    def schedule_rebalance_timeout(
        self, out: Result, group_id: str, member: ConsumerGroupMember, now: Now
    ) -> None:
        """The member has its rebalance timeout to revoke what its epoch asked it to."""
        member_id, epoch = member.member_id, member.member_epoch
        self._timer.schedule(
            out,
            TimerKey(TimerKind.REVOCATION, group_id, member_id),
            now.monotonic_ms + member.rebalance_timeout_ms,
            lambda o, now: self._revocation_expired(o, group_id, member_id, epoch, now),
        )

    def cancel_rebalance_timeout(self, out: Result, group_id: str, member_id: str) -> None:
        self._timer.cancel(out, TimerKey(TimerKind.REVOCATION, group_id, member_id))

    def cancel_member_timers(self, out: Result, group_id: str, member_id: str) -> None:
        for kind in _MEMBER_TIMERS:
            self._timer.cancel(out, TimerKey(kind, group_id, member_id))

    def _revocation_expired(
        self, out: Result, group_id: str, member_id: str, epoch: int, now: Now
    ) -> None:
        # One that has moved on from the epoch it was asked to revoke in is not concerned.
        group = self._groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if member is not None and member.member_epoch == epoch:
            self._fence(out, group_id, member_id, RebalanceCause.REVOCATION_EXPIRED, now)

    # ======================================================================
    # members speaking the classic protocol
    # ======================================================================

    def schedule_join_timeout_if_absent(
        self, out: Result, group_id: str, member: ConsumerGroupMember, now: Now
    ) -> None:
        """The member was told to rejoin: it has its rebalance timeout to do so. A deadline
        already running is kept (a member heartbeating meanwhile does not push it back)."""
        member_id = member.member_id
        key = TimerKey(TimerKind.CLASSIC_JOIN, group_id, member_id)
        if self._timer.is_scheduled(key):
            return
        self._timer.schedule(
            out,
            key,
            now.monotonic_ms + member.rebalance_timeout_ms,
            # Told to rejoin is how a classic member is asked to revoke.
            lambda o, now: self._fence(
                o, group_id, member_id, RebalanceCause.REVOCATION_EXPIRED, now
            ),
        )

    def cancel_join_timeout(self, out: Result, group_id: str, member_id: str) -> None:
        self._timer.cancel(out, TimerKey(TimerKind.CLASSIC_JOIN, group_id, member_id))

    def schedule_sync_timeout(
        self, out: Result, group_id: str, member_id: str, timeout_ms: int, now: Now
    ) -> None:
        """The member joined: it has `timeout_ms` (its rebalance timeout) to sync."""
        self._timer.schedule(
            out,
            TimerKey(TimerKind.CLASSIC_SYNC, group_id, member_id),
            now.monotonic_ms + timeout_ms,
            lambda o, now: self._fence(o, group_id, member_id, RebalanceCause.SYNC_EXPIRED, now),
        )

    def cancel_sync_timeout(self, out: Result, group_id: str, member_id: str) -> None:
        self._timer.cancel(out, TimerKey(TimerKind.CLASSIC_SYNC, group_id, member_id))

    # ======================================================================
    # the group's target assignment
    # ======================================================================

    def schedule_assignment(self, out: Result, group_id: str, deadline_ms: int) -> None:
        """The next target assignment is due at `deadline_ms` (monotonic)."""

        def due(o: Result, now: Now) -> None:
            group = self._groups.get(group_id)
            if group is not None:
                self._update_target_assignment(o, group, now)

        self._timer.schedule(out, TimerKey(TimerKind.ASSIGNMENT, group_id), deadline_ms, due)

    def cancel_assignment(self, out: Result, group_id: str) -> None:
        self._timer.cancel(out, TimerKey(TimerKind.ASSIGNMENT, group_id))


# In the order a member's timers are cancelled when it goes.
_MEMBER_TIMERS = (
    TimerKind.SESSION,
    TimerKind.REVOCATION,
    TimerKind.CLASSIC_JOIN,
    TimerKind.CLASSIC_SYNC,
)

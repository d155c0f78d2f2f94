"""A classic group's rebalance, and the member and group timers that drive it.

Kafka's GroupMetadataManager, classic half, from prepareRebalance on: the join phase
(completed when every member rejoined, or by its timer), the next generation, the
assignment handed to the members parked in SyncGroup, and the timers that expire a
silent member (HEARTBEAT), a join phase (JOIN) and members that never sync (SYNC).
The requests that start all this are classic_group_manager.py's.

It also does what the consumer groups ask when a group id changes protocol
(consumer_groups.ClassicGroupHooks): retire a classic group a consumer group takes
over, install one a consumer group turns back into, and start its rebalance.
"""

from __future__ import annotations

from herdless.coordinator.classic_group import ClassicGroup, Member
from herdless.coordinator.classic_log import ClassicGroupLog
from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.group_store import GroupStore
from herdless.coordinator.history import RebalanceCause
from herdless.coordinator.messages import (
    UNKNOWN_MEMBER_ID,
    JoinGroupResponse,
    SyncGroupResponse,
)
from herdless.coordinator.now import Now
from herdless.coordinator.result import Reply, Result, TimerKey, TimerKind
from herdless.coordinator.state import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, can_rebalance
from herdless.coordinator.timers import CoordinatorTimer
from herdless.protocol.errors import ErrorCode


class ClassicRebalance:
    def __init__(
        self,
        config: CoordinatorConfig,
        store: GroupStore,
        timer: CoordinatorTimer,
        log: ClassicGroupLog,
    ) -> None:
        self.config = config
        # A timer that fires looks its group up as it is then.
        self._groups = store.classic
        self._store = store
        self._timer = timer
        self._log = log

    # ======================================================================
    # member timers
    # ======================================================================

    def schedule_heartbeat(
        self, out: Result, group: ClassicGroup, member: Member, timeout_ms: int, now: Now
    ) -> None:
        self.expect_heartbeat(out, group.group_id, member.member_id, timeout_ms, now)

    def expect_heartbeat(
        self, out: Result, group_id: str, member_id: str, timeout_ms: int, now: Now
    ) -> None:
        """The member (or a member id handed out, pending) expires unless heard of
        within `timeout_ms`."""
        self._timer.schedule(
            out,
            TimerKey(TimerKind.HEARTBEAT, group_id, member_id),
            now.monotonic_ms + timeout_ms,
            lambda o, now: self._expire_heartbeat(o, group_id, member_id, now),
        )

    def cancel_heartbeat(self, out: Result, group: ClassicGroup, member_id: str) -> None:
        self._timer.cancel(out, TimerKey(TimerKind.HEARTBEAT, group.group_id, member_id))

    def cancel_group_timers(self, out: Result, group_id: str) -> None:
        """The group's join phase and sync deadline, if running."""
        self._timer.cancel(out, TimerKey(TimerKind.JOIN, group_id))
        self._timer.cancel(out, TimerKey(TimerKind.SYNC, group_id))

    # ======================================================================
    # rebalancing
    # ======================================================================

    def maybe_prepare_rebalance_or_complete_join(
        self, out: Result, group: ClassicGroup, cause: RebalanceCause, detail: str, now: Now
    ) -> None:
        if can_rebalance(group.state):
            self.prepare_rebalance(out, group, cause, detail, now)
        else:
            self.maybe_complete_join_phase(out, group, now)

    def prepare_rebalance(
        self, out: Result, group: ClassicGroup, cause: RebalanceCause, detail: str, now: Now
    ) -> None:
        if group.is_in(COMPLETING):
            # Followers parked in SyncGroup must rejoin: their generation is over.
            for member in group.members.values():
                member.assignment = b""
            self.propagate_assignment(out, group, ErrorCode.REBALANCE_IN_PROGRESS, now)
        group.pending_sync_members.clear()
        self._timer.cancel(out, TimerKey(TimerKind.SYNC, group.group_id))

        is_initial = group.is_in(EMPTY)
        if is_initial:
            # KIP-134: give a new group time to collect its members before the
            # first generation, extended while members keep arriving.
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(out, group.group_id, delay, remaining, now)

        group.history.started(
            cause, detail, group.generation, now.wall_ms, group.generation_members
        )
        group.transition_to(PREPARING, now.wall_ms)
        if not is_initial:
            if group.has_all_members_joined():
                self.complete_join(out, group, now)
            else:
                self._schedule_join_completion(out, group, now)

    def _schedule_initial_join(
        self, out: Result, group_id: str, delay_ms: int, remaining_ms: int, now: Now
    ) -> None:
        self._timer.schedule(
            out,
            TimerKey(TimerKind.JOIN, group_id),
            now.monotonic_ms + delay_ms,
            lambda o, now: self._try_complete_initial_rebalance(
                o, group_id, delay_ms, remaining_ms, now
            ),
        )

    def _try_complete_initial_rebalance(
        self, out: Result, group_id: str, delay_ms: int, remaining_ms: int, now: Now
    ) -> None:
        group = self._groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self._schedule_initial_join(out, group_id, new_delay, new_remaining, now)
        else:
            self.complete_join(out, group, now)

    def _schedule_join_completion(self, out: Result, group: ClassicGroup, now: Now) -> None:
        group_id = group.group_id
        self._timer.schedule(
            out,
            TimerKey(TimerKind.JOIN, group_id),
            now.monotonic_ms + group.rebalance_timeout_ms(),
            lambda o, now: self._complete_join_by_id(o, group_id, now),
        )

    def _complete_join_by_id(self, out: Result, group_id: str, now: Now) -> None:
        group = self._groups.get(group_id)
        if group is not None:
            self.complete_join(out, group, now)

    def maybe_complete_join_phase(self, out: Result, group: ClassicGroup, now: Now) -> None:
        if not group.is_in(PREPARING):
            return
        if group.previous_state is EMPTY:
            return  # the initial rebalance ends on its own timer, never early
        if group.has_all_members_joined():
            self.complete_join(out, group, now)

    def complete_join(self, out: Result, group: ClassicGroup, now: Now) -> None:
        self._timer.cancel(out, TimerKey(TimerKind.JOIN, group.group_id))
        # Dynamic members that did not rejoin are gone; static ones keep their place.
        for member in group.not_yet_rejoined():
            if not member.is_static:
                group.remove(member.member_id)
                self.cancel_heartbeat(out, group, member.member_id)

        if group.is_in(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for sessions to expire.
            self._schedule_join_completion(out, group, now)
            return

        group.init_next_generation(now.wall_ms)
        if group.is_in(EMPTY):
            rebalance_ended(out, group, now, ())
            group.generation_members = ()
            self._log.write_group(out, group)
            return
        for member in group.members.values():
            resp = group.join_response(
                member.member_id, as_leader=group.is_leader(member.member_id)
            )
            add_reply(out, group.complete_join(member, resp))
            self.schedule_heartbeat(out, group, member, member.session_timeout_ms, now)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group_id, generation = group.group_id, group.generation
        self._timer.schedule(
            out,
            TimerKey(TimerKind.SYNC, group_id),
            now.monotonic_ms + group.rebalance_timeout_ms(),
            lambda o, now: self._expire_pending_sync(o, group_id, generation, now),
        )

    def _expire_pending_sync(self, out: Result, group_id: str, generation: int, now: Now) -> None:
        group = self._groups.get(group_id)
        if group is None or group.generation != generation or not group.is_in(COMPLETING, STABLE):
            return
        if group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                group.remove(member_id)
                self.cancel_heartbeat(out, group, member_id)
            self.prepare_rebalance(out, group, RebalanceCause.SYNC_EXPIRED, ", ".join(missing), now)

    def _expire_heartbeat(self, out: Result, group_id: str, member_id: str, now: Now) -> None:
        group = self._groups.get(group_id)
        if group is None or group.is_in(DEAD):
            return
        if group.is_pending(member_id):
            group.remove(member_id)
            if group.is_in(PREPARING) and group.has_all_members_joined():
                self.complete_join(out, group, now)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        cause = (
            RebalanceCause.NEW_MEMBER_JOIN_TIMEOUT
            if member.is_new
            else RebalanceCause.SESSION_EXPIRED
        )
        self._remove_member_and_update(out, group, member, cause, now)

    def _remove_member_and_update(
        self, out: Result, group: ClassicGroup, member: Member, cause: RebalanceCause, now: Now
    ) -> None:
        # A new member timing out is still parked in JoinGroup: tell it to start over.
        resp = JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, member_id=UNKNOWN_MEMBER_ID)
        add_reply(out, group.complete_join(member, resp))
        group.remove(member.member_id)
        if group.is_in(STABLE, COMPLETING):
            self.maybe_prepare_rebalance_or_complete_join(out, group, cause, member.member_id, now)
        elif group.is_in(PREPARING) and group.has_all_members_joined():
            self.complete_join(out, group, now)

    def propagate_assignment(
        self, out: Result, group: ClassicGroup, error: ErrorCode, now: Now
    ) -> None:
        ok = error is ErrorCode.NONE
        for member in group.members.values():
            resp = SyncGroupResponse(
                error,
                assignment=member.assignment,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
            )
            if (reply := group.complete_sync(member, resp)) is not None:
                out.replies.append(reply)
                # Expiry was ignored while the member was parked; expect heartbeats again.
                self.schedule_heartbeat(out, group, member, member.session_timeout_ms, now)

    def remove_pending_sync_member(self, out: Result, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._timer.cancel(out, TimerKey(TimerKind.SYNC, group.group_id))

    # ======================================================================
    # a group id changing protocol (consumer_groups.ClassicGroupHooks)
    # ======================================================================

    def retire(self, out: Result, group_id: str) -> None:
        """A consumer group takes `group_id` over: the classic group's tombstone, and its
        parked requests answered REBALANCE_IN_PROGRESS, so that its members join the
        consumer group (Kafka's convertToConsumerGroup)."""
        group = self._groups.get(group_id)
        if group is not None:
            for member in group.members.values():
                rejoin = JoinGroupResponse(
                    ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id
                )
                add_reply(out, group.complete_join(member, rejoin))
                sync = SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS)
                add_reply(out, group.complete_sync(member, sync))
            for member_id in (*group.members, *group.pending_join_members):
                self.cancel_heartbeat(out, group, member_id)
            self.cancel_group_timers(out, group_id)
        self._log.write_tombstone(out, group_id)

    def install(self, out: Result, group: ClassicGroup, now: Now) -> None:
        """`group`, made from a consumer group whose tombstones are written, is the group of
        its id: its metadata, and its members' sessions (Kafka's convertToClassicGroup)."""
        self._store.put_classic(group)
        self._log.write_group(out, group)
        for member in group.members.values():
            self.schedule_heartbeat(out, group, member, member.session_timeout_ms, now)


def rebalance_ended(out: Result, group: ClassicGroup, now: Now, members: tuple[str, ...]) -> None:
    entry = group.history.ended(group.generation, now.wall_ms, members)
    if entry is not None:
        out.rebalances.append((group.group_id, entry))


def add_reply(out: Result, reply: Reply | None) -> None:
    """A parked request's answer, if one was parked."""
    if reply is not None:
        out.replies.append(reply)

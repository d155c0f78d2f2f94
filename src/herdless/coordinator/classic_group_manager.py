"""The classic group protocol of one shard: SyncGroup, Heartbeat, LeaveGroup, DescribeGroups.

Kafka's GroupMetadataManager, classic half (classicGroupSync, classicGroupHeartbeat,
classicGroupLeave, describeGroups), step by step; comments mark where and why we
differ. JoinGroup is classic_join.py's; what a request starts, the rebalance and its
timers, classic_rebalance.py's. A request of the classic protocol
for a consumer group (a member not yet upgraded) goes to classic_members.py.

It also answers what the rest of the shard asks of a group: whether an offset commit,
fetch or delete may go ahead (the offsets manager asks; it never changes groups
itself), and whether a group may be deleted.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from herdless.coordinator.classic_group import ClassicGroup
from herdless.coordinator.classic_log import ClassicGroupLog
from herdless.coordinator.classic_members import ClassicMembers
from herdless.coordinator.classic_rebalance import ClassicRebalance, add_reply, rebalance_ended
from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.consumer_group import ConsumerGroup, ConsumerGroupState
from herdless.coordinator.group_store import GroupStore
from herdless.coordinator.history import RebalanceCause
from herdless.coordinator.messages import (
    UNKNOWN_MEMBER_ID,
    DescribedGroup,
    DescribedMember,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    ListedGroup,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupResponse,
    TxnOffsetCommitRequest,
)
from herdless.coordinator.now import Now
from herdless.coordinator.records import GroupMetadataKey
from herdless.coordinator.result import Reply, Result
from herdless.coordinator.state import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, Op, state_answer
from herdless.protocol.errors import ErrorCode

# OffsetCommit v9+ answers GROUP_ID_NOT_FOUND for an unknown group, older ones ILLEGAL_GENERATION.
_MIN_COMMIT_VERSION_GROUP_ID_NOT_FOUND = 9
# DescribeGroups v6+ (KIP-1043) reports unknown groups with an error instead of as Dead.
_MIN_DESCRIBE_VERSION_GROUP_ID_NOT_FOUND = 6


class ClassicGroupManager:
    def __init__(
        self,
        config: CoordinatorConfig,
        store: GroupStore,
        log: ClassicGroupLog,
        rebalance: ClassicRebalance,
        classic_members: ClassicMembers,
    ) -> None:
        self.config = config
        self._store = store
        self._groups = store.classic
        self._log = log
        self._rebalance = rebalance
        self._classic_members = classic_members

    # ======================================================================
    # loading
    # ======================================================================

    def replay(self, key: GroupMetadataKey, value: bytes | None) -> None:
        self._log.replay(key, value)

    def on_loaded(self, out: Result, now: Now) -> None:
        """Start members' session timers; a group above group.max.size rebalances."""
        for group in list(self._groups.values()):
            for member in group.members.values():
                self._rebalance.schedule_heartbeat(
                    out, group, member, member.session_timeout_ms, now
                )
            if len(group.members) > self.config.max_group_size:
                # group.max.size was lowered while the group was away.
                self._rebalance.prepare_rebalance(
                    out, group, RebalanceCause.MEMBER_LEFT, "group above max size", now
                )

    def unload(self, out: Result) -> None:
        """Answer the requests parked in a rebalance NOT_COORDINATOR, and drop every group."""
        for group in self._groups.values():
            group.transition_to(DEAD, group.current_state_timestamp or 0)
            for member in group.members.values():
                if group.previous_state is PREPARING:
                    resp = JoinGroupResponse(ErrorCode.NOT_COORDINATOR, member_id=member.member_id)
                    add_reply(out, group.complete_join(member, resp))
                elif group.previous_state in (COMPLETING, STABLE):
                    sync = SyncGroupResponse(ErrorCode.NOT_COORDINATOR)
                    add_reply(out, group.complete_sync(member, sync))
        self._groups.clear()

    # ======================================================================
    # SyncGroup, Heartbeat, LeaveGroup
    # ======================================================================

    def sync_group(self, req: SyncGroupRequest, token: Hashable, now: Now) -> Result:
        out = Result()

        def answer(error: ErrorCode) -> Result:
            out.replies.append(Reply(token, SyncGroupResponse(error)))
            return out

        if not req.group_id:
            return answer(ErrorCode.INVALID_GROUP_ID)
        if self._classic_members.owns(req.group_id):
            return self._classic_members.sync(req, token, now)
        group = self._groups.get(req.group_id)
        if group is None:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        error = _validate_generation_member(
            Op.SYNC, group, req.member_id, req.group_instance_id, req.generation_id
        )
        if error is not ErrorCode.NONE:
            return answer(error)
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
            req.protocol_name, group.protocol_name
        ):
            return answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        error = state_answer(Op.SYNC, group.state)
        if error is not ErrorCode.NONE:
            return answer(error)

        member = group.members[req.member_id]
        rebalance = self._rebalance
        if group.is_in(COMPLETING):
            member.awaiting_sync = token
            rebalance.remove_pending_sync_member(out, group, req.member_id)
            if group.is_leader(req.member_id):
                assignment = dict(req.assignments)
                for m in group.members.values():
                    m.assignment = assignment.get(m.member_id, b"")
                # Kafka moves to Stable when the record is durable; we move now and
                # the replies wait for durability (result.py), which is equivalent.
                rebalance.propagate_assignment(out, group, ErrorCode.NONE, now)
                group.transition_to(STABLE, now.wall_ms)
                group.generation_members = group.member_ids()
                rebalance_ended(out, group, now, group.member_ids())
                self._log.write_group(out, group)
        else:  # Stable: the assignment is known, hand it out
            rebalance.remove_pending_sync_member(out, group, req.member_id)
            out.replies.append(
                Reply(
                    token,
                    SyncGroupResponse(
                        ErrorCode.NONE,
                        assignment=member.assignment,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                    ),
                )
            )
        return out

    def heartbeat(self, req: HeartbeatRequest, token: Hashable, now: Now) -> Result:
        if req.group_id and self._classic_members.owns(req.group_id):
            return self._classic_members.heartbeat(req, token, now)
        out = Result()
        group = self._groups.get(req.group_id)
        if not req.group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        else:
            error = _validate_generation_member(
                Op.HEARTBEAT, group, req.member_id, req.group_instance_id, req.generation_id
            )
            if error is ErrorCode.NONE:
                error = state_answer(Op.HEARTBEAT, group.state)
                if group.is_in(PREPARING, COMPLETING, STABLE):
                    member = group.members[req.member_id]
                    self._rebalance.schedule_heartbeat(
                        out, group, member, member.session_timeout_ms, now
                    )
        out.replies.append(Reply(token, HeartbeatResponse(error)))
        return out

    def leave_group(self, req: LeaveGroupRequest, token: Hashable, now: Now) -> Result:
        if self._classic_members.owns(req.group_id):
            return self._classic_members.leave(req, token, now)
        out = Result()
        group = self._groups.get(req.group_id)
        if group is None:
            out.replies.append(Reply(token, LeaveGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID)))
            return out
        dead = state_answer(Op.LEAVE, group.state)
        if dead is not ErrorCode.NONE:
            out.replies.append(Reply(token, LeaveGroupResponse(dead)))
            return out

        results: list[LeftMember] = []
        left: list[str] = []
        for m in req.members:
            error = ErrorCode.NONE
            if m.member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal by instance id (kafka-consumer-groups, KIP-345).
                if m.group_instance_id is not None and m.group_instance_id in group.static_members:
                    self._remove_leaving_member(
                        out, group, group.static_members[m.group_instance_id], now
                    )
                else:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
            elif group.is_pending(m.member_id):
                group.remove(m.member_id)
                self._rebalance.cancel_heartbeat(out, group, m.member_id)
            else:
                error = group.validate_member(m.member_id, m.group_instance_id)
                if error is ErrorCode.NONE:
                    self._remove_leaving_member(out, group, m.member_id, now)
            results.append(LeftMember(m.member_id, m.group_instance_id, error))
            if error is ErrorCode.NONE:
                left.append(m.member_id or (m.group_instance_id or ""))

        if left:
            if group.is_in(STABLE, COMPLETING):
                self._rebalance.maybe_prepare_rebalance_or_complete_join(
                    out, group, RebalanceCause.MEMBER_LEFT, ", ".join(left), now
                )
            elif group.is_in(PREPARING):
                self._rebalance.maybe_complete_join_phase(out, group, now)
        out.replies.append(Reply(token, LeaveGroupResponse(ErrorCode.NONE, tuple(results))))
        return out

    def _remove_leaving_member(
        self, out: Result, group: ClassicGroup, member_id: str, now: Now
    ) -> None:
        member = group.members[member_id]
        self._rebalance.cancel_heartbeat(out, group, member_id)
        resp = JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, member_id=UNKNOWN_MEMBER_ID)
        add_reply(out, group.complete_join(member, resp))
        # Kafka leaves a parked SyncGroup of a leaving member unanswered until the
        # client times out; we answer it, since every request needs a response.
        add_reply(out, group.complete_sync(member, SyncGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID)))
        group.remove(member_id)

    # ======================================================================
    # describing, listing, deleting
    # ======================================================================

    def describe_groups(
        self, group_ids: Iterable[str], token: Hashable, api_version: int = 5
    ) -> Result:
        described = []
        for group_id in group_ids:
            group = self._groups.get(group_id)
            if group is None:
                error = (
                    ErrorCode.GROUP_ID_NOT_FOUND
                    if api_version >= _MIN_DESCRIBE_VERSION_GROUP_ID_NOT_FOUND
                    else ErrorCode.NONE
                )
                described.append(DescribedGroup(group_id, error, str(DEAD)))
                continue
            stable = group.is_in(STABLE)
            members = tuple(
                DescribedMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(group.protocol_name) if stable else b"",
                    m.assignment if stable else b"",
                )
                for m in group.members.values()
            )
            described.append(
                DescribedGroup(
                    group_id,
                    ErrorCode.NONE,
                    str(group.state),
                    group.protocol_type or "",
                    (group.protocol_name or "") if stable else "",
                    members,
                    group.generation,
                    group.leader_id,
                    group.history.entries(),
                )
            )
        return Result(replies=[Reply(token, tuple(described))])

    def list_groups(self, states: set[str]) -> list[ListedGroup]:
        """`states` in lower case; empty: every state."""
        listed = []
        for group in self._groups.values():
            if states and str(group.state).lower() not in states:
                continue
            listed.append(ListedGroup(group.group_id, group.protocol_type or "", str(group.state)))
        return listed

    def validate_delete_group(self, group_id: str) -> ErrorCode:
        """Whether DeleteGroups may delete `group_id`, of either type."""
        group = self._groups.get(group_id)
        consumer_group = self._store.consumer.get(group_id)
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if consumer_group is not None:
            empty = consumer_group.state is ConsumerGroupState.EMPTY
            return ErrorCode.NONE if empty else ErrorCode.NON_EMPTY_GROUP
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return state_answer(Op.DELETE_GROUP, group.state)

    def delete(self, out: Result, group_id: str) -> None:
        """The classic group's timers and the group go (its offsets are the caller's)."""
        self._rebalance.cancel_group_timers(out, group_id)
        self._log.write_tombstone(out, group_id)

    def remove_expired(self, out: Result, group_id: str) -> None:
        """An Empty group whose last offsets expired goes (KIP-211)."""
        self._log.write_tombstone(out, group_id)

    # ======================================================================
    # what the offsets manager asks (offset_manager.GroupsView)
    # ======================================================================

    def ensure_group(self, group_id: str) -> None:
        """Offsets without membership make a "simple" group, Empty with no protocol type,
        unless a group has the id."""
        if group_id not in self._store:
            self._store.put_classic(self._log.new_group(group_id, None))

    def validate_offset_commit(self, req: OffsetCommitRequest) -> ErrorCode:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        if req.group_id in self._store.share:
            return ErrorCode.GROUP_ID_NOT_FOUND
        consumer_group = self._store.consumer.get(req.group_id)
        if consumer_group is not None:
            return consumer_group.validate_offset_commit(
                req.member_id, req.generation_id, req.api_version
            )
        group = self._groups.get(req.group_id)
        if group is None:
            if req.generation_id < 0:
                return ErrorCode.NONE
            if req.api_version >= _MIN_COMMIT_VERSION_GROUP_ID_NOT_FOUND:
                return ErrorCode.GROUP_ID_NOT_FOUND
            return ErrorCode.ILLEGAL_GENERATION
        return _validate_commit(
            Op.OFFSET_COMMIT, group, req.member_id, req.group_instance_id, req.generation_id
        )

    def validate_txn_offset_commit(self, req: TxnOffsetCommitRequest) -> ErrorCode:
        """As an OffsetCommit's, but for what a transaction's commit is not held to: the
        group's state, and the member id of clients older than TxnOffsetCommit v3, which
        sent none (Kafka's validateTransactionalOffsetCommit)."""
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        if req.group_id in self._store.share:
            return ErrorCode.GROUP_ID_NOT_FOUND
        consumer_group = self._store.consumer.get(req.group_id)
        if consumer_group is not None:
            error = consumer_group.validate_offset_commit(
                req.member_id, req.generation_id, api_version=None
            )
            # A stale member epoch is what the classic protocol calls an old generation.
            return ErrorCode.ILLEGAL_GENERATION if error is ErrorCode.STALE_MEMBER_EPOCH else error
        group = self._groups.get(req.group_id)
        if group is None:
            return ErrorCode.NONE if req.generation_id < 0 else ErrorCode.ILLEGAL_GENERATION
        return _validate_commit(
            Op.TXN_OFFSET_COMMIT, group, req.member_id, req.group_instance_id, req.generation_id
        )

    def offset_committed(self, out: Result, req: OffsetCommitRequest, now: Now) -> None:
        """A valid commit is being written: a commit with no membership (generation -1)
        creates a simple group, and one of a classic member proves it alive."""
        group = self._groups.get(req.group_id)
        if group is None:
            if req.group_id not in self._store:
                self._store.put_classic(self._log.new_group(req.group_id, None))
        elif group.is_in(STABLE, PREPARING) and req.member_id in group.members:
            member = group.members[req.member_id]
            self._rebalance.schedule_heartbeat(out, group, member, member.session_timeout_ms, now)

    def validate_offset_fetch(self, req: OffsetFetchRequest) -> tuple[ErrorCode, bool]:
        """The error to answer, and whether the group's offsets may be shown."""
        if req.group_id in self._store.share:
            # A share group's offsets are its share partitions' state, kept elsewhere.
            return ErrorCode.GROUP_ID_NOT_FOUND, False
        group = self._groups.get(req.group_id)
        known = group is not None and state_answer(Op.OFFSET_FETCH, group.state) is ErrorCode.NONE
        consumer_group = self._store.consumer.get(req.group_id)
        if consumer_group is not None:
            error = consumer_group.validate_offset_fetch(req.member_id, req.member_epoch)
            if error is not ErrorCode.NONE:
                return error, known
            known = True
        return ErrorCode.NONE, known

    def validate_offset_delete(
        self, group_id: str
    ) -> tuple[ErrorCode, ClassicGroup | ConsumerGroup | None]:
        """The error to answer, or the group whose subscriptions guard each partition."""
        group: ClassicGroup | ConsumerGroup | None = self._groups.get(group_id)
        if not group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif group_id in self._store.share:
            error = ErrorCode.GROUP_ID_NOT_FOUND
        elif group_id in self._store.consumer:
            # In any state: the per-partition check keeps what it reads (KIP-496).
            group = self._store.consumer[group_id]
            error = ErrorCode.NONE
        elif group is None:
            error = ErrorCode.GROUP_ID_NOT_FOUND
        else:
            error = state_answer(Op.OFFSET_DELETE, group.state)
            if error is ErrorCode.NON_EMPTY_GROUP and group.uses_consumer_protocol:
                # KIP-496: a live consumer group may drop offsets of topics it no
                # longer reads; the per-partition check guards the rest.
                error = ErrorCode.NONE
        return error, group


def _validate_commit(
    op: Op,
    group: ClassicGroup,
    member_id: str,
    group_instance_id: str | None,
    generation_id: int,
) -> ErrorCode:
    """Who may commit offsets to a classic group (Kafka's ClassicGroup.validateOffsetCommit):
    anyone while it is empty and without a generation (admin tools, manual assignment),
    else a member at the group's generation."""
    if group.is_in(DEAD):
        return state_answer(op, DEAD)
    if generation_id < 0 and group.is_in(EMPTY):
        return ErrorCode.NONE
    if generation_id >= 0 or member_id or group_instance_id is not None:
        error = group.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
    elif op is Op.OFFSET_COMMIT and not group.is_in(EMPTY):
        # A commit without member or generation (OffsetCommit v0) only to an empty group;
        # TxnOffsetCommit before v3 has neither field, so it is not held to this.
        return ErrorCode.UNKNOWN_MEMBER_ID
    return state_answer(op, group.state)


def _validate_generation_member(
    op: Op,
    group: ClassicGroup,
    member_id: str,
    group_instance_id: str | None,
    generation_id: int,
) -> ErrorCode:
    if group.is_in(DEAD):
        return state_answer(op, DEAD)
    error = group.validate_member(member_id, group_instance_id)
    if error is not ErrorCode.NONE:
        return error
    if generation_id != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current

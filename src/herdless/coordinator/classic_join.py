"""JoinGroup of the classic protocol, as Kafka's GroupMetadataManager.classicGroupJoin.

A new member (KIP-394: given an id to come back with), a known member rejoining, a
static member back under a new id (KIP-345); each joins the group's rebalance
(classic_rebalance.py), started here when the join changes the group. A JoinGroup for a
consumer group goes to classic_members.py, unless the group is empty, which gives way
to a classic group as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace

from herdless.coordinator.classic_group import ClassicGroup, JoinWaiter, Member
from herdless.coordinator.classic_log import ClassicGroupLog
from herdless.coordinator.classic_members import ClassicMembers
from herdless.coordinator.classic_rebalance import ClassicRebalance, add_reply
from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.consumer_group import ConsumerGroupState
from herdless.coordinator.consumer_group_manager import ConsumerGroupManager
from herdless.coordinator.group_store import GroupStore
from herdless.coordinator.history import RebalanceCause
from herdless.coordinator.messages import UNKNOWN_MEMBER_ID, JoinGroupRequest, JoinGroupResponse
from herdless.coordinator.now import Now
from herdless.coordinator.records import (
    NO_TIMESTAMP,
    GroupMetadataKey,
    GroupMetadataValue,
    group_metadata_record,
)
from herdless.coordinator.result import Reply, Result
from herdless.coordinator.state import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, Op, state_answer
from herdless.coordinator.topic_metadata import TopicsImage
from herdless.protocol.errors import ErrorCode

# JoinGroup v4+ (KIP-394): a new dynamic member must rejoin with the id we give it.
_MIN_VERSION_REQUIRING_MEMBER_ID = 4
# JoinGroup v9+ (KIP-814): a static leader's rejoin may skip recomputing the assignment.
_MIN_VERSION_SKIPPING_ASSIGNMENT = 9


class ClassicJoin:
    def __init__(
        self,
        config: CoordinatorConfig,
        store: GroupStore,
        log: ClassicGroupLog,
        rebalance: ClassicRebalance,
        consumer: ConsumerGroupManager,
        classic_members: ClassicMembers,
        new_uuid: Callable[[], str],
    ) -> None:
        self.config = config
        self._store = store
        self._groups = store.classic
        self._log = log
        self._rebalance = rebalance
        self._consumer = consumer
        self._classic_members = classic_members
        self._new_uuid = new_uuid

    def join(
        self, req: JoinGroupRequest, token: Hashable, now: Now, topics: TopicsImage | None
    ) -> Result:
        out = Result()
        cfg = self.config
        if not req.group_id:
            out.replies.append(
                Reply(token, JoinGroupResponse(ErrorCode.INVALID_GROUP_ID, member_id=req.member_id))
            )
            return out
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            resp = JoinGroupResponse(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=req.member_id)
            out.replies.append(Reply(token, resp))
            return out

        if req.group_id in self._store.share:
            # Share groups never convert (KIP-932): Kafka's answer to a classic member.
            resp = JoinGroupResponse(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=UNKNOWN_MEMBER_ID
            )
            out.replies.append(Reply(token, resp))
            return out
        consumer_group = self._store.consumer.get(req.group_id)
        if consumer_group is not None and consumer_group.state is not ConsumerGroupState.EMPTY:
            # The member speaks the classic protocol inside the consumer group.
            return self._classic_members.join(req, topics, token, now)
        is_unknown = req.member_id == UNKNOWN_MEMBER_ID
        group = self._groups.get(req.group_id)
        is_new_group = group is None
        if group is None:
            if not is_unknown:
                resp = JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id)
                out.replies.append(Reply(token, resp))
                return out
            if consumer_group is not None:
                # An empty consumer group gives way to a classic one, as in Kafka.
                self._consumer.delete(out, req.group_id)
            group = self._log.new_group(req.group_id, now.wall_ms)
            self._store.put_classic(group)
        written = len(out.records)

        waiter = JoinWaiter(token, req.api_version)
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            resp = JoinGroupResponse(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=UNKNOWN_MEMBER_ID)
            out.replies.append(Reply(token, resp))
        elif (refused := _refusal(group, req)) is not ErrorCode.NONE:
            # req.member_id is UNKNOWN_MEMBER_ID for a new member.
            _reply_join(out, waiter, JoinGroupResponse(refused, member_id=req.member_id))
        elif is_unknown:
            self._join_new_member(out, group, req, waiter, now)
        else:
            self._join_existing_member(out, group, req, waiter, now)

        if is_new_group and len(out.records) == written:
            # Kafka persists a new group at once, so it survives a reload.
            empty = GroupMetadataValue(
                protocol_type="",
                generation=0,
                protocol=None,
                leader=None,
                current_state_timestamp=(
                    NO_TIMESTAMP
                    if group.current_state_timestamp is None
                    else group.current_state_timestamp
                ),
            )
            self._log.write(out, group_metadata_record(GroupMetadataKey(group.group_id), empty))
        return out

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.max_group_size
        if group.is_in(EMPTY, DEAD):
            return True
        if group.is_in(PREPARING):
            # Counting members awaiting join (not all members) lets the last
            # rejoiners be the ones refused when the limit was lowered.
            member = group.members.get(member_id)
            awaiting = member is not None and member.awaiting_join is not None
            return awaiting or group.num_awaiting_join < max_size
        return group.has_member(member_id) or len(group.members) < max_size

    def _join_new_member(
        self, out: Result, group: ClassicGroup, req: JoinGroupRequest, waiter: JoinWaiter, now: Now
    ) -> None:
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_member_id = f"{prefix}-{self._new_uuid()}"

        if req.group_instance_id is not None:
            existing = group.static_members.get(req.group_instance_id)
            if existing is not None:
                self._replace_static_member(out, group, req, existing, new_member_id, waiter, now)
            else:
                self._add_member_and_rebalance(out, group, req, new_member_id, waiter, now)
        elif req.api_version >= _MIN_VERSION_REQUIRING_MEMBER_ID:
            # The member must come back with this id; until it does it counts as
            # pending, and a rebalance waits for it, at most one session timeout.
            group.add_pending(new_member_id)
            self._rebalance.expect_heartbeat(
                out, group.group_id, new_member_id, req.session_timeout_ms, now
            )
            resp = JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id)
            _reply_join(out, waiter, resp)
        else:
            self._add_member_and_rebalance(out, group, req, new_member_id, waiter, now)

    def _join_existing_member(
        self, out: Result, group: ClassicGroup, req: JoinGroupRequest, waiter: JoinWaiter, now: Now
    ) -> None:
        member_id = req.member_id
        if group.is_pending(member_id) and req.group_instance_id is None:
            self._add_member_and_rebalance(out, group, req, member_id, waiter, now)
            return
        error = group.validate_member(member_id, req.group_instance_id)
        if error is not ErrorCode.NONE:
            _reply_join(out, waiter, JoinGroupResponse(error, member_id=member_id))
            return

        member = group.members[member_id]
        if group.is_in(PREPARING):
            self._update_member_and_rebalance(
                out, group, member, req, waiter, RebalanceCause.MEMBER_JOINED, now
            )
        elif group.is_in(COMPLETING):
            if member.matches(req.protocols):
                # A retry of a join whose response was lost: same generation, same answer.
                resp = group.join_response(member_id, as_leader=group.is_leader(member_id))
                _reply_join(out, waiter, resp)
            else:
                self._update_member_and_rebalance(
                    out, group, member, req, waiter, RebalanceCause.MEMBER_METADATA_CHANGED, now
                )
        elif group.is_in(STABLE):
            if group.is_leader(member_id):
                # The leader rejoins to make a new assignment (e.g. topics changed).
                self._update_member_and_rebalance(
                    out, group, member, req, waiter, RebalanceCause.LEADER_REJOINED, now
                )
            elif not member.matches(req.protocols):
                self._update_member_and_rebalance(
                    out, group, member, req, waiter, RebalanceCause.MEMBER_METADATA_CHANGED, now
                )
            else:
                _reply_join(out, waiter, group.join_response(member_id, as_leader=False))
        else:
            _reply_join(
                out, waiter, JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            )

    def _add_member_and_rebalance(
        self,
        out: Result,
        group: ClassicGroup,
        req: JoinGroupRequest,
        member_id: str,
        waiter: JoinWaiter,
        now: Now,
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
            is_new=True,
        )
        if group.is_in(PREPARING) and group.previous_state is EMPTY:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member, waiter)
        # A parked new member cannot heartbeat, and a client that gave up and
        # retried would leave a defunct member behind: its join times out instead.
        self._rebalance.schedule_heartbeat(
            out, group, member, self.config.new_member_join_timeout_ms, now
        )
        self._rebalance.maybe_prepare_rebalance_or_complete_join(
            out, group, RebalanceCause.MEMBER_JOINED, f"{member_id} joined", now
        )

    def _update_member_and_rebalance(
        self,
        out: Result,
        group: ClassicGroup,
        member: Member,
        req: JoinGroupRequest,
        waiter: JoinWaiter,
        cause: RebalanceCause,
        now: Now,
    ) -> None:
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter
        )
        self._rebalance.maybe_prepare_rebalance_or_complete_join(
            out, group, cause, f"{member.member_id} rejoined", now
        )

    def _replace_static_member(
        self,
        out: Result,
        group: ClassicGroup,
        req: JoinGroupRequest,
        old_member_id: str,
        new_member_id: str,
        waiter: JoinWaiter,
        now: Now,
    ) -> None:
        """KIP-345: a static member back with a new id takes its old place."""
        instance_id = req.group_instance_id
        assert instance_id is not None
        before = group.member_ids()
        current_leader = group.leader_id
        member, fenced = group.replace_static_member(instance_id, old_member_id, new_member_id)
        out.replies += fenced
        self._rebalance.cancel_heartbeat(out, group, old_member_id)
        self._rebalance.schedule_heartbeat(out, group, member, member.session_timeout_ms, now)
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter
        )
        detail = f"instance {instance_id}: {old_member_id} -> {new_member_id}"
        if group.is_in(STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol: keep the assignment, no rebalance, persist the new id.
                entry = group.history.event(
                    RebalanceCause.STATIC_MEMBER_REPLACED,
                    detail,
                    group.generation,
                    now.wall_ms,
                    before,
                    group.member_ids(),
                )
                out.rebalances.append((group.group_id, entry))
                self._log.write_group(out, group)
                is_leader = group.is_leader(new_member_id)
                if waiter.api_version >= _MIN_VERSION_SKIPPING_ASSIGNMENT:
                    resp = group.join_response(new_member_id, as_leader=is_leader)
                    resp = replace(resp, skip_assignment=is_leader)
                else:
                    # Older clients cannot skip the assignment, so Kafka names the
                    # previous leader id: the member acts as a follower and just syncs.
                    resp = group.join_response(new_member_id, as_leader=False)
                    resp = replace(resp, leader=current_leader or "")
                add_reply(out, group.complete_join(member, resp))
            else:
                self._rebalance.maybe_prepare_rebalance_or_complete_join(
                    out, group, RebalanceCause.STATIC_MEMBER_REPLACED, detail, now
                )
        elif group.is_in(COMPLETING):
            # The leader may already be assigning to the old id; start over.
            self._rebalance.prepare_rebalance(
                out, group, RebalanceCause.STATIC_MEMBER_REPLACED, detail, now
            )
        else:
            self._rebalance.maybe_complete_join_phase(out, group, now)


def _refusal(group: ClassicGroup, req: JoinGroupRequest) -> ErrorCode:
    """Why the group takes no join at all (it is Dead), or none with these protocols;
    NONE if it may."""
    dead = state_answer(Op.JOIN, group.state)
    if dead is not ErrorCode.NONE:
        return dead
    if not group.supports_protocols(req.protocol_type, req.protocols):
        return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    return ErrorCode.NONE


def _reply_join(out: Result, waiter: JoinWaiter, response: JoinGroupResponse) -> None:
    out.replies.append(Reply(waiter.token, response))

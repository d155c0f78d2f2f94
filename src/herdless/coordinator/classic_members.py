"""Members speaking the classic protocol inside a consumer group (KIP-848's online upgrade).

After a classic group became a consumer group (group_conversion.py), its members
keep sending JoinGroup, SyncGroup, Heartbeat and LeaveGroup until they restart with
the new protocol; members may also join such a group with the classic protocol.
The coordinator treats them as any member, with Kafka's mapping:

- JoinGroup is a full heartbeat: the subscription, the partitions the member owns
  and its rack come from its ConsumerProtocolSubscription; the group epoch, the
  target assignment and the member's reconciliation move as for a
  ConsumerGroupHeartbeat. It is answered at once (no group-wide barrier), with
  the member epoch as generation and no leader: every classic member is a
  follower.
- SyncGroup hands out the member's current assignment as a
  ConsumerProtocolAssignment, of the version the member subscribed with.
- Heartbeat answers REBALANCE_IN_PROGRESS when the member should rejoin: there is a
  newer target assignment than its epoch (not merely a newer group epoch: with
  assignment batching the target follows up to an interval later, and rejoining
  before would change nothing), it has partitions to revoke, or partitions it
  waits for were released. It then has its rebalance timeout to rejoin (CLASSIC_JOIN), and after
  joining to sync (CLASSIC_SYNC), or it is fenced.

Reconciliation's rule holds unchanged: a classic member releases a partition by
rejoining without it in its owned partitions (or by leaving); until then no
other member is given it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

from herdless.coordinator.classic_group import ClassicGroup
from herdless.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember
from herdless.coordinator.consumer_group_manager import ConsumerGroupManager, member_label
from herdless.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    MalformedConsumerProtocol,
    decode_subscription,
    protocol_version,
)
from herdless.coordinator.group_conversion import (
    assignment_bytes,
    classic_metadata,
    may_downgrade,
    to_partitions,
)
from herdless.coordinator.history import RebalanceCause
from herdless.coordinator.messages import (
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from herdless.coordinator.now import Now
from herdless.coordinator.reconciliation import MemberState
from herdless.coordinator.result import Reply, Result
from herdless.coordinator.topic_metadata import TopicsImage
from herdless.protocol.errors import ErrorCode

# JoinGroup v4+ (KIP-394): a new dynamic member must rejoin with the id we give it.
_MIN_VERSION_REQUIRING_MEMBER_ID = 4


class _Refused(Exception):
    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


class ClassicMembers:
    """The classic protocol's requests to the consumer groups of `groups`."""

    def __init__(self, groups: ConsumerGroupManager) -> None:
        self._groups = groups
        self._timers = groups.timers

    def owns(self, group_id: str) -> bool:
        """True if requests of the classic protocol for `group_id` are this module's."""
        return group_id in self._groups.groups

    # ======================================================================
    # JoinGroup
    # ======================================================================

    def join(
        self, req: JoinGroupRequest, topics: TopicsImage | None, token: Hashable, now: Now
    ) -> Result:
        """`topics` None: only the topics the group knows of are known."""
        out = Result()
        try:
            response = self._join(out, req, topics, now)
        except _Refused as refused:
            assert not out.records, "a refused JoinGroup wrote records"
            response = JoinGroupResponse(refused.error_code, member_id=req.member_id)
        out.replies.append(Reply(token, response))
        return out

    def _join(
        self, out: Result, req: JoinGroupRequest, topics: TopicsImage | None, now: Now
    ) -> JoinGroupResponse:
        groups = self._groups
        group = groups.groups[req.group_id]
        group_id = group.group_id
        is_unknown = req.member_id == UNKNOWN_MEMBER_ID
        member_id = groups.new_member_id() if is_unknown else req.member_id
        max_size = groups.config.consumer_max_group_size
        if len(group.members) >= max_size and member_id not in group.members:
            raise _Refused(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not _supports(group, req):
            raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if (
            is_unknown
            and req.group_instance_id is None
            and req.api_version >= _MIN_VERSION_REQUIRING_MEMBER_ID
        ):
            return JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
        try:
            subscription = decode_subscription(req.protocols[0].metadata)
        except MalformedConsumerProtocol:
            raise _Refused(ErrorCode.UNKNOWN_SERVER_ERROR) from None
        member, replaced = self._member_for(group, req, member_id, is_unknown)

        # Checked: from here on the join only writes.
        if replaced is not None:
            groups.replace_static_member(out, group, replaced, member)
        updated = replace(
            member,
            instance_id=req.group_instance_id,
            rack_id=subscription.rack_id or member.rack_id,
            client_id=req.client_id,
            client_host=req.client_host,
            subscribed_topic_names=frozenset(subscription.topics),
            subscribed_topic_regex=None,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            server_assignor=None,
            classic=classic_metadata(req.session_timeout_ms, req.protocols),
        )
        is_new = groups.write_member(out, group, member, updated)
        bump = updated.subscribed_topic_names != member.subscribed_topic_names or (
            updated.subscribed_topic_regex != member.subscribed_topic_regex
        )
        bump |= groups.refresh_subscription_metadata(out, group, topics)
        if bump:
            cause = RebalanceCause.MEMBER_JOINED if is_new else RebalanceCause.SUBSCRIPTION_CHANGED
            groups.bump_group_epoch(out, group, cause, member_label(updated))
        groups.update_target_assignment(out, group, now)
        known = topics or TopicsImage(group.subscription_metadata.values())
        owned = to_partitions(subscription.owned_partitions, known)
        groups.reconcile(out, group, group.members[member_id], owned, now)
        current = group.members[member_id]
        if replaced is not None and not replaced.uses_classic_protocol:
            # The last new-protocol member restarted with the classic protocol (a static
            # one): the group may be classic again, with no rebalance, as in Kafka.
            downgraded = self._downgrade(out, group, now)
            if downgraded is not None:
                return JoinGroupResponse(
                    ErrorCode.NONE,
                    member_id=member_id,
                    generation_id=downgraded.generation,
                    protocol_type=CONSUMER_PROTOCOL_TYPE,
                    protocol_name=downgraded.protocol_name,
                )

        self._timers.cancel_join_timeout(out, group_id, member_id)
        self._timers.schedule_session_timeout(out, group_id, member_id, now)
        self._timers.schedule_sync_timeout(out, group_id, member_id, req.rebalance_timeout_ms, now)
        return JoinGroupResponse(
            ErrorCode.NONE,
            member_id=member_id,
            generation_id=current.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=req.protocols[0].name,
        )

    def _member_for(
        self, group: ConsumerGroup, req: JoinGroupRequest, member_id: str, is_unknown: bool
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """The joining member (new, or as the group has it) and the static member it
        replaces, if any."""
        instance_id = req.group_instance_id
        if instance_id is None:
            existing = group.members.get(member_id)
            return existing or ConsumerGroupMember(member_id), None
        static = group.static_member(instance_id)
        if is_unknown:
            if static is None:
                return ConsumerGroupMember(member_id), None
            # The instance is back under a new id: its place and assignment are its own.
            assignment = replace(static.assignment, member_epoch=0, previous_member_epoch=0)
            return replace(static, member_id=member_id, assignment=assignment), static
        return _validated(group, member_id, instance_id), None

    # ======================================================================
    # SyncGroup, Heartbeat, LeaveGroup
    # ======================================================================

    def sync(self, req: SyncGroupRequest, token: Hashable, now: Now) -> Result:
        out = Result()
        group = self._groups.groups[req.group_id]
        try:
            member = _validated(group, req.member_id, req.group_instance_id, req.generation_id)
            assert member.classic is not None
            protocol, metadata = member.classic.supported_protocols[0]
            if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                req.protocol_name is not None and req.protocol_name != protocol
            ):
                raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if (
                group.target_assignment_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS
            ):
                self._timers.schedule_join_timeout_if_absent(out, group.group_id, member, now)
                raise _Refused(ErrorCode.REBALANCE_IN_PROGRESS)
            version = protocol_version(metadata)
        except _Refused as refused:
            out.replies.append(Reply(token, SyncGroupResponse(refused.error_code)))
            return out
        except MalformedConsumerProtocol:
            out.replies.append(Reply(token, SyncGroupResponse(ErrorCode.UNKNOWN_SERVER_ERROR)))
            return out
        self._timers.cancel_sync_timeout(out, group.group_id, member.member_id)
        self._timers.schedule_session_timeout(out, group.group_id, member.member_id, now)
        response = SyncGroupResponse(
            ErrorCode.NONE,
            assignment=assignment_bytes(group, member.assigned, version),
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocol,
        )
        out.replies.append(Reply(token, response))
        return out

    def heartbeat(self, req: HeartbeatRequest, token: Hashable, now: Now) -> Result:
        out = Result()
        group = self._groups.groups[req.group_id]
        try:
            member = _validated(group, req.member_id, req.group_instance_id, req.generation_id)
        except _Refused as refused:
            out.replies.append(Reply(token, HeartbeatResponse(refused.error_code)))
            return out
        self._timers.schedule_session_timeout(out, group.group_id, member.member_id, now)
        error = ErrorCode.NONE
        if (
            member.member_epoch < group.target_assignment_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not _waiting_on_unreleased(group, member)
            )
        ):
            error = ErrorCode.REBALANCE_IN_PROGRESS
            self._timers.schedule_join_timeout_if_absent(out, group.group_id, member, now)
        out.replies.append(Reply(token, HeartbeatResponse(error)))
        return out

    def leave(self, req: LeaveGroupRequest, token: Hashable, now: Now) -> Result:
        """Each member leaves on its own; the group epoch is bumped once for all. As in
        Kafka, a classic member leaving never turns the group back into a classic one."""
        out = Result()
        groups = self._groups
        group = groups.groups[req.group_id]
        group_id = group.group_id
        results = []
        left_members: list[ConsumerGroupMember] = []
        for m in req.members:
            try:
                if m.group_instance_id is None:
                    member = group.members.get(m.member_id)
                    if member is None:
                        raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    member = group.static_member(m.group_instance_id)
                    if member is None:
                        raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
                    # Administrative removal by instance id leaves the member id out.
                    if m.member_id != UNKNOWN_MEMBER_ID and m.member_id != member.member_id:
                        raise _Refused(ErrorCode.FENCED_INSTANCE_ID)
                if not member.uses_classic_protocol:
                    raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
            except _Refused as refused:
                results.append(LeftMember(m.member_id, m.group_instance_id, refused.error_code))
                continue
            groups.drop_member(out, group_id, member.member_id)
            left_members.append(member)
            results.append(LeftMember(member.member_id, m.group_instance_id, ErrorCode.NONE))
        if left_members:
            for member in left_members:
                groups.member_left(out, group_id, member.member_id, now)
            groups.refresh_subscription_metadata(out, group, None)
            who = ", ".join(member_label(member) for member in left_members)
            groups.bump_group_epoch(out, group, RebalanceCause.MEMBER_LEFT, who)
            groups.update_target_assignment(out, group, now)
        out.replies.append(Reply(token, LeaveGroupResponse(ErrorCode.NONE, tuple(results))))
        return out

    def _downgrade(self, out: Result, group: ConsumerGroup, now: Now) -> ClassicGroup | None:
        if not may_downgrade(list(group.members.values()), self._groups.config):
            return None
        return self._groups.to_classic(out, group, None, now)


def _validated(
    group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int | None = None
) -> ConsumerGroupMember:
    """The classic member a request names: UNKNOWN_MEMBER_ID if there is none (or it speaks
    the new protocol), FENCED_INSTANCE_ID if another member id holds its instance id,
    ILLEGAL_GENERATION if `generation` is given and is not its member epoch."""
    if instance_id is None:
        member = group.members.get(member_id)
    else:
        member = group.static_member(instance_id)
        if member is not None and member.member_id != member_id:
            raise _Refused(ErrorCode.FENCED_INSTANCE_ID)
    if member is None or not member.uses_classic_protocol:
        raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
    if generation is not None and generation != member.member_epoch:
        raise _Refused(ErrorCode.ILLEGAL_GENERATION)
    return member


def _supports(group: ConsumerGroup, req: JoinGroupRequest) -> bool:
    """Kafka's rule: the consumer protocol type, and a protocol every classic member of the
    group supports (any, when none speaks the classic protocol)."""
    if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not req.protocols:
        return False
    classic = [m.classic for m in group.members.values() if m.classic is not None]
    return any(
        all(name in {n for n, _ in c.supported_protocols} for c in classic)
        for name in (p.name for p in req.protocols)
    )


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """A partition of the member's target it lacks is still held by another member."""
    target = group.target_of(member.member_id)
    return any(tp not in member.assigned and group.owner(tp) is not None for tp in target)

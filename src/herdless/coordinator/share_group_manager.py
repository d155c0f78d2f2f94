"""The share groups (KIP-932) of one shard: ShareGroupHeartbeat and what follows from it.

A heartbeat does, in order, what Kafka's GroupMetadataManager does for share groups:
1. the member joins (its id made up by itself, a UUID), or is updated (rack,
   subscription); the group epoch is bumped when the group is new, a subscription
   changed, or the subscribed topics' metadata did (its hash, KIP-1101, is in the
   group's metadata record);
2. a group epoch ahead of the target assignment's gets a new target assignment
   from the share assignor (share_assignor.py), for every member at once;
3. the member is given its target at once: share groups own no partitions, so
   there is nothing to revoke and no member waits for another.
Leaving (epoch -1) and a session that expires end in the same removal and group
epoch bump.

Every change is a record, written through share_log.py and applied at once by the
function replay uses. A request is checked whole before its first record; a
refusal writes nothing.

A group id names one group of one type (group_store.py): a heartbeat for an id a
classic or consumer group holds is refused with GROUP_ID_NOT_FOUND, as Kafka does
(share groups never convert). The topics come in as data (a TopicsImage).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable
from dataclasses import replace

from herdless.coordinator.assignors import MemberSpec
from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.consumer_group import named_partitions
from herdless.coordinator.consumer_heartbeat import HeartbeatRefused
from herdless.coordinator.consumer_messages import DescribedTopicPartitions
from herdless.coordinator.group_store import GroupStore
from herdless.coordinator.messages import ListedGroup
from herdless.coordinator.now import Now
from herdless.coordinator.result import Reply, Result, TimerKey, TimerKind
from herdless.coordinator.share_assignor import SHARE_ASSIGNORS
from herdless.coordinator.share_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    SHARE_GROUP_TYPE,
    SHARE_PROTOCOL_TYPE,
    ShareGroup,
    ShareGroupMember,
    ShareGroupState,
)
from herdless.coordinator.share_log import ShareGroupLog
from herdless.coordinator.share_messages import (
    DescribedShareGroup,
    DescribedShareGroupMember,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from herdless.coordinator.timers import CoordinatorTimer
from herdless.coordinator.topic_metadata import Partitions, TopicMetadata, TopicsImage
from herdless.protocol.errors import ErrorCode


class ShareGroupManager:
    def __init__(
        self, config: CoordinatorConfig, timer: CoordinatorTimer, store: GroupStore
    ) -> None:
        self.config = config
        self._timer = timer
        self._store = store
        # The share groups by id (the store's), to read.
        self.groups = store.share
        self.log = ShareGroupLog(store)

    # ======================================================================
    # ShareGroupHeartbeat
    # ======================================================================

    def heartbeat(
        self, req: ShareGroupHeartbeatRequest, topics: TopicsImage, token: Hashable, now: Now
    ) -> Result:
        out = Result()
        try:
            _validate(req)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                response = self._leave(out, req, now)
            else:
                response = self._join_or_heartbeat(out, req, topics, now)
        except HeartbeatRefused as refused:
            assert not out.records, "a refused heartbeat wrote records"
            response = ShareGroupHeartbeatResponse(refused.error_code, refused.message)
        out.replies.append(Reply(token, response))
        return out

    def _group(self, group_id: str, joining: bool) -> ShareGroup:
        """The share group of `group_id` (a new one, not yet written, when joining); refuses
        an id that names a group of another type, or no group at all."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self._store:
            raise HeartbeatRefused(ErrorCode.GROUP_ID_NOT_FOUND, _not_a_share_group(group_id))
        if not joining:
            raise HeartbeatRefused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return ShareGroup(group_id)

    def _join_or_heartbeat(
        self, out: Result, req: ShareGroupHeartbeatRequest, topics: TopicsImage, now: Now
    ) -> ShareGroupHeartbeatResponse:
        group_id = req.group_id
        joining = req.member_epoch == 0
        group = self._group(group_id, joining)
        member = group.members.get(req.member_id)
        if member is None:
            max_size = self.config.share_max_group_size
            if len(group.members) >= max_size:
                raise HeartbeatRefused(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of {max_size} members.",
                )
            if not joining:
                raise HeartbeatRefused(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {group_id}.",
                )
            member = ShareGroupMember(req.member_id)
        elif not joining:
            _check_epoch(member, req.member_epoch)

        # Checked: from here on the heartbeat only writes.
        group = self._store.put_share(group)
        names = req.subscribed_topic_names
        updated = replace(
            member,
            rack_id=member.rack_id if req.rack_id is None else req.rack_id,
            client_id=req.client_id,
            client_host=req.client_host,
            subscribed_topic_names=(
                member.subscribed_topic_names if names is None else frozenset(names)
            ),
        )
        is_new = member.member_id not in group.members
        if is_new or updated.metadata_value() != member.metadata_value():
            self.log.member_metadata(out, group_id, updated)
        bump = group.group_epoch == 0 or (
            updated.subscribed_topic_names != member.subscribed_topic_names
        )
        self._refresh_subscription_metadata(out, group, topics, bump)
        self._update_target_assignment(out, group)
        current = self._reconcile(out, group, group.members[member.member_id])
        self._schedule_session_timeout(out, group_id, member.member_id, now)
        # The assignment goes to a member joining, one whose assignment changed, and one
        # that did not hear its last epoch (an answer lost: it comes back with the previous).
        tell = joining or current.assigned != member.assigned
        tell = tell or req.member_epoch != current.member_epoch
        return ShareGroupHeartbeatResponse(
            ErrorCode.NONE,
            member_id=current.member_id,
            member_epoch=current.member_epoch,
            heartbeat_interval_ms=self.config.share_heartbeat_interval_for(group_id),
            assignment=current.assigned if tell else None,
        )

    def _refresh_subscription_metadata(
        self, out: Result, group: ShareGroup, topics: TopicsImage | None, bump: bool
    ) -> None:
        """Bump the group epoch if asked to, or if the subscribed topics' metadata changed
        since the last bump. Without an image (a member fenced by its timer), what is known
        of the topics still subscribed is kept."""
        names = group.subscribed_topic_names()
        known = group.subscription_metadata
        metadata: dict[str, TopicMetadata] = {}
        for name in sorted(names):
            if topics is not None:
                topic = topics.topic(name)
            else:
                topic = None if known is None else known.get(name)
            if topic is not None:
                metadata[name] = topic
        if topics is not None or known is not None:
            group.subscription_metadata = metadata
        digest = (
            group.metadata_hash
            if group.subscription_metadata is None
            else (metadata_hash(metadata.values()))
        )
        if bump or digest != group.metadata_hash:
            self.log.group_epoch(out, group.group_id, group.group_epoch + 1, digest)

    def _update_target_assignment(self, out: Result, group: ShareGroup) -> None:
        """A new target for every member when the group epoch moved past the target's, once
        the subscribed topics are known (a group just loaded learns them at the next
        heartbeat; its members keep their assignments meanwhile)."""
        metadata = group.subscription_metadata
        if group.group_epoch <= group.target_assignment_epoch or metadata is None:
            return
        ids = {name: t.topic_id for name, t in metadata.items()}
        members = {
            m.member_id: MemberSpec(
                None,
                frozenset(ids[n] for n in m.subscribed_topic_names if n in ids),
                group.target_of(m.member_id),
            )
            for m in group.members.values()
        }
        counts = {t.topic_id: t.num_partitions for t in metadata.values()}
        assignor = SHARE_ASSIGNORS[self._assignor()]
        targets = assignor(members, counts, {})
        for member_id in sorted(targets):
            target = targets[member_id]
            if group.target_assignment.get(member_id) != target:
                self.log.target_assignment(out, group.group_id, member_id, target)
        self.log.target_assignment_metadata(out, group.group_id, group.group_epoch)

    def _reconcile(
        self, out: Result, group: ShareGroup, member: ShareGroupMember
    ) -> ShareGroupMember:
        """The member takes its target, and the target's epoch, at once."""
        epoch = group.target_assignment_epoch
        target = group.target_of(member.member_id)
        if member.member_epoch == epoch and member.assigned == target:
            return member
        reconciled = replace(
            member, member_epoch=epoch, previous_member_epoch=member.member_epoch, assigned=target
        )
        self.log.current_assignment(out, group.group_id, reconciled)
        return reconciled

    def _assignor(self) -> str:
        return next(n for n in self.config.share_assignors if n in SHARE_ASSIGNORS)

    # ======================================================================
    # leaving, and being made to leave
    # ======================================================================

    def _leave(
        self, out: Result, req: ShareGroupHeartbeatRequest, now: Now
    ) -> ShareGroupHeartbeatResponse:
        group = self._group(req.group_id, joining=False)
        if req.member_id not in group.members:
            raise HeartbeatRefused(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.",
            )
        self._remove_member(out, group, req.member_id)
        return ShareGroupHeartbeatResponse(
            ErrorCode.NONE, member_id=req.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH
        )

    def fence_member(self, out: Result, group_id: str, member_id: str, now: Now) -> None:
        """The member's session expired: it leaves, if it is still in the group."""
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            self._remove_member(out, group, member_id)

    def _remove_member(self, out: Result, group: ShareGroup, member_id: str) -> None:
        """The member's records go, the group epoch is bumped, and the others share what it
        had at once."""
        self._timer.cancel(out, TimerKey(TimerKind.SHARE_SESSION, group.group_id, member_id))
        self.log.member_tombstones(out, group.group_id, member_id)
        self._refresh_subscription_metadata(out, group, None, bump=True)
        self._update_target_assignment(out, group)

    def _schedule_session_timeout(
        self, out: Result, group_id: str, member_id: str, now: Now
    ) -> None:
        self._timer.schedule(
            out,
            TimerKey(TimerKind.SHARE_SESSION, group_id, member_id),
            now.monotonic_ms + self.config.share_session_timeout_for(group_id),
            lambda o, now: self.fence_member(o, group_id, member_id, now),
        )

    # ======================================================================
    # loading
    # ======================================================================

    def on_loaded(self, out: Result, now: Now) -> None:
        """Loaded by replay: every member's session starts now."""
        for group_id, group in self.groups.items():
            for member_id in group.members:
                self._schedule_session_timeout(out, group_id, member_id, now)

    def unload(self) -> None:
        self.groups.clear()

    # ======================================================================
    # describing, listing, deleting
    # ======================================================================

    def describe(self, group_ids: Iterable[str], topics: TopicsImage) -> list[DescribedShareGroup]:
        described = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if not group_id:
                described.append(DescribedShareGroup(group_id, ErrorCode.INVALID_GROUP_ID))
            elif group is None:
                message = (
                    _not_a_share_group(group_id)
                    if group_id in self._store
                    else f"Group {group_id} not found."
                )
                described.append(
                    DescribedShareGroup(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message)
                )
            else:
                described.append(self._described(group, topics))
        return described

    def _described(self, group: ShareGroup, topics: TopicsImage) -> DescribedShareGroup:
        def named(partitions: Partitions) -> tuple[DescribedTopicPartitions, ...]:
            return named_partitions(partitions, topics)

        members = tuple(
            DescribedShareGroupMember(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
                assignment=named(m.assigned),
            )
            for m in group.members.values()
        )
        return DescribedShareGroup(
            group.group_id,
            ErrorCode.NONE,
            group_state=str(group.state),
            group_epoch=group.group_epoch,
            assignment_epoch=group.target_assignment_epoch,
            assignor_name=self._assignor(),
            members=members,
        )

    def list_groups(self, states: set[str]) -> list[ListedGroup]:
        """`states` in lower case; empty: every state."""
        return [
            ListedGroup(group.group_id, SHARE_PROTOCOL_TYPE, str(group.state), SHARE_GROUP_TYPE)
            for group in self.groups.values()
            if not states or str(group.state).lower() in states
        ]

    def validate_delete(self, group_id: str) -> ErrorCode:
        """Whether DeleteGroups may delete the share group of `group_id`: when it is Empty."""
        empty = self.groups[group_id].state is ShareGroupState.EMPTY
        return ErrorCode.NONE if empty else ErrorCode.NON_EMPTY_GROUP

    def delete(self, out: Result, group_id: str) -> None:
        """Tombstones for all of the group, in Kafka's order; gone once applied."""
        self.log.group_tombstones(out, self.groups[group_id])


def metadata_hash(topics: Iterable[TopicMetadata]) -> int:
    """A signed 64-bit digest of the topics' ids, names and partition counts (KIP-1101's
    role, herdless's own function): equal digests, same topics. A group loaded from a log
    Kafka wrote bumps its epoch once, at its first heartbeat, as the digests differ."""
    h = hashlib.blake2b(digest_size=8)
    for topic in sorted(topics, key=lambda t: t.name):
        h.update(f"{topic.name}\0{topic.topic_id}\0{topic.num_partitions}\n".encode())
    return int.from_bytes(h.digest(), "big", signed=True)


def _validate(req: ShareGroupHeartbeatRequest) -> None:
    """Kafka's checks of a request whatever the group's state: INVALID_REQUEST."""

    def invalid(message: str) -> HeartbeatRefused:
        return HeartbeatRefused(ErrorCode.INVALID_REQUEST, message)

    if not req.member_id.strip():
        raise invalid("MemberId can't be empty.")
    if not req.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise invalid("RackId can't be empty.")
    if req.member_epoch == 0:
        if not req.subscribed_topic_names:
            raise invalid("SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")


def _check_epoch(member: ShareGroupMember, received: int) -> None:
    """Kafka's: the epoch the member has, or the previous one when the answer that moved it
    on was lost (a share member holds nothing it could have to give back)."""
    expected = member.member_epoch
    if received == expected or (received < expected and received == member.previous_member_epoch):
        return
    raise HeartbeatRefused(
        ErrorCode.FENCED_MEMBER_EPOCH,
        f"The share group member has a {'greater' if received > expected else 'smaller'}"
        f" member epoch ({received}) than the one known by the group coordinator ({expected})."
        " The member must abandon all its partitions and rejoin.",
    )


def _not_a_share_group(group_id: str) -> str:
    return f"Group {group_id} is not a share group."

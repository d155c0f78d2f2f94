"""The consumer groups (KIP-848) of one shard: ConsumerGroupHeartbeat and what follows from it.

A heartbeat does, in order, what Kafka's GroupMetadataManager does:
1. the member joins, or is updated (subscription, assignor, rebalance timeout);
   the group epoch is bumped when the group is new, a subscription changed or
   the subscribed topics' partitions did;
2. a group epoch ahead of the target assignment's gets a new target assignment
   from the server assignor, for every member at once, no sooner than the
   group's assignment interval after the last one finished (KIP-1263: the joins
   and leaves that arrive together share one computation; a timer computes it
   when the interval ends), and on a worker thread of the broker's when the
   assignor is offloaded (the members keep reconciling towards the last target
   meanwhile);
3. the member's own assignment moves towards its target (reconciliation.py),
   independently of every other member.
Leaving (epoch -1), a static member leaving for a while (-2), a session that
expires and a member that does not revoke within its rebalance timeout all end
in the same removal and group epoch bump.

Every change is a record, written through consumer_log.py: appended to the result
and applied at once by the very function replay uses, so a shard's consumer groups
are always what its log makes of them. A request is checked whole before its first
record; a refusal writes nothing. The members' timers are consumer_timers.py's.

The topics come in as data (a TopicsImage, from the broker), never looked up.
Group ids are shared with classic groups: a heartbeat takes over an empty
classic group (its tombstone first) and converts a non-empty one when
group.consumer.migration.policy allows (group_conversion.py; GROUP_ID_NOT_FOUND
otherwise); members speaking the classic protocol inside a consumer group are
classic_members.py's, and the last new-protocol member leaving may turn the
group back into a classic one (`to_classic`). What that asks of the classic groups,
it asks through group_conversion.ClassicGroupHooks; the groups of both types are in
one GroupStore.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable
from dataclasses import replace

from herdless.coordinator.assignors import ASSIGNORS
from herdless.coordinator.classic_group import ClassicGroup
from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    describe_group,
)
from herdless.coordinator.consumer_heartbeat import (
    HeartbeatRefused,
    check_epoch,
    updated_member,
    validate,
)
from herdless.coordinator.consumer_history import TargetAssignmentHistory
from herdless.coordinator.consumer_log import ConsumerGroupLog
from herdless.coordinator.consumer_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
)
from herdless.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    MalformedConsumerProtocol,
)
from herdless.coordinator.consumer_records import (
    ConsumerGroupRegularExpressionValue,
)
from herdless.coordinator.consumer_timers import ConsumerGroupTimers
from herdless.coordinator.group_conversion import (
    ClassicGroupHooks,
    classic_group_from_consumer,
    consumer_group_from_classic,
    creation_records,
    downgrades_on_leaving,
    may_upgrade,
)
from herdless.coordinator.group_store import GroupStore
from herdless.coordinator.history import RebalanceCause
from herdless.coordinator.messages import ListedGroup, RebalanceRecord
from herdless.coordinator.now import Now
from herdless.coordinator.reconciliation import MemberState, reconcile
from herdless.coordinator.result import OffloadedWork, Reply, Result
from herdless.coordinator.state import GroupState
from herdless.coordinator.target_assignment import (
    AssignorRun,
    assignor_run,
    next_target_due,
    placed_targets,
)
from herdless.coordinator.timers import CoordinatorTimer
from herdless.coordinator.topic_metadata import (
    NO_PARTITIONS,
    Partitions,
    TopicMetadata,
    TopicsImage,
)
from herdless.protocol.errors import ErrorCode

# The group type ListGroups v5 names (and filters by); classic groups are "classic".
CONSUMER_GROUP_TYPE = "consumer"


class ConsumerGroupManager:
    """The consumer groups of one shard.

    Besides the requests of the new protocol, it offers the classic members of its groups
    (classic_members.py) the operations both protocols share, in Kafka's terms: the
    member's metadata, the group epoch, the subscription metadata, the target assignment,
    reconciliation and fencing; with `timers` and `log` for the rest.
    """

    def __init__(
        self,
        config: CoordinatorConfig,
        timer: CoordinatorTimer,
        store: GroupStore,
        new_uuid: Callable[[], str],
        classic: ClassicGroupHooks,
    ) -> None:
        self.config = config
        self._store = store
        # The consumer groups by id (the store's), to read.
        self.groups = store.consumer
        self.timers = ConsumerGroupTimers(
            config, store, timer, self.fence_member, self.update_target_assignment
        )
        self.log = ConsumerGroupLog(store, self)
        self._new_uuid = new_uuid
        self._classic = classic
        # The image each group's regular expressions were last resolved against.
        self._regexes_resolved_with: dict[str, TopicsImage] = {}
        # Soft state for operators, like the classic groups' rebalance history.
        self._history: dict[str, TargetAssignmentHistory] = {}
        # (group id, member id) of members whose assignment changed in an answer they may not
        # have received: it goes out in every answer until they report owning exactly it.
        # Delivery, not group state: it is not in the log, and a loaded shard starts empty.
        self._unconfirmed: set[tuple[str, str]] = set()
        # The epoch of each group's target assignment being computed off the loop: one at
        # a time per group. Not in the log: a loaded shard computes again.
        self._computing: dict[str, int] = {}
        # Joins waiting for the target being computed with them: (token, request, the member
        # before the request), by group; answered when it is written.
        self._parked_joins: dict[
            str, list[tuple[Hashable, ConsumerGroupHeartbeatRequest, ConsumerGroupMember]]
        ] = {}

    # -- TombstoneListener: what a tombstone ends beside the group or member itself ----

    def group_tombstoned(self, group_id: str) -> None:
        self._regexes_resolved_with.pop(group_id, None)
        self._history.pop(group_id, None)
        self._computing.pop(group_id, None)

    def member_tombstoned(self, group_id: str, member_id: str) -> None:
        self._unconfirmed.discard((group_id, member_id))

    # ======================================================================
    # what both protocols' members share
    # ======================================================================

    def new_member_id(self) -> str:
        return self._new_uuid()

    def write_member(
        self,
        out: Result,
        group: ConsumerGroup,
        before: ConsumerGroupMember,
        updated: ConsumerGroupMember,
    ) -> bool:
        """Record the member's metadata if it is new or changed; True if it is new."""
        is_new = before.member_id not in group.members
        if is_new or updated.metadata_value() != before.metadata_value():
            self.log.member_metadata(out, group.group_id, updated)
        return is_new

    def bump_group_epoch(
        self, out: Result, group: ConsumerGroup, cause: RebalanceCause, detail: str
    ) -> None:
        self.log.group_epoch(out, group.group_id, group.group_epoch + 1)
        self.history_of(group.group_id).epoch_bumped(cause, detail)

    def drop_member(self, out: Result, group_id: str, member_id: str) -> None:
        """The member's timers and records go; what that changes for the group is the
        caller's to write."""
        self.timers.cancel_member_timers(out, group_id, member_id)
        self.log.member_tombstones(out, group_id, member_id)

    def replace_static_member(
        self,
        out: Result,
        group: ConsumerGroup,
        old: ConsumerGroupMember,
        new: ConsumerGroupMember,
    ) -> None:
        """A static member back under a new member id takes the old one's place and target."""
        target = group.target_of(old.member_id)
        self.drop_member(out, group.group_id, old.member_id)
        self.log.member_metadata(out, group.group_id, new)
        self.log.target_assignment(out, group.group_id, new.member_id, target)
        self.log.current_assignment(out, group.group_id, new)

    def member_left(self, out: Result, group_id: str, member_id: str, now: Now) -> None:
        """Tell the group's history, which may close a target assignment on it."""
        finished = self.history_of(group_id).member_left(member_id, now.wall_ms)
        self._publish(out, group_id, finished)

    def fence_member(
        self, out: Result, group_id: str, member_id: str, cause: RebalanceCause, now: Now
    ) -> None:
        """The member is made to leave (its session or a deadline expired), if it is still
        in the group."""
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            self._remove_member(out, group, group.members[member_id], cause, now)

    # ======================================================================
    # ConsumerGroupHeartbeat
    # ======================================================================

    def heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, topics: TopicsImage, token: Hashable, now: Now
    ) -> Result:
        out = Result()
        try:
            validate(req, self._assignors())
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                response = self._leave(out, req, now)
            else:
                response = self._join_or_heartbeat(out, req, topics, token, now)
        except HeartbeatRefused as refused:
            assert not out.records, "a refused heartbeat wrote records"
            response = ConsumerGroupHeartbeatResponse(refused.error_code, refused.message)
        if response is not None:
            out.replies.append(Reply(token, response))
        return out

    def _not_found(self, group_id: str) -> str:
        if group_id in self._store.classic or group_id in self._store.share:
            return f"Group {group_id} is not a consumer group."
        return f"Consumer group {group_id} not found."

    def _assignors(self) -> tuple[str, ...]:
        return tuple(name for name in self.config.consumer_assignors if name in ASSIGNORS)

    def _join_or_heartbeat(
        self,
        out: Result,
        req: ConsumerGroupHeartbeatRequest,
        topics: TopicsImage,
        token: Hashable,
        now: Now,
    ) -> ConsumerGroupHeartbeatResponse | None:
        """The answer, or None for a join parked until its target is written."""
        group_id = req.group_id
        joining = req.member_epoch == 0
        group = self.groups.get(group_id)
        classic = self._store.classic.get(group_id) if group is None else None
        if group_id in self._store.share or (group is None and not joining):
            raise HeartbeatRefused(ErrorCode.GROUP_ID_NOT_FOUND, self._not_found(group_id))
        upgraded = None
        if classic is not None and not _is_empty_classic(classic):
            upgraded = group = self._upgrade(classic, topics)
        group = group or ConsumerGroup(group_id)
        member, replaced = self._member_for(group, req)

        # Checked: from here on the heartbeat only writes.
        if classic is not None:
            self._classic.retire(out, group_id)
        if upgraded is not None:
            for key, value in creation_records(upgraded):
                self.log.write(out, key, value)
            group = self.groups[group_id]
            for member_id in group.members:
                self.timers.schedule_session_timeout(out, group_id, member_id, now)
        self._store.put_consumer(group)
        before = member
        if replaced is not None:
            self.replace_static_member(out, group, replaced, member)
        updated = updated_member(member, req)
        is_new = self.write_member(out, group, member, updated)
        cause = None
        if group.group_epoch == 0 or (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
        ):
            cause = RebalanceCause.MEMBER_JOINED if is_new else RebalanceCause.SUBSCRIPTION_CHANGED
        topics_changed = self._refresh_regexes(out, group, topics, now)
        topics_changed |= self.refresh_subscription_metadata(out, group, topics)
        if cause is None and topics_changed:
            cause = RebalanceCause.TOPIC_METADATA_CHANGED
        if cause is not None:
            self.bump_group_epoch(out, group, cause, member_label(updated))
        self.update_target_assignment(out, group, now)

        self.timers.schedule_session_timeout(out, group_id, updated.member_id, now)
        if joining and self._computing.get(group_id) == group.group_epoch:
            # The target being computed (off the loop, for milliseconds) is the first with
            # this member: its answer waits for it, so that a member joining a quiet group
            # has its partitions in its first answer, as when the target is computed inline,
            # rather than at its next heartbeat, seconds later.
            self._parked_joins.setdefault(group_id, []).append((token, req, before))
            return None
        return self._answer(out, group, req, before, now)

    def _answer(
        self,
        out: Result,
        group: ConsumerGroup,
        req: ConsumerGroupHeartbeatRequest,
        before: ConsumerGroupMember,
        now: Now,
    ) -> ConsumerGroupHeartbeatResponse:
        """The member's assignment moves towards its target; what it is told of it."""
        group_id, member_id = group.group_id, before.member_id
        joining = req.member_epoch == 0
        self.reconcile(out, group, group.members[member_id], req.owned_partitions, now)
        current = group.members[member_id]
        # The assignment goes out when it changed, and to a member that sent everything
        # (when joining, or after an error), whatever it believes it has.
        full_request = joining or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.owned_partitions is not None
        )
        changed = current.assigned != before.assigned
        return ConsumerGroupHeartbeatResponse(
            ErrorCode.NONE,
            member_id=member_id,
            member_epoch=current.member_epoch,
            heartbeat_interval_ms=self.config.consumer_heartbeat_interval_for(group_id),
            assignment=(
                current.assigned
                if full_request or self._unconfirmed_change(group_id, req, current, changed)
                else None
            ),
        )

    def _unconfirmed_change(
        self,
        group_id: str,
        req: ConsumerGroupHeartbeatRequest,
        member: ConsumerGroupMember,
        changed: bool,
    ) -> bool:
        """Whether the member may not know its assignment yet. Kafka sends it only when it
        changed, counting on a client whose heartbeat failed to send a full one next.
        librdkafka does not after a heartbeat that timed out (its timeout is the heartbeat
        interval): had the answer changed the assignment at the same epoch, the member would
        keep partitions it was asked to revoke until its rebalance timeout, or never use
        partitions it was given. A join needs none of this: a client that lost that answer
        joins again with a full request."""
        key = (group_id, member.member_id)
        if changed and req.member_epoch != 0:
            self._unconfirmed.add(key)
        elif req.owned_partitions is not None and req.owned_partitions == member.assigned:
            self._unconfirmed.discard(key)
        return changed or key in self._unconfirmed

    def _upgrade(self, classic: ClassicGroup, topics: TopicsImage) -> ConsumerGroup:
        """The consumer group a non-empty classic group becomes, not yet written; refused
        with GROUP_ID_NOT_FOUND when it may not."""
        if not may_upgrade(classic, self.config):
            raise HeartbeatRefused(ErrorCode.GROUP_ID_NOT_FOUND, self._not_found(classic.group_id))
        try:
            return consumer_group_from_classic(classic, topics)
        except MalformedConsumerProtocol:
            raise HeartbeatRefused(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade the classic group {classic.group_id} to consumer group because"
                " the embedded consumer protocol is malformed.",
            ) from None

    def _member_for(
        self, group: ConsumerGroup, req: ConsumerGroupHeartbeatRequest
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """The member the request speaks for (a new one when joining), and the static member
        it replaces, if any; refuses the request if it may not speak for it."""
        joining = req.member_epoch == 0
        max_size = self.config.consumer_max_group_size
        if len(group.members) >= max_size and req.member_id not in group.members:
            raise HeartbeatRefused(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {max_size} members.",
            )
        member_id = req.member_id or self._new_uuid()
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise HeartbeatRefused(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                return ConsumerGroupMember(member_id), None
            check_epoch(member, req)
            return member, None
        existing = group.static_member(req.instance_id)
        if joining and (existing is None or existing.member_id != member_id):
            if existing is None:
                return group.members.get(member_id) or ConsumerGroupMember(member_id), None
            # A classic member's place is taken at once, as Kafka does (it restarted with
            # the new protocol).
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not (
                existing.uses_classic_protocol
            ):
                raise HeartbeatRefused(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {req.instance_id} cannot join"
                    f" the group because the instance id is owned by {existing.member_id}"
                    " member.",
                )
            # It comes back under a new member id: its place, assignment included, is its.
            assignment = replace(existing.assignment, member_epoch=0, previous_member_epoch=0)
            return replace(existing, member_id=member_id, assignment=assignment), existing
        if existing is None:
            raise HeartbeatRefused(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
            )
        if existing.member_id != member_id:
            raise HeartbeatRefused(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {req.instance_id} was fenced by"
                f" member {existing.member_id}.",
            )
        check_epoch(existing, req)
        return existing, None

    def _refresh_regexes(
        self, out: Result, group: ConsumerGroup, topics: TopicsImage, now: Now
    ) -> bool:
        """Resolve the group's regular expressions against the topics when they or the topics
        changed; True if what one matches changed."""
        group_id = group.group_id
        regexes = group.subscribed_regexes()
        changed = False
        for regex in sorted(group.resolved_regexes.keys() - regexes):
            self.log.regex_tombstone(out, group_id, regex)
        fresh = self._regexes_resolved_with.get(group_id) is topics
        if fresh and regexes <= group.resolved_regexes.keys():
            return False
        for regex in sorted(regexes):
            matched = _matching(regex, topics.names())
            resolved = group.resolved_regexes.get(regex)
            if resolved is None or resolved.topics != matched:
                value = ConsumerGroupRegularExpressionValue(matched, topics.version, now.wall_ms)
                self.log.resolved_regex(out, group_id, regex, value)
                changed = True
        self._regexes_resolved_with[group_id] = topics
        return changed

    def refresh_subscription_metadata(
        self, out: Result, group: ConsumerGroup, topics: TopicsImage | None
    ) -> bool:
        """Record the subscribed topics' metadata if it changed (a topic subscribed to or
        no longer, created, deleted, or given partitions); True if it did. Without an
        image, what is known of the topics still subscribed is kept."""
        names = group.subscribed_topic_names()
        metadata: dict[str, TopicMetadata] = {}
        for name in sorted(names):
            topic = group.subscription_metadata.get(name) if topics is None else topics.topic(name)
            if topic is not None:
                metadata[name] = topic
        if metadata == group.subscription_metadata:
            return False
        self.log.subscription_metadata(out, group.group_id, tuple(metadata.values()))
        return True

    def update_target_assignment(self, out: Result, group: ConsumerGroup, now: Now) -> None:
        """Start a new target assignment if the group epoch moved past the target's: now
        if the group's assignment interval has passed since the last one finished, else
        when it has (a timer). None starts while one is being computed; its completion
        looks again."""
        group_id = group.group_id
        if group.group_epoch <= group.target_assignment_epoch or group_id in self._computing:
            return
        interval = self.config.consumer_assignment_interval_for(group_id)
        due = next_target_due(group.target_finished_monotonic_ms, interval)
        if due is not None and now.monotonic_ms < due:
            self.timers.schedule_assignment(out, group_id, due)
            return
        self.timers.cancel_assignment(out, group_id)
        run = assignor_run(group, self._assignors())
        if not self.config.consumer_assignor_offload_for(group_id):
            self._install_target(out, group, run, run(), now)
            return
        # Off the loop: the run reads its own copy of the group, which moves on meanwhile.
        self._computing[group_id] = run.group_epoch
        out.offloaded.append(
            OffloadedWork(run, lambda targets, now: self._target_computed(group, run, targets, now))
        )

    def _target_computed(
        self,
        group: ConsumerGroup,
        run: AssignorRun,
        targets: dict[str, Partitions] | None,
        now: Now,
    ) -> Result:
        """An offloaded run finished (`targets` None: it failed). Its target is written for
        the members as they are now (target_assignment.placed_targets); the joins parked for
        it are answered; the next target starts if the group epoch moved on meanwhile."""
        out = Result()
        group_id = group.group_id
        if self.groups.get(group_id) is not group or self._computing.get(group_id) != (
            run.group_epoch
        ):
            # Deleted, converted or unloaded meanwhile; a group of the same id made since
            # answers its own joins when its target is written.
            if group_id not in self.groups:
                for token, _, before in self._parked_joins.pop(group_id, []):
                    out.replies.append(Reply(token, _not_a_member(before.member_id, group_id)))
            return out
        del self._computing[group_id]
        if targets is None:
            interval = self.config.consumer_assignment_interval_for(group_id)
            self.timers.schedule_assignment(out, group_id, now.monotonic_ms + max(interval, 1_000))
        else:
            self._install_target(out, group, run, targets, now)
        for token, req, before in self._parked_joins.pop(group_id, []):
            if before.member_id in group.members:
                response = self._answer(out, group, req, before, now)
            else:  # it left, or was fenced, meanwhile
                response = _not_a_member(before.member_id, group_id)
            out.replies.append(Reply(token, response))
        if targets is not None:
            self.update_target_assignment(out, group, now)
        return out

    def _install_target(
        self,
        out: Result,
        group: ConsumerGroup,
        run: AssignorRun,
        targets: dict[str, Partitions],
        now: Now,
    ) -> None:
        for member_id, target in placed_targets(group, run, targets):
            if group.target_assignment.get(member_id) != target:
                self.log.target_assignment(out, group.group_id, member_id, target)
        epoch = run.group_epoch
        self.log.target_assignment_metadata(out, group.group_id, epoch, now.wall_ms)
        group.target_finished_monotonic_ms = now.monotonic_ms
        progress = {
            m.member_id: (m.member_epoch, m.assignment.is_reconciled_to(epoch))
            for m in group.members.values()
        }
        finished = self.history_of(group.group_id).target_changed(epoch, now.wall_ms, progress)
        self._publish(out, group.group_id, finished)

    def reconcile(
        self,
        out: Result,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        owned: Partitions | None,
        now: Now,
    ) -> None:
        """Move the member's assignment towards its target, given what it reports owning
        (None: what it had), and start or stop its rebalance timeout accordingly."""
        ids = {n: t.topic_id for n, t in group.subscription_metadata.items()}
        subscribed = frozenset(ids[n] for n in group.member_topic_names(member) if n in ids)
        assignment = reconcile(
            member.assignment,
            group.target_assignment_epoch,
            group.target_of(member.member_id),
            subscribed,
            group.owner_epoch,
            owned,
        )
        if assignment == member.assignment:
            return
        member = replace(member, assignment=assignment)
        self.log.current_assignment(out, group.group_id, member)
        finished = self.history_of(group.group_id).member_progressed(
            member.member_id,
            assignment.member_epoch,
            assignment.is_reconciled_to(group.target_assignment_epoch),
            now.wall_ms,
        )
        self._publish(out, group.group_id, finished)
        if member.uses_classic_protocol:
            return  # told to rejoin instead, on the join and sync timers (classic_members.py)
        if assignment.state is MemberState.UNREVOKED_PARTITIONS:
            self.timers.schedule_rebalance_timeout(out, group.group_id, member, now)
        else:
            self.timers.cancel_rebalance_timeout(out, group.group_id, member.member_id)

    # ======================================================================
    # leaving, and being made to leave
    # ======================================================================

    def _leave(
        self, out: Result, req: ConsumerGroupHeartbeatRequest, now: Now
    ) -> ConsumerGroupHeartbeatResponse:
        group = self.groups.get(req.group_id)
        if group is None:
            raise HeartbeatRefused(ErrorCode.GROUP_ID_NOT_FOUND, self._not_found(req.group_id))
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise HeartbeatRefused(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {req.group_id}.",
                )
        else:
            member = group.static_member(req.instance_id)
            if member is None:
                raise HeartbeatRefused(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                )
            if member.member_id != req.member_id:
                raise HeartbeatRefused(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} was"
                    f" fenced by member {member.member_id}.",
                )
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Gone for a while: it keeps its place and partitions until its session ends.
                away = replace(
                    member.assignment,
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    pending_revocation=NO_PARTITIONS,
                )
                self.log.current_assignment(out, group.group_id, replace(member, assignment=away))
                self.timers.cancel_rebalance_timeout(out, group.group_id, member.member_id)
                return ConsumerGroupHeartbeatResponse(
                    ErrorCode.NONE,
                    member_id=member.member_id,
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                )
        self._remove_member(out, group, member, RebalanceCause.MEMBER_LEFT, now)
        return ConsumerGroupHeartbeatResponse(
            ErrorCode.NONE, member_id=req.member_id, member_epoch=req.member_epoch
        )

    def _remove_member(
        self,
        out: Result,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        cause: RebalanceCause,
        now: Now,
    ) -> None:
        """The member leaves, or is fenced: its partitions are free once the records are, and
        the next heartbeat of any member computes a target assignment without it. When it
        was the last to speak the new protocol, the group may become classic instead."""
        member_id = member.member_id
        self.member_left(out, group.group_id, member_id, now)
        if self._downgrade(out, group, member_id, now):
            return
        self.drop_member(out, group.group_id, member_id)
        for regex in sorted(group.resolved_regexes.keys() - group.subscribed_regexes()):
            self.log.regex_tombstone(out, group.group_id, regex)
        self.refresh_subscription_metadata(out, group, None)
        self.bump_group_epoch(out, group, cause, member_label(member))
        self.update_target_assignment(out, group, now)

    def _downgrade(
        self, out: Result, group: ConsumerGroup, leaving_member_id: str, now: Now
    ) -> bool:
        """The member speaking the new protocol leaves, or is fenced: if classic members
        alone remain and the policy allows, the consumer group becomes a classic group and
        a rebalance starts (Kafka's convertToClassicGroup). False if it does not."""
        if not downgrades_on_leaving(group, leaving_member_id, self.config):
            return False
        classic = self.to_classic(out, group, leaving_member_id, now)
        if classic is None:
            return False
        detail = f"{leaving_member_id} left; back to the classic protocol"
        self._classic.prepare_rebalance(out, classic, RebalanceCause.MEMBER_LEFT, detail, now)
        return True

    def to_classic(
        self, out: Result, group: ConsumerGroup, leaving_member_id: str | None, now: Now
    ) -> ClassicGroup | None:
        """Replace the consumer group with the classic group of its classic members (but
        `leaving_member_id`), Stable: its tombstones, then the classic group's metadata.
        None, and nothing done, if a member's embedded protocol does not parse."""
        history_size = self.config.rebalance_history_size
        try:
            classic = classic_group_from_consumer(
                group, leaving_member_id, now.wall_ms, history_size
            )
        except MalformedConsumerProtocol:
            return None
        self.delete(out, classic.group_id)
        self._classic.install(out, classic, now)
        return classic

    def on_loaded(self, out: Result, now: Now) -> None:
        """Loaded by replay: every member's session starts now, and so does the revocation
        deadline of every member asked to revoke, and the assignment interval after a
        target the log holds the time of (that time is another clock's). What each member
        last heard is not in the log: each is sent its assignment until it reports owning
        exactly it (an answer the last leader gave may never have arrived)."""
        for group_id, group in self.groups.items():
            if group.assignment_timestamp_ms:
                group.target_finished_monotonic_ms = now.monotonic_ms
            for member in group.members.values():
                self._unconfirmed.add((group_id, member.member_id))
                self.timers.schedule_session_timeout(out, group_id, member.member_id, now)
                if member.is_revoking and not member.uses_classic_protocol:
                    self.timers.schedule_rebalance_timeout(out, group_id, member, now)
            # A target that was due, or being computed when the last leader stopped.
            self.update_target_assignment(out, group, now)

    # ======================================================================
    # describing and listing
    # ======================================================================

    def describe(
        self, group_ids: Iterable[str], topics: TopicsImage
    ) -> list[DescribedConsumerGroup]:
        described = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if not group_id:
                described.append(DescribedConsumerGroup(group_id, ErrorCode.INVALID_GROUP_ID))
            elif group is None:
                described.append(
                    DescribedConsumerGroup(
                        group_id, ErrorCode.GROUP_ID_NOT_FOUND, self._not_found(group_id)
                    )
                )
            else:
                described.append(describe_group(group, topics, self._assignors()[0]))
        return described

    def list_groups(self, states: set[str]) -> list[ListedGroup]:
        """`states` in lower case; empty: every state."""
        listed = []
        for group in self.groups.values():
            state = str(group.state)
            if not states or state.lower() in states:
                listed.append(
                    ListedGroup(group.group_id, CONSUMER_PROTOCOL_TYPE, state, CONSUMER_GROUP_TYPE)
                )
        return listed

    # ======================================================================
    # offsets and administration
    # ======================================================================

    def delete(self, out: Result, group_id: str) -> None:
        """Tombstones for all of a group, in Kafka's order; the group is gone once applied."""
        group = self.groups[group_id]
        self.timers.cancel_assignment(out, group_id)
        for member_id in list(group.members):
            self.timers.cancel_member_timers(out, group_id, member_id)
        self.log.group_tombstones(out, group)

    def unload(self) -> list[Reply]:
        """Drop everything; the answers of the joins parked meanwhile (NOT_COORDINATOR)."""
        parked = [token for joins in self._parked_joins.values() for token, _, _ in joins]
        self._parked_joins.clear()
        self.groups.clear()
        self._regexes_resolved_with.clear()
        self._history.clear()
        self._unconfirmed.clear()
        self._computing.clear()
        error = ConsumerGroupHeartbeatResponse(ErrorCode.NOT_COORDINATOR)
        return [Reply(token, error) for token in parked]

    # ======================================================================
    # history
    # ======================================================================

    def history_of(self, group_id: str) -> TargetAssignmentHistory:
        history = self._history.get(group_id)
        if history is None:
            size = self.config.rebalance_history_size
            history = self._history[group_id] = TargetAssignmentHistory(size)
        return history

    @staticmethod
    def _publish(out: Result, group_id: str, entry: RebalanceRecord | None) -> None:
        if entry is not None:
            out.rebalances.append((group_id, entry))


def _not_a_member(member_id: str, group_id: str) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
    )


def member_label(member: ConsumerGroupMember) -> str:
    """How history entries name a member: its id, and its client id where it has one."""
    return f"{member.member_id} ({member.client_id})" if member.client_id else member.member_id


def _is_empty_classic(group: ClassicGroup) -> bool:
    return group.is_in(GroupState.EMPTY) and not group.members


def _matching(regex: str, names: Iterable[str]) -> tuple[str, ...]:
    """The names `regex` matches whole, sorted. One that does not compile (a group loaded from
    a log Kafka wrote, with RE2/J syntax Python lacks) matches nothing: heartbeats refuse
    such a regex, but a loaded group has it already."""
    try:
        pattern = re.compile(regex)
    except re.error:
        return ()
    return tuple(sorted(n for n in names if pattern.fullmatch(n)))

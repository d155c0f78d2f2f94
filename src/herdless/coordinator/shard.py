"""One coordinator shard: the groups and offsets of one `__consumer_offsets` partition.

Each operation takes a request, an opaque token naming it, and `now` (every
deadline on its monotonic reading, every written timestamp on its wall reading:
now.py), and returns a Result (records, replies, timer changes; see result.py for when the
replies may go out). Offset records reach state only through `replay`, the
same path that loads the shard, so live commits and loading cannot disagree;
group metadata is changed in place (it carries soft state no record holds:
parked requests, timers) and the record written is its projection, which is
what Kafka does too (replayRecords=false for classic groups).

The handlers follow Kafka's GroupMetadataManager (classic protocol) and
OffsetMetadataManager step by step; comments mark where and why we differ.
"""

from __future__ import annotations

import heapq
import struct
import uuid
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from herdless.coordinator.classic_members import ClassicMembers
from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.consumer_group import ConsumerGroup, ConsumerGroupState
from herdless.coordinator.consumer_groups import CONSUMER_GROUP_TYPE, ConsumerGroups
from herdless.coordinator.consumer_messages import ConsumerGroupHeartbeatRequest
from herdless.coordinator.consumer_protocol import MalformedConsumerProtocol
from herdless.coordinator.group import ClassicGroup, JoinWaiter, Member
from herdless.coordinator.group_conversion import (
    classic_group_from_consumer,
    downgrades_on_leaving,
)
from herdless.coordinator.history import RebalanceCause
from herdless.coordinator.messages import (
    NO_LEADER_EPOCH,
    NO_OFFSET,
    UNKNOWN_MEMBER_ID,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedMember,
    FetchedPartition,
    FetchedTopic,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    ListedGroup,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionError,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicErrors,
)
from herdless.coordinator.now import Now
from herdless.coordinator.offsets import BaseTimestamp, OffsetAndMetadata, OffsetTable, is_expired
from herdless.coordinator.records import (
    NO_TIMESTAMP,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    Record,
    decode_group_metadata_value,
    decode_key,
    decode_offset_key_prefix,
    encode_offset,
    group_metadata_record,
    offset_commit_record,
    offset_key_head,
)
from herdless.coordinator.result import (
    CancelTimer,
    Reply,
    Result,
    ScheduleTimer,
    TimerKey,
    TimerKind,
)
from herdless.coordinator.state import GroupState, Op, can_rebalance, state_answer
from herdless.coordinator.topic_metadata import TopicsImage
from herdless.protocol.errors import ErrorCode

_E, _P, _C, _S, _D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

# JoinGroup v4+ (KIP-394): a new dynamic member must rejoin with the id we give it.
_MIN_VERSION_REQUIRING_MEMBER_ID = 4
# JoinGroup v9+ (KIP-814): a static leader's rejoin may skip recomputing the assignment.
_MIN_VERSION_SKIPPING_ASSIGNMENT = 9
# OffsetCommit v9+ answers GROUP_ID_NOT_FOUND for an unknown group, older ones ILLEGAL_GENERATION.
_MIN_COMMIT_VERSION_GROUP_ID_NOT_FOUND = 9
# DescribeGroups v6+ (KIP-1043) reports unknown groups with an error instead of as Dead.
_MIN_DESCRIBE_VERSION_GROUP_ID_NOT_FOUND = 6

TimerCallback = Callable[[Result, Now], None]


@dataclass(slots=True)
class _Timer:
    deadline_ms: int
    # Scheduling order: ties fire in it.
    seq: int
    callback: TimerCallback
    # The seq of this timer's entry in the deadline heap; that entry's deadline may be
    # earlier than deadline_ms (moved later in place) but never later.
    heap_seq: int


def _java_length(s: str) -> int:
    """String.length() in Java counts UTF-16 code units; Kafka's size limits use it."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le")) // 2


class CoordinatorShard:
    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.config = config or CoordinatorConfig()
        self._new_uuid = new_uuid
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetTable()
        self.consumer = ConsumerGroups(
            self.config,
            self._schedule,
            self._cancel,
            lambda key: key in self._timers,
            new_uuid,
            self.groups,
            self._retire_classic_group,
            self._downgrade,
        )
        self.classic_members = ClassicMembers(
            self.consumer,
            lambda out, group, now: self._to_classic(out, group, None, now),
        )
        self._timers: dict[TimerKey, _Timer] = {}
        # (deadline, seq, key) of every timer, and of some since cancelled or
        # rescheduled, which are dropped when they come to the top.
        self._deadlines: list[tuple[int, int, TimerKey]] = []
        self._timer_seq = 0

    # ======================================================================
    # loading
    # ======================================================================

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one `__consumer_offsets` record in log order: loading and live writes alike."""
        decoded = decode_key(key)
        if decoded is None:
            # Consumer groups' records; those of group types we do not run (share groups,
            # streams groups) are skipped, so a log written by Kafka still loads.
            self.consumer.log.replay(key, value)
            return
        if isinstance(decoded, OffsetCommitKey):
            self._apply_offset(decoded, value)
        else:
            self._replay_group(decoded, value)

    def replay_records(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        """replay() of each (key, value) in order.

        Loading hands over a batch's records a run at a time (see
        protocol/record_columns.py), and a run of one OffsetCommit's records (one
        group and topic, every value a commit, or every one a tombstone) is applied
        at once, to the same state: each partition ends with its last value, and
        the group exists afterwards if it did before or any value was a commit.
        """
        run = _offset_run(keys)
        tombstones = -1 if run is None else values.count(None)
        if run is None or 0 < tombstones < len(values):
            for key, value in zip(keys, values, strict=True):
                self.replay(key, value)
            return
        group_id, topic, partitions = run
        if tombstones:
            self.offsets.remove_all(group_id, topic, partitions)
            return
        if group_id not in self.groups and group_id not in self.consumer.groups:
            self.groups[group_id] = self._new_group(group_id, None)
        self.offsets.put_all(group_id, topic, zip(partitions, values, strict=True))  # type: ignore[arg-type]

    def _apply_offset(self, key: OffsetCommitKey, value: bytes | None) -> None:
        """The state change of one offset record (`value` encoded, None a tombstone),
        shared by live writes and replay."""
        if value is None:
            self.offsets.remove(key.group, key.topic, key.partition)
            return
        if key.group not in self.groups and key.group not in self.consumer.groups:
            # Offsets without membership: a "simple" group, Empty with no protocol type.
            self.groups[key.group] = self._new_group(key.group, None)
        self.offsets.put(key.group, key.topic, key.partition, value)

    def _apply_offsets(self, group_id: str, topic: str, values: list[tuple[int, bytes]]) -> None:
        """_apply_offset of each (partition, encoded value) of one group and topic, in order."""
        if group_id not in self.groups and group_id not in self.consumer.groups:
            self.groups[group_id] = self._new_group(group_id, None)
        self.offsets.put_all(group_id, topic, values)

    def _replay_group(self, key: GroupMetadataKey, value: bytes | None) -> None:
        if value is None:
            self._apply_group_tombstone(key.group)
            return
        self.groups[key.group] = ClassicGroup.from_metadata(
            key.group, decode_group_metadata_value(value), self.config.rebalance_history_size
        )

    def _apply_group_tombstone(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.transition_to(_D, group.current_state_timestamp or 0)

    def on_loaded(self, now: Now) -> Result:
        """After replaying the partition: start members' session timers and offset expiry."""
        out = Result()
        for group in list(self.groups.values()):
            for member in group.members.values():
                self._schedule_heartbeat(out, group, member, member.session_timeout_ms, now)
            if len(group.members) > self.config.max_group_size:
                # group.max.size was lowered while the group was away.
                self._prepare_rebalance(
                    out, group, RebalanceCause.MEMBER_LEFT, "group above max size", now
                )
        self.consumer.on_loaded(out, now)
        self._schedule_retention(out, now)
        return out

    def unload(self) -> Result:
        """This broker stops owning the partition: answer parked requests, drop everything."""
        out = Result()
        for group in self.groups.values():
            group.transition_to(_D, group.current_state_timestamp or 0)
            for member in group.members.values():
                if group.previous_state is _P:
                    resp = JoinGroupResponse(ErrorCode.NOT_COORDINATOR, member_id=member.member_id)
                    self._add(out, group.complete_join(member, resp))
                elif group.previous_state in (_C, _S):
                    sync = SyncGroupResponse(ErrorCode.NOT_COORDINATOR)
                    self._add(out, group.complete_sync(member, sync))
        for key in list(self._timers):
            self._cancel(out, key)
        self.groups.clear()
        out.replies += self.consumer.unload()
        self.offsets.clear()
        return out

    # ======================================================================
    # timers
    # ======================================================================

    def next_deadline(self) -> int | None:
        """The earliest timer's deadline, on the monotonic clock, as every deadline here."""
        first = self._first_timer()
        return None if first is None else first[0]

    def scheduled(self) -> dict[TimerKey, int]:
        return {key: t.deadline_ms for key, t in self._timers.items()}

    def postpone_timers(self, stalled_ms: int) -> Result:
        """The broker could not run for `stalled_ms` (paused, a long garbage collection, a
        stalled disk): no member could be heard meanwhile, so no deadline counts that
        time; a member that really died is expired at most one stall later."""
        out = Result()
        for key, timer in self._timers.items():
            timer.deadline_ms += stalled_ms
            out.timers.append(ScheduleTimer(key, timer.deadline_ms))
        self._rebuild_deadlines()
        return out

    def fire_timer(self, key: TimerKey, now: Now) -> Result:
        out = Result()
        timer = self._timers.get(key)
        if timer is None or timer.deadline_ms > now.monotonic_ms:
            return out  # cancelled or rescheduled since the broker armed it
        del self._timers[key]
        timer.callback(out, now)
        return out

    def poll(self, now: Now) -> Result:
        """Fire every due timer, earliest first (ties in scheduling order)."""
        out = Result()
        while (first := self._first_timer()) is not None and first[0] <= now.monotonic_ms:
            heapq.heappop(self._deadlines)
            out.extend(self.fire_timer(first[1], now))
        return out

    def _first_timer(self) -> tuple[int, TimerKey] | None:
        """The deadline and key of the timer due first, its heap entry first in the heap.

        Entries of timers cancelled or replaced since are dropped on the way; the entry
        of a timer moved later in place is put where it now belongs, ordered among equal
        deadlines by when the timer was last scheduled.
        """
        deadlines = self._deadlines
        while deadlines:
            deadline_ms, seq, key = deadlines[0]
            timer = self._timers.get(key)
            if timer is None or timer.heap_seq != seq:
                heapq.heappop(deadlines)
            elif timer.seq != seq:
                timer.heap_seq = timer.seq
                heapq.heapreplace(deadlines, (timer.deadline_ms, timer.seq, key))
            else:
                return deadline_ms, key
        return None

    def _rebuild_deadlines(self) -> None:
        """One heap entry per live timer, at its current deadline. In place: poll() may
        be walking this very list."""
        deadlines = self._deadlines
        deadlines[:] = [(t.deadline_ms, t.seq, k) for k, t in self._timers.items()]
        for timer in self._timers.values():
            timer.heap_seq = timer.seq
        heapq.heapify(deadlines)

    def _schedule(self, out: Result, key: TimerKey, deadline_ms: int, cb: TimerCallback) -> None:
        self._timer_seq += 1
        seq = self._timer_seq
        timer = self._timers.get(key)
        if timer is not None and deadline_ms >= timer.deadline_ms:
            # Later than before, as every heartbeat moves its member's session expiry:
            # changed in place, and its heap entry moved only when it comes first. A heap
            # entry per heartbeat was garbage for the collector and a push per request.
            timer.deadline_ms, timer.seq, timer.callback = deadline_ms, seq, cb
        else:
            self._timers[key] = _Timer(deadline_ms, seq, cb, heap_seq=seq)
            deadlines = self._deadlines
            heapq.heappush(deadlines, (deadline_ms, seq, key))
            if len(deadlines) > 2 * len(self._timers) + 64:
                # Timers cancelled or moved earlier left entries behind: drop them.
                self._rebuild_deadlines()
        out.timers.append(ScheduleTimer(key, deadline_ms))

    def _cancel(self, out: Result, key: TimerKey) -> None:
        if self._timers.pop(key, None) is not None:
            out.timers.append(CancelTimer(key))

    def _schedule_heartbeat(
        self, out: Result, group: ClassicGroup, member: Member, timeout_ms: int, now: Now
    ) -> None:
        group_id, member_id = group.group_id, member.member_id
        self._schedule(
            out,
            TimerKey(TimerKind.HEARTBEAT, group_id, member_id),
            now.monotonic_ms + timeout_ms,
            lambda o, now: self._expire_heartbeat(o, group_id, member_id, now),
        )

    def _cancel_heartbeat(self, out: Result, group: ClassicGroup, member_id: str) -> None:
        self._cancel(out, TimerKey(TimerKind.HEARTBEAT, group.group_id, member_id))

    def _schedule_retention(self, out: Result, now: Now) -> None:
        self._schedule(
            out,
            TimerKey(TimerKind.RETENTION),
            now.monotonic_ms + self.config.offsets_retention_check_interval_ms,
            self._expire_offsets_and_reschedule,
        )

    # ======================================================================
    # JoinGroup
    # ======================================================================

    def join_group(
        self,
        req: JoinGroupRequest,
        token: Hashable,
        now: Now,
        topics: TopicsImage | None = None,
    ) -> Result:
        """`topics`: the cluster's topics, for a member joining a consumer group (without
        them, the topics the group knows of)."""
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

        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None and consumer_group.state is not ConsumerGroupState.EMPTY:
            # The member speaks the classic protocol inside the consumer group.
            return self.classic_members.join(req, topics, token, now)
        is_unknown = req.member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(req.group_id)
        is_new_group = group is None
        if group is None:
            if not is_unknown:
                resp = JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id)
                out.replies.append(Reply(token, resp))
                return out
            if consumer_group is not None:
                # An empty consumer group gives way to a classic one, as in Kafka.
                self.consumer.delete(out, req.group_id)
            group = self._new_group(req.group_id, now.wall_ms)
            self.groups[req.group_id] = group
        written = len(out.records)

        waiter = JoinWaiter(token, req.api_version)
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            resp = JoinGroupResponse(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=UNKNOWN_MEMBER_ID)
            out.replies.append(Reply(token, resp))
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
            self._write(out, group_metadata_record(GroupMetadataKey(group.group_id), empty))
        return out

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.max_group_size
        if group.is_in(_E, _D):
            return True
        if group.is_in(_P):
            # Counting members awaiting join (not all members) lets the last
            # rejoiners be the ones refused when the limit was lowered.
            member = group.members.get(member_id)
            awaiting = member is not None and member.awaiting_join is not None
            return awaiting or group.num_awaiting_join < max_size
        return group.has_member(member_id) or len(group.members) < max_size

    def _join_new_member(
        self,
        out: Result,
        group: ClassicGroup,
        req: JoinGroupRequest,
        waiter: JoinWaiter,
        now: Now,
    ) -> None:
        dead = state_answer(Op.JOIN, group.state)
        if dead is not ErrorCode.NONE:
            self._reply_join(out, waiter, JoinGroupResponse(dead, member_id=UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            resp = JoinGroupResponse(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=UNKNOWN_MEMBER_ID
            )
            self._reply_join(out, waiter, resp)
            return
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
            group_id = group.group_id
            self._schedule(
                out,
                TimerKey(TimerKind.HEARTBEAT, group_id, new_member_id),
                now.monotonic_ms + req.session_timeout_ms,
                lambda o, now: self._expire_heartbeat(o, group_id, new_member_id, now),
            )
            resp = JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id)
            self._reply_join(out, waiter, resp)
        else:
            self._add_member_and_rebalance(out, group, req, new_member_id, waiter, now)

    def _join_existing_member(
        self,
        out: Result,
        group: ClassicGroup,
        req: JoinGroupRequest,
        waiter: JoinWaiter,
        now: Now,
    ) -> None:
        member_id = req.member_id
        dead = state_answer(Op.JOIN, group.state)
        if dead is not ErrorCode.NONE:
            self._reply_join(out, waiter, JoinGroupResponse(dead, member_id=member_id))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            resp = JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            self._reply_join(out, waiter, resp)
            return
        if group.is_pending(member_id) and req.group_instance_id is None:
            self._add_member_and_rebalance(out, group, req, member_id, waiter, now)
            return
        error = group.validate_member(member_id, req.group_instance_id)
        if error is not ErrorCode.NONE:
            self._reply_join(out, waiter, JoinGroupResponse(error, member_id=member_id))
            return

        member = group.members[member_id]
        if group.is_in(_P):
            self._update_member_and_rebalance(
                out, group, member, req, waiter, RebalanceCause.MEMBER_JOINED, now
            )
        elif group.is_in(_C):
            if member.matches(req.protocols):
                # A retry of a join whose response was lost: same generation, same answer.
                resp = group.join_response(member_id, as_leader=group.is_leader(member_id))
                self._reply_join(out, waiter, resp)
            else:
                self._update_member_and_rebalance(
                    out, group, member, req, waiter, RebalanceCause.MEMBER_METADATA_CHANGED, now
                )
        elif group.is_in(_S):
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
                self._reply_join(out, waiter, group.join_response(member_id, as_leader=False))
        else:
            self._reply_join(
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
        if group.is_in(_P) and group.previous_state is _E:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member, waiter)
        # A parked new member cannot heartbeat, and a client that gave up and
        # retried would leave a defunct member behind: its join times out instead.
        self._schedule_heartbeat(out, group, member, self.config.new_member_join_timeout_ms, now)
        self._maybe_prepare_rebalance_or_complete_join(
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
        self._maybe_prepare_rebalance_or_complete_join(
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
        self._cancel_heartbeat(out, group, old_member_id)
        self._schedule_heartbeat(out, group, member, member.session_timeout_ms, now)
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter
        )
        detail = f"instance {instance_id}: {old_member_id} -> {new_member_id}"
        if group.is_in(_S):
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
                self._write(out, self._group_record(group))
                is_leader = group.is_leader(new_member_id)
                if waiter.api_version >= _MIN_VERSION_SKIPPING_ASSIGNMENT:
                    resp = group.join_response(new_member_id, as_leader=is_leader)
                    resp = replace(resp, skip_assignment=is_leader)
                else:
                    # Older clients cannot skip the assignment, so Kafka names the
                    # previous leader id: the member acts as a follower and just syncs.
                    resp = group.join_response(new_member_id, as_leader=False)
                    resp = replace(resp, leader=current_leader or "")
                self._add(out, group.complete_join(member, resp))
            else:
                self._maybe_prepare_rebalance_or_complete_join(
                    out, group, RebalanceCause.STATIC_MEMBER_REPLACED, detail, now
                )
        elif group.is_in(_C):
            # The leader may already be assigning to the old id; start over.
            self._prepare_rebalance(out, group, RebalanceCause.STATIC_MEMBER_REPLACED, detail, now)
        else:
            self._maybe_complete_join_phase(out, group, now)

    # ======================================================================
    # rebalancing
    # ======================================================================

    def _maybe_prepare_rebalance_or_complete_join(
        self, out: Result, group: ClassicGroup, cause: RebalanceCause, detail: str, now: Now
    ) -> None:
        if can_rebalance(group.state):
            self._prepare_rebalance(out, group, cause, detail, now)
        else:
            self._maybe_complete_join_phase(out, group, now)

    def _prepare_rebalance(
        self, out: Result, group: ClassicGroup, cause: RebalanceCause, detail: str, now: Now
    ) -> None:
        if group.is_in(_C):
            # Followers parked in SyncGroup must rejoin: their generation is over.
            for member in group.members.values():
                member.assignment = b""
            self._propagate_assignment(out, group, ErrorCode.REBALANCE_IN_PROGRESS, now)
        group.pending_sync_members.clear()
        self._cancel(out, TimerKey(TimerKind.SYNC, group.group_id))

        is_initial = group.is_in(_E)
        if is_initial:
            # KIP-134: give a new group time to collect its members before the
            # first generation, extended while members keep arriving.
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(out, group.group_id, delay, remaining, now)

        group.history.started(
            cause, detail, group.generation, now.wall_ms, group.generation_members
        )
        group.transition_to(_P, now.wall_ms)
        if not is_initial:
            if group.has_all_members_joined():
                self._complete_join(out, group, now)
            else:
                self._schedule_join_completion(out, group, now)

    def _schedule_initial_join(
        self, out: Result, group_id: str, delay_ms: int, remaining_ms: int, now: Now
    ) -> None:
        self._schedule(
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
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self._schedule_initial_join(out, group_id, new_delay, new_remaining, now)
        else:
            self._complete_join(out, group, now)

    def _schedule_join_completion(self, out: Result, group: ClassicGroup, now: Now) -> None:
        group_id = group.group_id
        self._schedule(
            out,
            TimerKey(TimerKind.JOIN, group_id),
            now.monotonic_ms + group.rebalance_timeout_ms(),
            lambda o, now: self._complete_join_by_id(o, group_id, now),
        )

    def _complete_join_by_id(self, out: Result, group_id: str, now: Now) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(out, group, now)

    def _maybe_complete_join_phase(self, out: Result, group: ClassicGroup, now: Now) -> None:
        if not group.is_in(_P):
            return
        if group.previous_state is _E:
            return  # the initial rebalance ends on its own timer, never early
        if group.has_all_members_joined():
            self._complete_join(out, group, now)

    def _complete_join(self, out: Result, group: ClassicGroup, now: Now) -> None:
        self._cancel(out, TimerKey(TimerKind.JOIN, group.group_id))
        # Dynamic members that did not rejoin are gone; static ones keep their place.
        for member in group.not_yet_rejoined():
            if not member.is_static:
                group.remove(member.member_id)
                self._cancel_heartbeat(out, group, member.member_id)

        if group.is_in(_D):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for sessions to expire.
            self._schedule_join_completion(out, group, now)
            return

        group.init_next_generation(now.wall_ms)
        if group.is_in(_E):
            self._rebalance_ended(out, group, now, ())
            group.generation_members = ()
            self._write(out, self._group_record(group))
            return
        for member in group.members.values():
            resp = group.join_response(
                member.member_id, as_leader=group.is_leader(member.member_id)
            )
            self._add(out, group.complete_join(member, resp))
            self._schedule_heartbeat(out, group, member, member.session_timeout_ms, now)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group_id, generation = group.group_id, group.generation
        self._schedule(
            out,
            TimerKey(TimerKind.SYNC, group_id),
            now.monotonic_ms + group.rebalance_timeout_ms(),
            lambda o, now: self._expire_pending_sync(o, group_id, generation, now),
        )

    def _expire_pending_sync(self, out: Result, group_id: str, generation: int, now: Now) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation != generation or not group.is_in(_C, _S):
            return
        if group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                group.remove(member_id)
                self._cancel_heartbeat(out, group, member_id)
            self._prepare_rebalance(
                out, group, RebalanceCause.SYNC_EXPIRED, ", ".join(missing), now
            )

    def _expire_heartbeat(self, out: Result, group_id: str, member_id: str, now: Now) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(_D):
            return
        if group.is_pending(member_id):
            group.remove(member_id)
            if group.is_in(_P) and group.has_all_members_joined():
                self._complete_join(out, group, now)
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
        self._add(out, group.complete_join(member, resp))
        group.remove(member.member_id)
        if group.is_in(_S, _C):
            self._maybe_prepare_rebalance_or_complete_join(out, group, cause, member.member_id, now)
        elif group.is_in(_P) and group.has_all_members_joined():
            self._complete_join(out, group, now)

    def _propagate_assignment(
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
                self._schedule_heartbeat(out, group, member, member.session_timeout_ms, now)

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
        if self.classic_members.owns(req.group_id):
            return self.classic_members.sync(req, token, now)
        group = self.groups.get(req.group_id)
        if group is None:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        error = self._validate_generation_member(
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
        if group.is_in(_C):
            member.awaiting_sync = token
            self._remove_pending_sync_member(out, group, req.member_id)
            if group.is_leader(req.member_id):
                assignment = dict(req.assignments)
                for m in group.members.values():
                    m.assignment = assignment.get(m.member_id, b"")
                # Kafka moves to Stable when the record is durable; we move now and
                # the replies wait for durability (result.py), which is equivalent.
                self._propagate_assignment(out, group, ErrorCode.NONE, now)
                group.transition_to(_S, now.wall_ms)
                group.generation_members = group.member_ids()
                self._rebalance_ended(out, group, now, group.member_ids())
                self._write(out, self._group_record(group))
        else:  # Stable: the assignment is known, hand it out
            self._remove_pending_sync_member(out, group, req.member_id)
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

    def _remove_pending_sync_member(self, out: Result, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._cancel(out, TimerKey(TimerKind.SYNC, group.group_id))

    def heartbeat(self, req: HeartbeatRequest, token: Hashable, now: Now) -> Result:
        if req.group_id and self.classic_members.owns(req.group_id):
            return self.classic_members.heartbeat(req, token, now)
        out = Result()
        group = self.groups.get(req.group_id)
        if not req.group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        else:
            error = self._validate_generation_member(
                Op.HEARTBEAT, group, req.member_id, req.group_instance_id, req.generation_id
            )
            if error is ErrorCode.NONE:
                error = state_answer(Op.HEARTBEAT, group.state)
                if group.is_in(_P, _C, _S):
                    member = group.members[req.member_id]
                    self._schedule_heartbeat(out, group, member, member.session_timeout_ms, now)
        out.replies.append(Reply(token, HeartbeatResponse(error)))
        return out

    def leave_group(self, req: LeaveGroupRequest, token: Hashable, now: Now) -> Result:
        if self.classic_members.owns(req.group_id):
            return self.classic_members.leave(req, token, now)
        out = Result()
        group = self.groups.get(req.group_id)
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
                self._cancel_heartbeat(out, group, m.member_id)
            else:
                error = group.validate_member(m.member_id, m.group_instance_id)
                if error is ErrorCode.NONE:
                    self._remove_leaving_member(out, group, m.member_id, now)
            results.append(LeftMember(m.member_id, m.group_instance_id, error))
            if error is ErrorCode.NONE:
                left.append(m.member_id or (m.group_instance_id or ""))

        if left:
            if group.is_in(_S, _C):
                self._maybe_prepare_rebalance_or_complete_join(
                    out, group, RebalanceCause.MEMBER_LEFT, ", ".join(left), now
                )
            elif group.is_in(_P):
                self._maybe_complete_join_phase(out, group, now)
        out.replies.append(Reply(token, LeaveGroupResponse(ErrorCode.NONE, tuple(results))))
        return out

    def _remove_leaving_member(
        self, out: Result, group: ClassicGroup, member_id: str, now: Now
    ) -> None:
        member = group.members[member_id]
        self._cancel_heartbeat(out, group, member_id)
        resp = JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, member_id=UNKNOWN_MEMBER_ID)
        self._add(out, group.complete_join(member, resp))
        # Kafka leaves a parked SyncGroup of a leaving member unanswered until the
        # client times out; we answer it, since every request needs a response.
        self._add(out, group.complete_sync(member, SyncGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID)))
        group.remove(member_id)

    def _validate_generation_member(
        self,
        op: Op,
        group: ClassicGroup,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
    ) -> ErrorCode:
        if group.is_in(_D):
            return state_answer(op, _D)
        error = group.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    # ======================================================================
    # consumer groups (KIP-848): consumer_groups.py
    # ======================================================================

    def consumer_group_heartbeat(
        self,
        req: ConsumerGroupHeartbeatRequest,
        topics: TopicsImage,
        token: Hashable,
        now: Now,
    ) -> Result:
        return self.consumer.heartbeat(req, topics, token, now)

    def _retire_classic_group(self, out: Result, group_id: str) -> None:
        """A consumer group takes `group_id` over: the classic group's tombstone, and its
        parked requests answered REBALANCE_IN_PROGRESS, so that its members join the
        consumer group (Kafka's convertToConsumerGroup)."""
        group = self.groups.get(group_id)
        if group is not None:
            for member in group.members.values():
                rejoin = JoinGroupResponse(
                    ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id
                )
                self._add(out, group.complete_join(member, rejoin))
                sync = SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS)
                self._add(out, group.complete_sync(member, sync))
            for member_id in (*group.members, *group.pending_join_members):
                self._cancel_heartbeat(out, group, member_id)
            self._cancel(out, TimerKey(TimerKind.JOIN, group_id))
            self._cancel(out, TimerKey(TimerKind.SYNC, group_id))
        self._write_group_tombstone(out, group_id)

    def _downgrade(
        self, out: Result, consumer_group: ConsumerGroup, leaving_member_id: str, now: Now
    ) -> bool:
        """The member speaking the new protocol leaves, or is fenced: if classic members
        alone remain and the policy allows, the consumer group becomes a classic group and
        a rebalance starts (Kafka's convertToClassicGroup). False if it does not."""
        if not downgrades_on_leaving(consumer_group, leaving_member_id, self.config):
            return False
        group = self._to_classic(out, consumer_group, leaving_member_id, now)
        if group is None:
            return False
        detail = f"{leaving_member_id} left; back to the classic protocol"
        self._prepare_rebalance(out, group, RebalanceCause.MEMBER_LEFT, detail, now)
        return True

    def _to_classic(
        self,
        out: Result,
        consumer_group: ConsumerGroup,
        leaving_member_id: str | None,
        now: Now,
    ) -> ClassicGroup | None:
        """Replace the consumer group with the classic group of its classic members (but
        `leaving_member_id`), Stable: its tombstones, then the classic group's metadata.
        None, and nothing done, if a member's embedded protocol does not parse."""
        history_size = self.config.rebalance_history_size
        try:
            group = classic_group_from_consumer(
                consumer_group, leaving_member_id, now.wall_ms, history_size
            )
        except MalformedConsumerProtocol:
            return None
        self.consumer.delete(out, group.group_id)
        self.groups[group.group_id] = group
        self._write(out, self._group_record(group))
        for member in group.members.values():
            self._schedule_heartbeat(out, group, member, member.session_timeout_ms, now)
        return group

    def consumer_group_describe(
        self, group_ids: Iterable[str], topics: TopicsImage, token: Hashable
    ) -> Result:
        return Result(replies=[Reply(token, tuple(self.consumer.describe(group_ids, topics)))])

    # ======================================================================
    # offsets
    # ======================================================================

    def offset_commit(self, req: OffsetCommitRequest, token: Hashable, now: Now) -> Result:
        out = Result()
        error = self._validate_offset_commit(req)
        if error is not ErrorCode.NONE:
            topics = tuple(
                TopicErrors(t.name, tuple(PartitionError(p.partition, error) for p in t.partitions))
                for t in req.topics
            )
            out.replies.append(Reply(token, OffsetCommitResponse(topics)))
            return out

        group = self.groups.get(req.group_id)
        if group is None:
            if req.group_id not in self.consumer.groups:
                # A commit with no membership (generation -1) creates a simple group.
                self.groups[req.group_id] = self._new_group(req.group_id, None)
        elif group.is_in(_S, _P) and req.member_id in group.members:
            # In the classic protocol a commit also proves the member is alive.
            member = group.members[req.member_id]
            self._schedule_heartbeat(out, group, member, member.session_timeout_ms, now)

        # Each partition's record is encoded straight from the request, and a topic's
        # offsets go into the table together: what _write_offset does for one, without
        # an object per partition on the way (this runs for every partition committed).
        expire = (
            NO_TIMESTAMP if req.retention_time_ms == -1 else now.wall_ms + req.retention_time_ms
        )
        max_metadata = self.config.offset_metadata_max_bytes
        records = out.records
        topics = []
        for topic in req.topics:
            head = offset_key_head(req.group_id, topic.name)
            results = []
            written = []
            # Unpacked in the loop: six attribute lookups a partition cost more.
            for partition, offset, metadata, leader_epoch, commit_ts in topic.partitions:
                if metadata is None:
                    metadata = ""
                elif metadata and _java_length(metadata) > max_metadata:
                    results.append(PartitionError(partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                    continue
                if commit_ts == -1:
                    commit_ts = now.wall_ms
                value = encode_offset(offset, leader_epoch, metadata, commit_ts, expire)
                records.append(Record(head + _PARTITION.pack(partition), value))
                written.append((partition, value))
                results.append(_committed(partition))
            if written:
                self._apply_offsets(req.group_id, topic.name, written)
            topics.append(TopicErrors(topic.name, tuple(results)))
        out.replies.append(Reply(token, OffsetCommitResponse(tuple(topics))))
        return out

    def _validate_offset_commit(self, req: OffsetCommitRequest) -> ErrorCode:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            return consumer_group.validate_offset_commit(
                req.member_id, req.generation_id, req.api_version
            )
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id < 0:
                return ErrorCode.NONE
            if req.api_version >= _MIN_COMMIT_VERSION_GROUP_ID_NOT_FOUND:
                return ErrorCode.GROUP_ID_NOT_FOUND
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_in(_D):
            return state_answer(Op.OFFSET_COMMIT, _D)
        if req.generation_id < 0 and group.is_in(_E):
            return ErrorCode.NONE  # admin tools and manual assignment commit to empty groups
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            error = group.validate_member(req.member_id, req.group_instance_id)
            if error is not ErrorCode.NONE:
                return error
            if req.generation_id != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_in(_E):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return state_answer(Op.OFFSET_COMMIT, group.state)

    def offset_fetch(self, req: OffsetFetchRequest, token: Hashable, now: Now) -> Result:
        # Without transactions nothing is ever pending, so require_stable needs no wait.
        out = Result()
        group = self.groups.get(req.group_id)
        known = group is not None and state_answer(Op.OFFSET_FETCH, group.state) is ErrorCode.NONE
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            error = consumer_group.validate_offset_fetch(req.member_id, req.member_epoch)
            if error is not ErrorCode.NONE:
                out.replies.append(Reply(token, OffsetFetchResponse(req.group_id, (), error)))
                return out
            known = True
        topics: list[FetchedTopic] = []
        if req.topics is None:
            if known:
                for name, partitions in self.offsets.topics(req.group_id).items():
                    topics.append(
                        FetchedTopic(name, tuple(_fetched(p, o) for p, o in partitions.items()))
                    )
        else:
            for t in req.topics:
                parts = []
                for p in t.partitions:
                    o = self.offsets.get(req.group_id, t.name, p) if known else None
                    parts.append(
                        _fetched(p, o)
                        if o is not None
                        else FetchedPartition(p, NO_OFFSET, NO_LEADER_EPOCH, "")
                    )
                topics.append(FetchedTopic(t.name, tuple(parts)))
        out.replies.append(Reply(token, OffsetFetchResponse(req.group_id, tuple(topics))))
        return out

    def offset_delete(self, req: OffsetDeleteRequest, token: Hashable, now: Now) -> Result:
        out = Result()
        group: ClassicGroup | ConsumerGroup | None = self.groups.get(req.group_id)
        if not req.group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif req.group_id in self.consumer.groups:
            # In any state: the per-partition check below keeps what it reads (KIP-496).
            group = self.consumer.groups[req.group_id]
            error = ErrorCode.NONE
        elif group is None:
            error = ErrorCode.GROUP_ID_NOT_FOUND
        else:
            error = state_answer(Op.OFFSET_DELETE, group.state)
            if error is ErrorCode.NON_EMPTY_GROUP and group.uses_consumer_protocol:
                # KIP-496: a live consumer group may drop offsets of topics it no
                # longer reads; the per-partition check below guards the rest.
                error = ErrorCode.NONE
        if error is not ErrorCode.NONE or group is None:
            out.replies.append(Reply(token, OffsetDeleteResponse(error)))
            return out
        topics = []
        for t in req.topics:
            results = []
            for p in t.partitions:
                if group.is_subscribed_to_topic(t.name):
                    results.append(PartitionError(p, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                if self.offsets.get(req.group_id, t.name, p) is not None:
                    self._write_offset(out, OffsetCommitKey(req.group_id, t.name, p), None)
                results.append(PartitionError(p, ErrorCode.NONE))
            topics.append(TopicErrors(t.name, tuple(results)))
        out.replies.append(Reply(token, OffsetDeleteResponse(ErrorCode.NONE, tuple(topics))))
        return out

    def _expire_offsets_and_reschedule(self, out: Result, now: Now) -> None:
        self._expire_offsets(out, now)
        self._schedule_retention(out, now)

    def expire_offsets(self, now: Now) -> Result:
        """Run the retention check now (the RETENTION timer runs it periodically)."""
        out = Result()
        self._expire_offsets(out, now)
        return out

    def _expire_offsets(self, out: Result, now: Now) -> None:
        """Tombstone expired offsets; delete Empty groups left with none (KIP-211)."""
        for group_id in list(self.groups):
            group = self.groups[group_id]
            if self._expire_group_offsets(out, group, self._expiry_base(group), now) and (
                group.is_in(_E)
            ):
                self._write_group_tombstone(out, group_id)
        for group_id in list(self.consumer.groups):
            consumer_group = self.consumer.groups[group_id]
            # Offsets of topics the group does not read expire retention after their commit.
            if self._expire_group_offsets(out, consumer_group, _since_commit, now) and (
                consumer_group.state is ConsumerGroupState.EMPTY
            ):
                self.consumer.delete(out, group_id)

    def _expire_group_offsets(
        self,
        out: Result,
        group: ClassicGroup | ConsumerGroup,
        base: BaseTimestamp | None,
        now: Now,
    ) -> bool:
        """True when the group has no offsets left."""
        if base is None:
            return not self.offsets.has_group(group.group_id)
        retention = self.config.offsets_retention_ms
        for topic, partition, offset in self.offsets.entries(group.group_id):
            if group.is_subscribed_to_topic(topic):
                continue
            if is_expired(offset, now.wall_ms, retention, base):
                self._write_offset(out, OffsetCommitKey(group.group_id, topic, partition), None)
        return not self.offsets.has_group(group.group_id)

    @staticmethod
    def _expiry_base(group: ClassicGroup) -> BaseTimestamp | None:
        """From when an offset's retention runs, or None if the group's offsets never expire now."""
        if group.protocol_type is None:
            # Manual assignment: each offset lives retention past its last commit.
            return lambda o: o.commit_timestamp_ms
        if group.is_in(_E):
            # An empty group keeps its offsets retention past the moment it emptied.
            since = group.current_state_timestamp
            return lambda o: o.commit_timestamp_ms if since is None else since
        if group.uses_consumer_protocol and group.subscribed_topics is not None and group.is_in(_S):
            # Offsets of topics the live group no longer reads expire after their commit.
            return lambda o: o.commit_timestamp_ms
        return None

    # ======================================================================
    # group administration
    # ======================================================================

    def delete_groups(self, group_ids: Iterable[str], token: Hashable, now: Now) -> Result:
        out = Result()
        results = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            consumer_group = self.consumer.groups.get(group_id)
            if not group_id:
                error = ErrorCode.INVALID_GROUP_ID
            elif consumer_group is not None:
                empty = consumer_group.state is ConsumerGroupState.EMPTY
                error = ErrorCode.NONE if empty else ErrorCode.NON_EMPTY_GROUP
            elif group is None:
                error = ErrorCode.GROUP_ID_NOT_FOUND
            else:
                error = state_answer(Op.DELETE_GROUP, group.state)
            if error is ErrorCode.NONE:
                for topic, partition, _ in self.offsets.entries(group_id):
                    self._write_offset(out, OffsetCommitKey(group_id, topic, partition), None)
                if consumer_group is not None:
                    self.consumer.delete(out, group_id)
                else:
                    self._cancel(out, TimerKey(TimerKind.JOIN, group_id))
                    self._cancel(out, TimerKey(TimerKind.SYNC, group_id))
                    self._write_group_tombstone(out, group_id)
            results.append((group_id, error))
        out.replies.append(Reply(token, DeleteGroupsResponse(tuple(results))))
        return out

    def list_groups(
        self,
        token: Hashable,
        states_filter: Iterable[str] = (),
        types_filter: Iterable[str] = (),
    ) -> Result:
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        listed = []
        if not types or "classic" in types:
            for group in self.groups.values():
                if states and str(group.state).lower() not in states:
                    continue
                listed.append(
                    ListedGroup(group.group_id, group.protocol_type or "", str(group.state))
                )
        if not types or CONSUMER_GROUP_TYPE in types:
            listed += self.consumer.list_groups(states)
        return Result(replies=[Reply(token, tuple(listed))])

    def describe_groups(
        self, group_ids: Iterable[str], token: Hashable, api_version: int = 5
    ) -> Result:
        described = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                error = (
                    ErrorCode.GROUP_ID_NOT_FOUND
                    if api_version >= _MIN_DESCRIBE_VERSION_GROUP_ID_NOT_FOUND
                    else ErrorCode.NONE
                )
                described.append(DescribedGroup(group_id, error, str(_D)))
                continue
            stable = group.is_in(_S)
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

    # ======================================================================
    # helpers
    # ======================================================================

    @staticmethod
    def _rebalance_ended(
        out: Result, group: ClassicGroup, now: Now, members: tuple[str, ...]
    ) -> None:
        entry = group.history.ended(group.generation, now.wall_ms, members)
        if entry is not None:
            out.rebalances.append((group.group_id, entry))

    def _new_group(self, group_id: str, wall_ms: int | None) -> ClassicGroup:
        return ClassicGroup(group_id, wall_ms, self.config.rebalance_history_size)

    def _group_record(self, group: ClassicGroup) -> Record:
        return group_metadata_record(GroupMetadataKey(group.group_id), group.metadata_value())

    def _write(self, out: Result, record: Record) -> None:
        out.records.append(record)

    def _write_offset(
        self, out: Result, key: OffsetCommitKey, offset: OffsetAndMetadata | None
    ) -> None:
        """Append an offset record (None: a tombstone) and apply it as replay would."""
        record = offset_commit_record(key, None if offset is None else offset.to_record())
        out.records.append(record)
        self._apply_offset(key, record.value)

    def _write_group_tombstone(self, out: Result, group_id: str) -> None:
        out.records.append(group_metadata_record(GroupMetadataKey(group_id), None))
        self._apply_group_tombstone(group_id)

    @staticmethod
    def _add(out: Result, reply: Reply | None) -> None:
        if reply is not None:
            out.replies.append(reply)

    @staticmethod
    def _reply_join(out: Result, waiter: JoinWaiter, response: JoinGroupResponse) -> None:
        out.replies.append(Reply(waiter.token, response))


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


@lru_cache(maxsize=1024)
def _offset_keys_split(size: int, n: int) -> Callable[[bytes], tuple[Any, ...]]:
    """Unpacks n keys of `size` bytes, joined, into head, partition, head, partition..."""
    return struct.Struct(">" + f"{size - 4}si" * n).unpack


def _offset_run(keys: Sequence[bytes]) -> tuple[str, str, tuple[int, ...]] | None:
    """(group, topic, partitions) when `keys` are two or more offset commit keys of one
    group and topic that decode_key would read as exactly that; else None."""
    size = len(keys[0]) if keys else 0
    if len(keys) < 2 or size <= 4 or len(set(map(len, keys))) != 1:
        return None
    fields = _offset_keys_split(size, len(keys))(b"".join(keys))
    heads, partitions = fields[0::2], fields[1::2]
    if heads.count(heads[0]) != len(heads):
        return None
    group_and_topic = decode_offset_key_prefix(heads[0])
    return None if group_and_topic is None else (*group_and_topic, partitions)


_PARTITION = struct.Struct(">i")


@lru_cache(maxsize=4096)
def _committed(partition: int) -> PartitionError:
    """A partition's answer to a commit that stored it: immutable, so shared."""
    return PartitionError(partition, ErrorCode.NONE)


def _since_commit(offset: OffsetAndMetadata) -> int:
    return offset.commit_timestamp_ms


def _fetched(partition: int, o: OffsetAndMetadata) -> FetchedPartition:
    return FetchedPartition(partition, o.offset, o.leader_epoch, o.metadata)

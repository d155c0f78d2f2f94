"""One coordinator shard: the groups and offsets of one `__consumer_offsets` partition.

Kafka's GroupCoordinatorShard: thin. Each request goes to the manager that owns its
state, and each record replayed goes by its key's type:

- classic_group_manager.py: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups
  (the rebalance they start: classic_rebalance.py; GroupMetadata records: classic_log.py);
- consumer_group_manager.py: ConsumerGroupHeartbeat and describe (KIP-848), and their records;
- share_group_manager.py: ShareGroupHeartbeat and describe (KIP-932), and their records;
- offset_manager.py: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete, and offset
  records, those of transactions pending until the marker that ends each one.

They share one table of groups (group_store.py) and one table of timers (timers.py).
What involves groups and offsets both, deleting a group and expiring offsets, is put
together here, as Kafka's shard does (deleteGroups, cleanupGroupMetadata).

Each operation takes a request, an opaque token naming it, and `now` (every deadline on
its monotonic reading, every written timestamp on its wall reading: now.py), and returns
a Result (records, replies, timer changes; see result.py for when the replies may go out).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Iterable, Sequence

from herdless.coordinator.classic_group_manager import ClassicGroupManager
from herdless.coordinator.classic_join import ClassicJoin
from herdless.coordinator.classic_log import ClassicGroupLog
from herdless.coordinator.classic_members import ClassicMembers
from herdless.coordinator.classic_rebalance import ClassicRebalance
from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.consumer_group import ConsumerGroupState
from herdless.coordinator.consumer_group_manager import CONSUMER_GROUP_TYPE, ConsumerGroupManager
from herdless.coordinator.consumer_messages import ConsumerGroupHeartbeatRequest
from herdless.coordinator.group_store import GroupStore
from herdless.coordinator.messages import (
    DeleteGroupsResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from herdless.coordinator.now import Now
from herdless.coordinator.offset_manager import (
    OffsetManager,
    classic_expiry_base,
    offset_run,
    since_commit,
)
from herdless.coordinator.records import OffsetCommitKey, decode_key
from herdless.coordinator.result import Reply, Result, TimerKey, TimerKind
from herdless.coordinator.share_group import SHARE_GROUP_TYPE
from herdless.coordinator.share_group_manager import ShareGroupManager
from herdless.coordinator.share_messages import ShareGroupHeartbeatRequest
from herdless.coordinator.state import GroupState
from herdless.coordinator.timers import CoordinatorTimer
from herdless.coordinator.topic_metadata import TopicsImage
from herdless.protocol.errors import ErrorCode


class CoordinatorShard:
    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.config = config or CoordinatorConfig()
        self.timer: CoordinatorTimer[TimerKey] = CoordinatorTimer()
        self.store = GroupStore()
        # The classic groups by id, and (consumer.groups) the consumer groups: to read.
        self.groups = self.store.classic
        classic_log = ClassicGroupLog(self.store, self.config.rebalance_history_size)
        rebalance = ClassicRebalance(self.config, self.store, self.timer, classic_log)
        self.consumer = ConsumerGroupManager(
            self.config, self.timer, self.store, new_uuid, rebalance
        )
        self.share = ShareGroupManager(self.config, self.timer, self.store)
        self.classic_members = ClassicMembers(self.consumer)
        self.classic = ClassicGroupManager(
            self.config, self.store, classic_log, rebalance, self.classic_members
        )
        self.classic_join = ClassicJoin(
            self.config,
            self.store,
            classic_log,
            rebalance,
            self.consumer,
            self.classic_members,
            new_uuid,
        )
        self.offset_manager = OffsetManager(self.config, self.classic)
        # The committed offsets, to read.
        self.offsets = self.offset_manager.table

    # ======================================================================
    # loading
    # ======================================================================

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one `__consumer_offsets` record in log order: loading and live writes alike."""
        decoded = decode_key(key)
        if decoded is None:
            # Consumer or share groups' records; those of group types we do not run
            # (streams groups) are skipped, so a log written by Kafka still loads.
            if not self.consumer.log.replay(key, value):
                self.share.log.replay(key, value)
            return
        if isinstance(decoded, OffsetCommitKey):
            self.offset_manager.replay(decoded, value)
        else:
            self.classic.replay(decoded, value)

    def replay_records(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        """replay() of each (key, value) in order.

        Loading hands over a batch's records a run at a time (see
        protocol/record_columns.py), and a run of one OffsetCommit's records (one
        group and topic, every value a commit, or every one a tombstone) is applied
        at once, to the same state: each partition ends with its last value, and
        the group exists afterwards if it did before or any value was a commit.
        """
        run = offset_run(keys)
        tombstones = -1 if run is None else values.count(None)
        if run is None or 0 < tombstones < len(values):
            for key, value in zip(keys, values, strict=True):
                self.replay(key, value)
            return
        group_id, topic, partitions = run
        self.offset_manager.replay_run(group_id, topic, partitions, values)

    def replay_transactional(
        self, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        """Apply one record of a transactional batch in log order (only TxnOffsetCommit
        writes them): an offset waits for the transaction's marker."""
        decoded = decode_key(key)
        if isinstance(decoded, OffsetCommitKey):
            self.offset_manager.replay_transactional(producer_id, decoded, value)
        else:
            self.replay(key, value)

    def replay_end_transaction(
        self, producer_id: int, producer_epoch: int, committed: bool
    ) -> None:
        """A transaction's marker, in log order: loading and WriteTxnMarkers alike."""
        self.offset_manager.replay_end_transaction(producer_id, committed)

    def on_loaded(self, now: Now) -> Result:
        """After replaying the partition: start members' session timers and offset expiry."""
        out = Result()
        self.classic.on_loaded(out, now)
        self.consumer.on_loaded(out, now)
        self.share.on_loaded(out, now)
        self._schedule_retention(out, now)
        return out

    def unload(self) -> Result:
        """This broker stops owning the partition: answer parked requests, drop everything."""
        out = Result()
        self.classic.unload(out)
        self.timer.cancel_all(out)
        out.replies += self.consumer.unload()
        self.share.unload()
        self.offset_manager.clear()
        return out

    # ======================================================================
    # timers
    # ======================================================================

    def next_deadline(self) -> int | None:
        """The earliest timer's deadline, on the monotonic clock, as every deadline here."""
        return self.timer.next_deadline()

    def scheduled(self) -> dict[TimerKey, int]:
        return self.timer.scheduled()

    def postpone_timers(self, stalled_ms: int) -> Result:
        """The broker could not run for `stalled_ms` (paused, a long garbage collection, a
        stalled disk): no member could be heard meanwhile, so no deadline counts that
        time; a member that really died is expired at most one stall later."""
        return self.timer.postpone(stalled_ms)

    def fire_timer(self, key: TimerKey, now: Now) -> Result:
        return self.timer.fire(key, now)

    def poll(self, now: Now) -> Result:
        """Fire every due timer, earliest first (ties in scheduling order)."""
        return self.timer.poll(now)

    def _schedule_retention(self, out: Result, now: Now) -> None:
        self.timer.schedule(
            out,
            TimerKey(TimerKind.RETENTION),
            now.monotonic_ms + self.config.offsets_retention_check_interval_ms,
            self._expire_offsets_and_reschedule,
        )

    # ======================================================================
    # the classic protocol: classic_join.py, classic_group_manager.py
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
        return self.classic_join.join(req, token, now, topics)

    def sync_group(self, req: SyncGroupRequest, token: Hashable, now: Now) -> Result:
        return self.classic.sync_group(req, token, now)

    def heartbeat(self, req: HeartbeatRequest, token: Hashable, now: Now) -> Result:
        return self.classic.heartbeat(req, token, now)

    def leave_group(self, req: LeaveGroupRequest, token: Hashable, now: Now) -> Result:
        return self.classic.leave_group(req, token, now)

    def describe_groups(
        self, group_ids: Iterable[str], token: Hashable, api_version: int = 5
    ) -> Result:
        return self.classic.describe_groups(group_ids, token, api_version)

    # ======================================================================
    # consumer groups (KIP-848): consumer_group_manager.py
    # ======================================================================

    def consumer_group_heartbeat(
        self,
        req: ConsumerGroupHeartbeatRequest,
        topics: TopicsImage,
        token: Hashable,
        now: Now,
    ) -> Result:
        return self.consumer.heartbeat(req, topics, token, now)

    def consumer_group_describe(
        self, group_ids: Iterable[str], topics: TopicsImage, token: Hashable
    ) -> Result:
        return Result(replies=[Reply(token, tuple(self.consumer.describe(group_ids, topics)))])

    # ======================================================================
    # share groups (KIP-932): share_group_manager.py
    # ======================================================================

    def share_group_heartbeat(
        self,
        req: ShareGroupHeartbeatRequest,
        topics: TopicsImage,
        token: Hashable,
        now: Now,
    ) -> Result:
        return self.share.heartbeat(req, topics, token, now)

    def share_group_describe(
        self, group_ids: Iterable[str], topics: TopicsImage, token: Hashable
    ) -> Result:
        return Result(replies=[Reply(token, tuple(self.share.describe(group_ids, topics)))])

    # ======================================================================
    # offsets: offset_manager.py
    # ======================================================================

    def offset_commit(self, req: OffsetCommitRequest, token: Hashable, now: Now) -> Result:
        return self.offset_manager.offset_commit(req, token, now)

    def txn_offset_commit(self, req: TxnOffsetCommitRequest, token: Hashable, now: Now) -> Result:
        return self.offset_manager.txn_offset_commit(req, token, now)

    def offset_fetch(self, req: OffsetFetchRequest, token: Hashable, now: Now) -> Result:
        return self.offset_manager.offset_fetch(req, token, now)

    def offset_delete(self, req: OffsetDeleteRequest, token: Hashable, now: Now) -> Result:
        return self.offset_manager.offset_delete(req, token, now)

    def expire_offsets(self, now: Now) -> Result:
        """Run the retention check now (the RETENTION timer runs it periodically)."""
        out = Result()
        self._expire_offsets(out, now)
        return out

    def _expire_offsets_and_reschedule(self, out: Result, now: Now) -> None:
        self._expire_offsets(out, now)
        self._schedule_retention(out, now)

    def _expire_offsets(self, out: Result, now: Now) -> None:
        """Tombstone expired offsets; delete Empty groups left with none (KIP-211)."""
        offsets = self.offset_manager
        for group_id in list(self.store.classic):
            group = self.store.classic[group_id]
            if offsets.expire(out, group, classic_expiry_base(group), now) and (
                group.is_in(GroupState.EMPTY)
            ):
                self.classic.remove_expired(out, group_id)
        for group_id in list(self.store.consumer):
            consumer_group = self.store.consumer[group_id]
            if offsets.expire(out, consumer_group, since_commit, now) and (
                consumer_group.state is ConsumerGroupState.EMPTY
            ):
                self.consumer.delete(out, group_id)

    # ======================================================================
    # groups of any type
    # ======================================================================

    def delete_groups(self, group_ids: Iterable[str], token: Hashable, now: Now) -> Result:
        """Each group that may be deleted goes with its offsets: their tombstones first."""
        out = Result()
        results = []
        for group_id in group_ids:
            if group_id in self.store.share:
                # A share group has no offsets here: its state is the share coordinator's.
                error = self.share.validate_delete(group_id)
                if error is ErrorCode.NONE:
                    self.share.delete(out, group_id)
                results.append((group_id, error))
                continue
            error = self.classic.validate_delete_group(group_id)
            if error is ErrorCode.NONE:
                self.offset_manager.delete_all(out, group_id)
                if group_id in self.store.consumer:
                    self.consumer.delete(out, group_id)
                else:
                    self.classic.delete(out, group_id)
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
            listed += self.classic.list_groups(states)
        if not types or CONSUMER_GROUP_TYPE in types:
            listed += self.consumer.list_groups(states)
        if not types or SHARE_GROUP_TYPE in types:
            listed += self.share.list_groups(states)
        return Result(replies=[Reply(token, tuple(listed))])

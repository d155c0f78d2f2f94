"""The coordinator runtime: runs the sans-IO shards with real time, a real log and real sockets.

One shard per `__consumer_offsets` partition. For each operation the runtime
calls the shard with `now`, appends the records it returns to the shard's
partition, and releases the replies once those records, and every record an
earlier operation of the same shard wrote, are durable. Timers are armed on the
event loop at the shard's next deadline.

A shard is built by replaying its partition before it serves anyone; until
then its groups get COORDINATOR_LOAD_IN_PROGRESS and clients retry.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import json
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import asdict
from typing import Any

from herdless.broker import clock
from herdless.broker.replicas import ACKS_ALL, PartitionError, ReplicaManager
from herdless.broker.replication import Role
from herdless.broker.stalls import StallDetector
from herdless.broker.topic_admin import NewTopic, TopicAdmin, TopicAdminError
from herdless.coordinator import (
    CoordinatorConfig,
    CoordinatorShard,
    Now,
    OffloadedWork,
    Reply,
    Result,
    ScheduleTimer,
    TimerChange,
    partition_for,
)
from herdless.coordinator.messages import RebalanceRecord
from herdless.protocol.errors import ErrorCode
from herdless.protocol.record_columns import iter_key_value_runs
from herdless.protocol.records import build_batch, iter_batches, iter_records, parse_header
from herdless.storage import LogManager, PartitionLog, StorageError

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# Completed rebalances, one JSON record each keyed by group id, for `herdless groups
# history` and for anyone who wants to alert on them; any Kafka client can read it.
REBALANCES_TOPIC = "__rebalance_history"
REBALANCES_TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "retention.ms": str(7 * 24 * 3600 * 1000),
    "retention.bytes": str(64 * 1024 * 1024),
    "segment.bytes": str(16 * 1024 * 1024),
}
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, REBALANCES_TOPIC})
# How much of the partition one replay step reads before yielding to the loop: small
# enough that groups on loaded partitions keep being served while others load
# (with 4 MiB, a benchmark saw 1.5 s stalls of OffsetFetch during a 1M-record load).
LOAD_READ_BYTES = 256 * 1024

# How long a write may wait to be committed (Kafka's offsets.commit.timeout.ms).
COMMIT_TIMEOUT_MS = 5_000
# How often a standby that is not yet in the ISR looks whether it joined.
READY_RECHECK_S = 1.0
# How often timers that fell due while leadership was in doubt look again.
LEADERSHIP_RECHECK_S = 0.1

Operation = Callable[[CoordinatorShard, Hashable, Now], Result]
# Told of every completed rebalance: (group id, cause).
RebalanceListener = Callable[[str, str], None]


class CoordinatorError(Exception):
    """The group cannot be served here now; `error_code` tells the client what to do."""

    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


class ShardState(enum.Enum):
    # A follower of the partition: replays what is committed, serves no one.
    STANDBY = "standby"
    # The leader, replaying up to its log end before it serves.
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


_NOT_SERVING = {
    ShardState.STANDBY: ErrorCode.NOT_COORDINATOR,
    ShardState.LOADING: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ShardState.CLOSED: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


class ShardRuntime:
    """One shard over its partition's log: standby, loading, serving, or closed.

    The shard is only ever built by replay, from `applied_offset` onwards: a
    standby replays up to the high watermark, since what lies above it may still
    be truncated by a new leader; a leader replays up to its log end, since its
    log is the truth from its election on, and only then starts timers and
    serves. A standby promoted to leader therefore only has its uncommitted tail
    left to replay. Any other change of role starts again from the log's start.
    """

    def __init__(
        self,
        replicas: ReplicaManager,
        partition: int,
        log: PartitionLog,
        config: CoordinatorConfig,
        # Records completed rebalances in the history topic: (key, value) pairs.
        history: Callable[[list[tuple[bytes, bytes]]], None],
        on_rebalance: RebalanceListener,
        state: ShardState,
        observe_stalls: Callable[[], None] = lambda: None,
        # Where offloaded work (server assignors) runs; None: on the loop, at once.
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        self.replicas = replicas
        self._executor = executor
        self._observe_stalls = observe_stalls
        self.on_rebalance = on_rebalance
        self.history = history
        self.partition = partition
        self.log = log
        self.config = config
        self.shard = CoordinatorShard(config)
        self.state = state
        # The next offset to replay into `shard`.
        self.applied_offset = log.log_start_offset
        self.loaded_records = 0
        self._waiting: dict[Hashable, asyncio.Future[Any]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        # Completes when every record written so far is durable and its replies are out.
        self._tail: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        # The shard's deadline that `_timer` is armed for.
        self._timer_deadline = 0
        # Set when the log or its high watermark moved, or the role changed.
        self._moved = asyncio.Event()
        self._replaying: asyncio.Task[None] | None = None
        # Counts resets, so that a late failure of older state does not reset newer.
        self._incarnation = 0
        # When this broker began to load as leader, and how much was replayed by then.
        self._loading_since = (time.monotonic(), 0)
        # Whether a standby has said it caught up with the high watermark, once per reset.
        self._standby_ready = False

    # -- roles -----------------------------------------------------------------

    def start(self) -> None:
        """Replay in the background, as far as the role allows."""
        if self._replaying is None or self._replaying.done():
            self._replaying = self._event_loop().create_task(self.replay())

    def become_leader(self) -> None:
        """Catch up to the log end, then serve (at once, for a warm standby)."""
        if self.state is ShardState.STANDBY:
            self.state = ShardState.LOADING
            self._loading_since = (time.monotonic(), self.loaded_records)
            self._moved.set()
            self.start()

    def become_standby(self) -> None:
        """Leadership went elsewhere: answer nobody any more, and replay again from the
        start, since state built above the high watermark may be truncated away."""
        if self.state is ShardState.STANDBY:
            return
        self._stop_serving(ErrorCode.NOT_COORDINATOR)
        self._reset(ShardState.STANDBY)
        self.start()

    def replicated(self) -> None:
        """The follower's log or high watermark moved."""
        self._moved.set()

    def close(self) -> None:
        self._stop_serving(ErrorCode.NOT_COORDINATOR)
        self.state = ShardState.CLOSED
        if self._replaying is not None:
            self._replaying.cancel()
        self._moved.set()

    def _stop_serving(self, error: ErrorCode) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.state is ShardState.ACTIVE:
            # The shard answers the joins and syncs it parked, as it would on any loss
            # of the partition; whatever else waits gets `error`.
            self._deliver(self.shard.unload().replies)
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(CoordinatorError(error))

    def _reset(self, state: ShardState) -> None:
        self._incarnation += 1
        self.state = state
        self.shard = CoordinatorShard(self.config)
        self.applied_offset = self.log.log_start_offset
        self.loaded_records = 0
        self._loading_since = (time.monotonic(), 0)
        self._standby_ready = False
        self._moved.set()

    # -- replay ----------------------------------------------------------------

    async def replay(self) -> None:
        """Replay the partition into the shard, yielding to the loop between reads,
        until this is the leader and has replayed its whole log."""
        while self.state in (ShardState.STANDBY, ShardState.LOADING):
            log_ = self.log
            if not log_.log_start_offset <= self.applied_offset <= log_.log_end_offset:
                # Truncated below what was replayed (an unclean election), or restarted
                # past it: the state cannot be trusted; build it again.
                log.info("%s: replaying it again from its start", log_.name)
                self._reset(self.state)
            target = (
                log_.log_end_offset if self.state is ShardState.LOADING else log_.high_watermark
            )
            if self.applied_offset < target:
                self._replay_step(target)
                await asyncio.sleep(0)
                continue
            if self.state is ShardState.LOADING:
                self._activate()
                return
            if not self._standby_ready and self.replicas.in_sync(self.log):
                # Caught up with a high watermark that is the leader's own: this replica
                # is in the ISR, so a takeover now replays only an uncommitted tail.
                self._standby_ready = True
                since, _ = self._loading_since
                log.info(
                    "standby of %s-%d ready: %d records replayed in %.3fs",
                    OFFSETS_TOPIC,
                    self.partition,
                    self.loaded_records,
                    time.monotonic() - since,
                )
            self._moved.clear()
            # Until ready, look again now and then: joining the ISR moves nothing here.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(None if self._standby_ready else READY_RECHECK_S):
                    await self._moved.wait()

    def _replay_step(self, target: int) -> None:
        """Replay the records of one read below `target`."""
        data = self.log.read(self.applied_offset, LOAD_READ_BYTES, max_offset=target)
        if not data:
            # Compaction left nothing between here and the target.
            self.applied_offset = target
            return
        view = memoryview(data)
        for position, header in iter_batches(view):
            batch = view[position : position + header.size]
            if self.applied_offset <= header.base_offset and header.last_offset < target:
                # All of the batch is replayed, so its records' offsets are not needed:
                # its keys and values come a run at a time, cut out in C.
                for keys, values in iter_key_value_runs(batch, header):
                    if keys[0] is not None:
                        self.shard.replay_records(keys, values)  # type: ignore[arg-type]
                        self.loaded_records += len(keys)
                self.applied_offset = header.last_offset + 1
                continue
            for record in iter_records(batch, header):
                if record.offset < self.applied_offset or record.key is None:
                    continue
                if record.offset >= target:
                    # Nothing of this batch below the target is left unreplayed.
                    self.applied_offset = target
                    return
                self.shard.replay(record.key, record.value)
                self.loaded_records += 1
                self.applied_offset = record.offset + 1
            self.applied_offset = max(self.applied_offset, min(header.last_offset + 1, target))

    def _activate(self) -> None:
        self.state = ShardState.ACTIVE
        self._apply(self.shard.on_loaded(clock.now()))
        since, replayed_before = self._loading_since
        log.log(
            logging.INFO if self.loaded_records else logging.DEBUG,
            "coordinating the groups of %s-%d: %d groups; %d records replayed, %d of them"
            " since it became leader, %.3fs ago",
            OFFSETS_TOPIC,
            self.partition,
            len(self.shard.groups),
            self.loaded_records,
            self.loaded_records - replayed_before,
            time.monotonic() - since,
        )

    # -- operations ------------------------------------------------------------

    async def run(self, operation: Operation) -> Any:
        """Run one operation; return its response once it may be sent."""
        if self.state is not ShardState.ACTIVE:
            raise CoordinatorError(_NOT_SERVING[self.state])
        self._require_leading()
        token = object()
        waiter: asyncio.Future[Any] = self._event_loop().create_future()
        self._waiting[token] = waiter
        try:
            self._apply(operation(self.shard, token, clock.now()), leading=True)
            return await waiter
        finally:
            self._waiting.pop(token, None)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """The broker's loop, kept: asyncio.get_running_loop() makes a system call
        (getpid) each time, once per commit on the request path."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def _require_leading(self) -> None:
        """A broker that lost its partition's leadership, or cannot prove it still has
        it (paused past its ZooKeeper session), answers nothing from its state."""
        try:
            self.replicas.leader_log(OFFSETS_TOPIC, self.partition)
        except PartitionError as exc:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR) from exc

    def _apply(self, result: Result, leading: bool = False) -> None:
        """Append the records now; release the replies once they are durable, in order.

        `leading`: leadership was checked in this same step of the loop, so replies
        released at once need not check it again.
        """
        end_offset = None
        if result.records:
            # The records' timestamp is written: the wall clock's.
            batch = build_batch(result.records, clock.wall_ms())
            try:
                records = [(parse_header(batch), memoryview(batch))]
                # Waited on as acks=all: an answer leaves only once its records are committed.
                # Every record of the coordinator's has a key (Record.key is never None).
                info = self.replicas.append(self.log, records, ACKS_ALL, keyed=True)
                end_offset = info.last_offset + 1
            except (StorageError, PartitionError) as exc:
                # A full disk is counted and logged where it happened (rate-limited).
                # The groups' state ran ahead of the log: build it again from the log.
                log.info(
                    "append to %s-%d refused: %s; replaying it", OFFSETS_TOPIC, self.partition, exc
                )
                self._fail_and_reload(self._incarnation)
                return
            except Exception:
                log.exception("append to %s-%d failed; reloading it", OFFSETS_TOPIC, self.partition)
                self._fail_and_reload(self._incarnation)
                return
        if result.rebalances:
            self._publish_rebalances(result.rebalances)
        previous = self._tail
        # With nothing of an earlier operation still to release, and nothing of its own
        # to wait for (a heartbeat, a fetch; a commit on one broker with no flush due),
        # the replies go now, without a task of their own.
        idle = previous is None or previous.done()
        if idle and (
            end_offset is None or self.replicas.committed_now(self.log, ACKS_ALL, end_offset)
        ):
            error = None
            if end_offset is None and not leading:
                # As in _release: an answer that wrote nothing needs this broker to lead.
                try:
                    self._require_leading()
                except CoordinatorError as exc:
                    error = exc
            self._deliver(result.replies, error)
        else:
            loop = self._event_loop()
            tail: asyncio.Future[None] = loop.create_future()
            self._tail = tail
            loop.create_task(self._release(result, previous, tail, end_offset, self._incarnation))
        self._arm_timer(result.timers)
        for work in result.offloaded:
            self._offload(work)

    def _deliver(self, replies: list[Reply], error: CoordinatorError | None = None) -> None:
        """Hand each waiting request its response, or `error`."""
        for reply in replies:
            waiter = self._waiting.get(reply.token)
            if waiter is not None and not waiter.done():
                if error is None:
                    waiter.set_result(reply.response)
                else:
                    waiter.set_exception(error)

    def _publish_rebalances(self, rebalances: list[tuple[str, RebalanceRecord]]) -> None:
        entries = []
        for group_id, entry in rebalances:
            duration = (entry.ended_ms or entry.started_ms) - entry.started_ms
            log.info(
                "group %s: %s (%s); %s %d -> %s in %d ms; %d -> %d members",
                group_id,
                entry.cause,
                # A batch LeaveGroup names every member; the full entry is in the topic.
                entry.detail if len(entry.detail) <= 200 else entry.detail[:200] + "...",
                "generation" if entry.protocol == "classic" else "target epoch",
                entry.from_generation,
                entry.to_generation,
                duration,
                len(entry.members_before),
                len(entry.members_after or ()),
            )
            self.on_rebalance(group_id, str(entry.cause))
            value = {"group_id": group_id, **asdict(entry), "duration_ms": duration}
            entries.append((group_id.encode(), json.dumps(value).encode()))
        self.history(entries)

    async def _release(
        self,
        result: Result,
        previous: asyncio.Future[None] | None,
        tail: asyncio.Future[None],
        end_offset: int | None,
        incarnation: int,
    ) -> None:
        try:
            if end_offset is not None:
                await self.replicas.committed(self.log, ACKS_ALL, end_offset, COMMIT_TIMEOUT_MS)
            if previous is not None:
                await previous
            if end_offset is None:
                self._require_leading()
            self._deliver(result.replies)
        except CoordinatorError as exc:
            self._deliver(result.replies, exc)
        except Exception as exc:
            if isinstance(exc, (PartitionError, StorageError)):
                log.info("%s-%d: %s; reloading it", OFFSETS_TOPIC, self.partition, exc)
            else:
                log.exception("committing to %s-%d failed", OFFSETS_TOPIC, self.partition)
            self._fail_and_reload(incarnation)
        finally:
            tail.set_result(None)

    def _fail_and_reload(self, incarnation: int) -> None:
        """State ran ahead of the log: drop it, answer everyone, and rebuild by replay.
        Only once per incarnation of the state, and only while serving: a shard whose
        role changed meanwhile has already started over."""
        if incarnation != self._incarnation or self.state is not ShardState.ACTIVE:
            return
        self._stop_serving(ErrorCode.NOT_COORDINATOR)
        self._reset(ShardState.LOADING)
        self.start()

    # -- offloaded work ----------------------------------------------------------

    def _offload(self, work: OffloadedWork) -> None:
        """Run `work` on the executor's thread; its completion is an operation of the
        shard's like any other, unless the shard's state was rebuilt or left meanwhile
        (the new state asks again for what it still needs)."""
        incarnation = self._incarnation
        if self._executor is None:
            self._offloaded_done(work, _run_offloaded(work), incarnation)
            return
        future = self._event_loop().run_in_executor(self._executor, _run_offloaded, work)
        future.add_done_callback(
            lambda done: self._offloaded_done(
                work, None if done.cancelled() else done.result(), incarnation
            )
        )

    def _offloaded_done(self, work: OffloadedWork, value: Any, incarnation: int) -> None:
        if incarnation != self._incarnation or self.state is not ShardState.ACTIVE:
            return
        try:
            self._require_leading()
        except CoordinatorError:
            # Leadership in doubt: the result waits until it is settled, as timers do (a
            # lost leadership resets the state; a renewed one must still hear of it, or
            # the group would wait for this target for ever).
            self._event_loop().call_later(
                LEADERSHIP_RECHECK_S, self._offloaded_done, work, value, incarnation
            )
            return
        self._apply(work.complete(value, clock.now()), leading=True)

    # -- timers ----------------------------------------------------------------

    def _arm_timer(self, changes: list[TimerChange]) -> None:
        """Have the loop call the shard at its next deadline.

        A deadline that moved later or went away leaves the loop timer as it is: it
        fires early, finds nothing due and is armed again then. That is once per
        session timeout or so, where asking the shard for its next deadline after
        every operation (every heartbeat moves one) was a tenth of a busy broker.
        """
        if self.state is not ShardState.ACTIVE:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            return
        if self._timer is not None:
            armed = self._timer_deadline
            for change in changes:
                if isinstance(change, ScheduleTimer) and change.deadline_ms < armed:
                    break
            else:
                return
            self._timer.cancel()
            self._timer = None
        deadline = self.shard.next_deadline()
        if deadline is None:
            return
        # The shard's deadlines are on the monotonic clock, as the loop's own timers.
        delay = max(deadline - clock.monotonic_ms(), 0) / 1000
        self._timer = self._event_loop().call_later(delay, self._fire)
        self._timer_deadline = deadline

    def _fire(self) -> None:
        self._timer = None
        # A stall that just ended moves every deadline on before any is judged.
        self._observe_stalls()
        if self.state is not ShardState.ACTIVE:
            return
        try:
            self._require_leading()
        except CoordinatorError:
            # Leadership in doubt (the lease lapsed): judge no member until it is settled
            # one way (the lease renewed) or the other (the role changes).
            self._timer = self._event_loop().call_later(LEADERSHIP_RECHECK_S, self._fire)
            return
        self._apply(self.shard.poll(clock.now()), leading=True)

    def postpone_timers(self, stalled_ms: int) -> None:
        if self.state is ShardState.ACTIVE:
            self.shard.postpone_timers(stalled_ms)
            self._arm_timer([])


def _run_offloaded(work: OffloadedWork) -> Any:
    """The work's value, None if it failed (the coordinator then tries again later)."""
    try:
        return work.run()
    except Exception:
        log.exception("offloaded coordinator work failed")
        return None


class GroupCoordinator:
    """All shards of this broker: on one node, every `__consumer_offsets` partition; in
    a cluster, one per replica this broker holds, serving where it leads and a warm
    standby where it follows."""

    def __init__(
        self,
        logs: LogManager,
        replicas: ReplicaManager,
        config: CoordinatorConfig,
        num_partitions: int,
        segment_bytes: int = 104_857_600,
        on_rebalance: RebalanceListener = lambda group, cause: None,
        standby: bool = True,
        forward_history: Callable[[bytes], None] | None = None,
        stalls: StallDetector | None = None,
    ) -> None:
        self.logs = logs
        self.replicas = replicas
        self.on_rebalance = on_rebalance
        self.config = config
        self.num_partitions = num_partitions
        self.standby = standby
        self._forward_history = forward_history
        self._stalls = stalls
        if stalls is not None:
            stalls.listeners.append(self._postpone_timers)
        # Kafka's settings for the offsets topic: compacted, 100 MiB segments by default.
        self.topic_configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}
        self.shards: dict[int, ShardRuntime] = {}
        self._loading: asyncio.Task[None] | None = None
        # One thread for the server assignors of every shard (KIP-1263's offload): it
        # shares the interpreter lock, but the loop takes it back every few milliseconds
        # instead of waiting out a whole assignment.
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="herdless-assignor"
        )

    def start(self) -> None:
        """One broker alone: it leads every partition; load them one after another, so
        the first groups are served before the last partition is read."""
        logs = self.logs
        if REBALANCES_TOPIC not in logs.topics:
            logs.create_topic(REBALANCES_TOPIC, 1, REBALANCES_TOPIC_CONFIGS)
        topic = logs.topics.get(OFFSETS_TOPIC)
        if topic is None:
            topic = logs.create_topic(OFFSETS_TOPIC, self.num_partitions, self.topic_configs)
        elif topic.partition_count != self.num_partitions:
            # Placement hashes over the partition count; it cannot change under stored groups.
            log.warning(
                "%s has %d partitions; offsets.topic.num.partitions=%d is ignored",
                OFFSETS_TOPIC,
                topic.partition_count,
                self.num_partitions,
            )
            self.num_partitions = topic.partition_count
        self.shards = {
            p: self._new_shard(p, partition_log, ShardState.LOADING)
            for p, partition_log in topic.partitions.items()
        }
        self._loading = asyncio.get_running_loop().create_task(self._load_all())

    async def _load_all(self) -> None:
        started = time.monotonic()
        for shard in self.shards.values():
            await shard.replay()
        total = sum(s.loaded_records for s in self.shards.values())
        log.info(
            "group coordinator loaded %d records from %d partitions in %.2fs",
            total,
            len(self.shards),
            time.monotonic() - started,
        )

    async def wait_loaded(self) -> None:
        if self._loading is not None:
            await asyncio.shield(self._loading)

    def shard_for(self, group_id: str) -> ShardRuntime:
        shard = self.shards.get(partition_for(group_id, self.num_partitions))
        if shard is None or shard.state is ShardState.STANDBY:
            # In a cluster: another broker leads this group's offsets partition.
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        return shard

    def coordinating(self) -> list[ShardRuntime]:
        """The shards of the partitions this broker leads (serving, or loading to)."""
        return [
            s for s in self.shards.values() if s.state in (ShardState.ACTIVE, ShardState.LOADING)
        ]

    def on_leadership(self, topic: str, partition: int, role: Role | None) -> None:
        """In a cluster: lead the groups of each offsets partition this broker leads, keep
        a standby of those it follows, and nothing of those it no longer holds."""
        if topic != OFFSETS_TOPIC:
            return
        current = self.shards.get(partition)
        partition_log = self.logs.partition(OFFSETS_TOPIC, partition)
        if current is not None and (role is None or current.log is not partition_log):
            current.close()
            del self.shards[partition]
            current = None
        if role is None or partition_log is None:
            return
        if role is Role.LEADER:
            if current is None:
                current = self.shards[partition] = self._new_shard(
                    partition, partition_log, ShardState.LOADING
                )
                current.start()
            else:
                current.become_leader()
        elif not self.standby:
            if current is not None:
                current.close()
                del self.shards[partition]
        elif current is None:
            current = self.shards[partition] = self._new_shard(
                partition, partition_log, ShardState.STANDBY
            )
            current.start()
        else:
            current.become_standby()

    def on_replicated(self, partition_log: PartitionLog) -> None:
        """A follower's copy of a partition grew, was truncated, or its high watermark moved."""
        if partition_log.topic != OFFSETS_TOPIC:
            return
        shard = self.shards.get(partition_log.partition)
        if shard is not None and shard.log is partition_log:
            shard.replicated()

    async def create_topics(self, topics: TopicAdmin, replication_factor: int) -> None:
        """In a cluster, the first FindCoordinator creates the internal topics, as Kafka
        does; TopicAdminError (e.g. fewer live brokers than the replication factor)."""
        for name, partitions, configs in (
            (OFFSETS_TOPIC, self.num_partitions, self.topic_configs),
            (REBALANCES_TOPIC, 1, REBALANCES_TOPIC_CONFIGS),
        ):
            try:
                await topics.create_topic(
                    NewTopic(name, partitions, replication_factor, configs=configs)
                )
            except TopicAdminError as exc:
                if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise

    def _new_shard(
        self, partition: int, partition_log: PartitionLog, state: ShardState
    ) -> ShardRuntime:
        return ShardRuntime(
            self.replicas,
            partition,
            partition_log,
            self.config,
            self._record_history,
            self.on_rebalance,
            state,
            self._stalls.observe if self._stalls is not None else lambda: None,
            self._executor,
        )

    def _postpone_timers(self, stalled_ms: int) -> None:
        for shard in self.shards.values():
            shard.postpone_timers(stalled_ms)

    def _record_history(self, entries: list[tuple[bytes, bytes]]) -> None:
        batch = build_batch(entries, clock.wall_ms())
        try:
            history_log = self.replicas.leader_log(REBALANCES_TOPIC, 0)
        except PartitionError:
            # In a cluster, another broker leads the history partition.
            if self._forward_history is not None:
                self._forward_history(batch)
            return
        try:
            self.replicas.append(history_log, [(parse_header(batch), memoryview(batch))], 1)
        except (StorageError, PartitionError) as exc:
            log.info("could not record rebalances in %s: %s", REBALANCES_TOPIC, exc)
        except Exception:
            # Operator information only: losing it must not disturb the group.
            log.exception("could not record rebalances in %s", REBALANCES_TOPIC)

    async def run(self, group_id: str, operation: Operation) -> Any:
        return await self.shard_for(group_id).run(operation)

    def close(self) -> None:
        if self._loading is not None:
            self._loading.cancel()
        for shard in self.shards.values():
            shard.close()
        self._executor.shutdown(wait=False, cancel_futures=True)

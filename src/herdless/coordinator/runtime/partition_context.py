"""One shard over its partition's log: a standby, loading, serving, or closed (Kafka's
CoordinatorContext).

The shard is only ever built by replay, from `applied_offset` on: a standby replays up
to the high watermark, since what lies above it may still be truncated by a new leader;
a leader replays up to its log end, since its log is the truth from its election on,
and only then starts timers and serves. A standby promoted to leader therefore only has
its uncommitted tail left to replay. Any other change of role starts again from the
log's start, as does a serving shard whose state ran ahead of its log (an append that
failed, or records not committed in time): each such reset begins a new incarnation,
and offloaded work of an older one is dropped when it completes.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Generic

from herdless.coordinator.now import Now
from herdless.coordinator.result import OffloadedWork, Reply, Result, ScheduleTimer, TimerChange
from herdless.coordinator.runtime.contract import (
    CoordinatorType,
    ReadOperation,
    S,
    WriteOperation,
)
from herdless.coordinator.runtime.deferred import Deferred, DeferredReplies
from herdless.coordinator.runtime.loader import replay_step, replay_written, run_replayer
from herdless.coordinator.runtime.output import LoadSummary, Offload, Output, Reload
from herdless.coordinator.runtime.shard_state import RuntimeConfig, ShardState
from herdless.coordinator.runtime.writer import PartitionWriter, TopicPartition, WriteError
from herdless.protocol.errors import ErrorCode


class CoordinatorContext(Generic[S]):
    def __init__(
        self,
        tp: TopicPartition,
        kind: CoordinatorType[S],
        writer: PartitionWriter,
        state: ShardState,
        config: RuntimeConfig,
    ) -> None:
        self.tp = tp
        self.kind = kind
        self.writer = writer
        self.config = config
        self.state = state
        self.incarnation = 0
        self._waiting: dict[Hashable, None] = {}
        self._deferred = DeferredReplies()
        # The deadline the broker's timer for this partition is armed for.
        self._armed: int | None = None
        # When to look again whether leadership, in doubt at a poll, is settled.
        self._recheck_at: int | None = None
        # Offloaded work that completed while leadership was in doubt, with its value.
        self._held: list[tuple[OffloadedWork, Any]] = []
        self._rebuild()

    def _rebuild(self) -> None:
        """An empty shard, about to be built by replay from the log's start."""
        self.shard: S = self.kind.build(self.tp)
        self._replay_run = run_replayer(self.shard)
        # The next offset to replay into `shard`.
        self.applied_offset = self.writer.log_start_offset(self.tp)
        self.loaded_records = 0
        # loaded_records when this broker was told to lead.
        self._loaded_at_leadership = 0
        # The high watermark as last heard, and the log end after the last append.
        self.committed_offset = self.writer.high_watermark(self.tp)
        self._last_written = self.applied_offset

    # -- roles -------------------------------------------------------------------

    def lead(self, out: Output) -> None:
        """Catch up to the log end, then serve (a warm standby has only its tail left)."""
        if self.state is ShardState.STANDBY:
            self.state = ShardState.LOADING
            self._loaded_at_leadership = self.loaded_records
            out.add_replay(self.tp)

    def follow(self, out: Output) -> None:
        """Leadership went elsewhere: answer nobody any more, and replay again from the
        start, since state built above the high watermark may be truncated away."""
        if self.state is ShardState.STANDBY:
            return
        self._stop_serving(out)
        self._reset(ShardState.STANDBY)
        if self.applied_offset < self.committed_offset:
            out.add_replay(self.tp)

    def close(self, out: Output) -> None:
        self._stop_serving(out)
        self.state = ShardState.CLOSED

    def _stop_serving(self, out: Output) -> None:
        if self.state is ShardState.ACTIVE:
            # The shard answers the requests it parked (joins and syncs), as on any loss
            # of the partition; whatever else waits gets NOT_COORDINATOR.
            self._deliver(self.shard.unload().replies, out)
        for token in self._waiting:
            out.add_error(token, ErrorCode.NOT_COORDINATOR)
        self._waiting.clear()
        self._deferred.clear()
        self._held.clear()
        self._recheck_at = None
        self._set_deadline(None, out)

    def _reset(self, state: ShardState) -> None:
        self.incarnation += 1
        self.state = state
        self._rebuild()

    def _fail_and_reload(self, reason: str, out: Output) -> None:
        """State ran ahead of the log: drop it, answer everyone, and rebuild by replay."""
        self._stop_serving(out)
        self._reset(ShardState.LOADING)
        out.add_reload(Reload(self.tp, reason))
        out.add_replay(self.tp)

    # -- replay ------------------------------------------------------------------

    def replay(self, now: Now, out: Output) -> None:
        """One step of replay, as far as the role allows; a leader that has replayed its
        whole log serves from then on."""
        if self.state not in (ShardState.STANDBY, ShardState.LOADING):
            return
        tp, writer = self.tp, self.writer
        log_end = writer.log_end_offset(tp)
        if not writer.log_start_offset(tp) <= self.applied_offset <= log_end:
            # Truncated below what was replayed (an unclean election), or the log starts
            # past it: the state cannot be trusted; build it again.
            reason = f"the log no longer holds offset {self.applied_offset}"
            out.add_reload(Reload(tp, reason))
            self._reset(self.state)
        loading = self.state is ShardState.LOADING
        target = log_end if loading else min(self.committed_offset, log_end)
        if self.applied_offset < target:
            self.applied_offset, replayed = replay_step(
                writer, tp, self.shard, self._replay_run, self.applied_offset, target
            )
            self.loaded_records += replayed
        if self.applied_offset < target:
            out.add_replay(tp)
        elif loading:
            self._activate(now, out)

    def _activate(self, now: Now, out: Output) -> None:
        self.state = ShardState.ACTIVE
        # What was replayed beyond the high watermark is this leader's uncommitted tail:
        # nothing is answered until it is committed, as if this shard had written it.
        self._last_written = self.applied_offset
        self._refresh_committed()
        end = self._last_written
        if self.committed_offset < end:
            self._deferred.expect_commit(end, now.monotonic_ms + self.config.commit_timeout_ms)
        records = self.loaded_records
        out.add_loaded(LoadSummary(self.tp, records, records - self._loaded_at_leadership))
        self._apply(self.shard.on_loaded(now), out, now, leading=False)
        self._arm((), out, force=True)

    # -- operations --------------------------------------------------------------

    def write(self, token: Hashable, operation: WriteOperation[S], now: Now, out: Output) -> None:
        """Run a write on the serving shard (the runtime checked that it serves)."""
        self._waiting[token] = None
        try:
            result = operation(self.shard, token, now)
        except BaseException:
            del self._waiting[token]
            raise
        self._apply(result, out, now, leading=True)

    def read(self, token: Hashable, operation: ReadOperation[S], out: Output) -> None:
        """Run a read on the serving shard (the runtime checked that it serves)."""
        response = operation(self.shard)
        self._waiting[token] = None
        self._apply(Result(replies=[Reply(token, response)]), out, None, leading=True)

    def written(self, token: Hashable, response: Any, end: int, now: Now, out: Output) -> None:
        """The runtime appended up to `end` for `token` (a transaction's marker, applied to
        the shard): `response` goes out once that is committed."""
        self._waiting[token] = None
        self._apply(Result(replies=[Reply(token, response)]), out, now, True, end)

    def _apply(
        self,
        result: Result,
        out: Output,
        now: Now | None,
        leading: bool,
        appended: int | None = None,
    ) -> None:
        """Append the records now; release the replies once they and every earlier
        operation's records are committed, in order.

        `leading`: leadership was checked in this same input, so replies released at
        once need not check it again. `now` is needed only for records (their commit
        deadline); the shard writes none from unload() or postpone_timers().
        `appended`: the log end after what the runtime appended itself (written()).

        Every OffsetCommit and Heartbeat passes here: the common case (nothing deferred, no
        timer moved earlier) calls nothing it need not (bench/broker_instructions.py).
        """
        wrote = bool(result.records) or appended is not None
        commit_deadline = None
        deferred = self._deferred
        if wrote:
            assert now is not None, "records written without the time to wait for them"
            end = appended
            producer = result.producer
            if end is None:
                try:
                    end = self.writer.append(self.tp, result.records, producer)
                except WriteError as exc:
                    if producer is None:
                        self._fail_and_reload(f"append refused: {exc}", out)
                    else:
                        # Not applied yet (below), so nothing ran ahead of the log.
                        self._refuse(result.replies, out, exc.error_code)
                    return
                if producer is not None:
                    replay_written(self.shard, producer, result.records)
            self._last_written = end
            # On one broker, or with acks met at once, the append itself committed it
            # (_refresh_committed, inline).
            committed = self.writer.high_watermark(self.tp)
            if committed > self.committed_offset:
                self.committed_offset = committed
                if deferred.pending or deferred.deadlines:
                    self._release(out)
            if self.committed_offset < end:
                commit_deadline = now.monotonic_ms + self.config.commit_timeout_ms
                deferred.expect_commit(end, commit_deadline)
        if result.rebalances:
            out.add_rebalances(self.tp, result.rebalances)
        replies = result.replies
        if replies:
            if deferred.pending or self.committed_offset < self._last_written:
                deferred.defer(Deferred(self._last_written, replies, wrote))
            elif wrote or leading or self.writer.is_leader(self.tp):
                self._deliver(replies, out)
            else:
                self._refuse(replies, out)
        if result.timers or commit_deadline is not None or self._armed is None:
            self._arm(result.timers, out, commit_deadline)
        for work in result.offloaded:
            out.add_offload(Offload(self.tp, self.incarnation, work))

    def _refresh_committed(self) -> bool:
        """Take the high watermark from the log; whether it moved."""
        committed = self.writer.high_watermark(self.tp)
        if committed > self.committed_offset:
            self.committed_offset = committed
            return True
        return False

    def high_watermark_moved(self, high_watermark: int, out: Output) -> None:
        self.committed_offset = high_watermark
        if self.state is ShardState.ACTIVE:
            deferred = self._deferred
            if deferred.pending or deferred.deadlines:
                self._release(out)
        elif self.state is ShardState.STANDBY and self.applied_offset != high_watermark:
            # Below it: more to replay; above it: the log may have been truncated under
            # what was replayed, which the step looks at.
            out.add_replay(self.tp)

    def commit_failed(self, end_offset: int, reason: str, out: Output) -> None:
        # Only records this state still waits on: a failure heard late, after the state
        # was rebuilt past them or they were committed after all, changes nothing.
        if (
            self.state is ShardState.ACTIVE
            and self.committed_offset < end_offset <= self._last_written
        ):
            self._fail_and_reload(reason, out)

    def _release(self, out: Output) -> None:
        """Release what the high watermark now covers. Callers call it only when
        something waits, which on one broker, where appends commit at once, nothing does."""
        for entry in self._deferred.complete_up_to(self.committed_offset):
            # A reply that wrote nothing proves nothing by its commit: it needs this
            # broker to lead still.
            if entry.wrote or self.writer.is_leader(self.tp):
                self._deliver(entry.replies, out)
            else:
                self._refuse(entry.replies, out)

    def _deliver(self, replies: list[Reply], out: Output) -> None:
        """Hand each waiting caller its response; replies to no one waiting are dropped."""
        waiting = self._waiting
        for reply in replies:
            if reply.token in waiting:
                del waiting[reply.token]
                out.replies.append(reply)

    def _refuse(
        self, replies: list[Reply], out: Output, error: ErrorCode = ErrorCode.NOT_COORDINATOR
    ) -> None:
        waiting = self._waiting
        for reply in replies:
            if reply.token in waiting:
                del waiting[reply.token]
                out.add_error(reply.token, error)

    # -- offloaded work ----------------------------------------------------------

    def offloaded_done(self, offload: Offload, value: Any, now: Now, out: Output) -> None:
        """Offloaded work completed: an operation of the shard's like any other, unless
        the shard's state was rebuilt or left meanwhile."""
        if offload.incarnation != self.incarnation or self.state is not ShardState.ACTIVE:
            return
        if not self.writer.is_leader(self.tp):
            # Leadership in doubt: the value waits until it is settled, as timers do (a
            # lost leadership resets the state; a renewed one must still hear of it, or
            # the group would wait for this target for ever).
            self._held.append((offload.work, value))
            self._recheck(now, out)
            return
        self._apply(offload.work.complete(value, now), out, now, leading=True)

    # -- timers ------------------------------------------------------------------

    def poll(self, now: Now, out: Output) -> None:
        """The broker's timer for this partition fired."""
        self._armed = None
        self._recheck_at = None
        if self.state is not ShardState.ACTIVE:
            return
        if self._deferred.commit_overdue(now.monotonic_ms):
            timeout = self.config.commit_timeout_ms
            self._fail_and_reload(f"records not committed within {timeout} ms", out)
            return
        if not self.writer.is_leader(self.tp):
            # Leadership in doubt (the lease lapsed): judge no member until it is settled
            # one way (the lease renewed) or the other (the role changes).
            self._recheck(now, out)
            return
        held, self._held = self._held, []
        incarnation = self.incarnation
        for work, value in held:
            self._apply(work.complete(value, now), out, now, leading=True)
            if self.incarnation != incarnation:
                return
        self._apply(self.shard.poll(now), out, now, leading=True)
        if self.incarnation == incarnation:
            self._arm((), out, force=True)

    def postpone_timers(self, stalled_ms: int, out: Output) -> None:
        if self.state is ShardState.ACTIVE:
            changes = self.shard.postpone_timers(stalled_ms).timers
            self._deferred.postpone(stalled_ms)
            self._arm(changes, out)

    def _recheck(self, now: Now, out: Output) -> None:
        """Poll again a little later: whatever else is due waits for that poll, which
        looks first whether leadership is settled."""
        recheck_at = self._recheck_at = now.monotonic_ms + self.config.leadership_recheck_ms
        if self._armed is None or self._armed > recheck_at:
            self._set_deadline(recheck_at, out)

    def _arm(
        self,
        changes: list[TimerChange] | tuple[()],
        out: Output,
        earlier: int | None = None,
        force: bool = False,
    ) -> None:
        """Have the broker poll this partition at its next deadline.

        A deadline that moved later or went away leaves the armed one as it is: the poll
        comes early, finds nothing due and arms again then. That is once per session
        timeout or so, where asking the shard for its next deadline after every
        operation (every heartbeat moves one) was a tenth of a busy broker. `earlier`:
        a commit deadline that this input set.
        """
        if self.state is not ShardState.ACTIVE:
            self._set_deadline(None, out)
            return
        armed = self._armed
        if not force and armed is not None and (earlier is None or earlier >= armed):
            for change in changes:
                if isinstance(change, ScheduleTimer) and change.deadline_ms < armed:
                    break
            else:
                return
        deadlines = (
            self.shard.next_deadline(),
            self._deferred.first_deadline(),
            self._recheck_at,
        )
        self._set_deadline(min((d for d in deadlines if d is not None), default=None), out)

    def _set_deadline(self, deadline: int | None, out: Output) -> None:
        if deadline != self._armed:
            self._armed = deadline
            out.set_deadline(self.tp, deadline)

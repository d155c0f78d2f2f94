"""The coordinator runtime on the event loop: futures, timers, replay, the executor.

The runtime (coordinator/runtime/) decides everything and does nothing; this module
does what each Output says and feeds the runtime its inputs:
- each caller waits on a future, answered by the reply or error with its token;
- one loop timer per partition, armed at the deadline the runtime names, polls it;
- one task replays the partitions the runtime names, a bounded read per step with the
  loop free between steps, one partition to its end before the next (leaders first),
  so that the first groups are served before the last partition is read;
- offloaded work runs on the executor and its value goes back to the runtime;
- every append the writer could not call committed at once is awaited as an acks=all
  producer's would be, and its commit or failure told to the runtime.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Coroutine, Hashable
from typing import Any

from herdless.broker import clock
from herdless.broker.coordinators.coordinator_writer import CommitWait, ReplicaWriter
from herdless.broker.replication.replica_manager import ACKS_ALL, PartitionError, ReplicaManager
from herdless.coordinator import OffloadedWork
from herdless.coordinator.runtime import (
    CoordinatorRuntime,
    CoordinatorType,
    Offload,
    Output,
    ReadOperation,
    ReplicaRole,
    ShardState,
    TopicPartition,
    WriteOperation,
)
from herdless.protocol.errors import ErrorCode
from herdless.storage import StorageError

log = logging.getLogger(__name__)

# How often a standby that is not yet in the ISR looks whether it joined.
READY_RECHECK_S = 1.0


class CoordinatorError(Exception):
    """The coordinator cannot serve this here now; `error_code` tells the client what to do."""

    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


class RuntimeLoop:
    def __init__(
        self,
        runtime: CoordinatorRuntime,
        writer: ReplicaWriter,
        replicas: ReplicaManager,
        commit_timeout_ms: int,
        # Told of each Output with rebalances, loads or reloads in it, after the rest.
        on_events: Callable[[Output], None],
        observe_stalls: Callable[[], None] = lambda: None,
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        self.runtime = runtime
        self.writer = writer
        self.replicas = replicas
        self.commit_timeout_ms = commit_timeout_ms
        self._on_events = on_events
        self._observe_stalls = observe_stalls
        self._executor = executor
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: dict[Hashable, asyncio.Future[Any]] = {}
        self._timers: dict[TopicPartition, asyncio.TimerHandle] = {}
        self._roles: dict[TopicPartition, ReplicaRole] = {}
        # Partitions with replay to do, and the one being replayed to its end.
        self._to_replay: dict[TopicPartition, None] = {}
        self._replaying_now: TopicPartition | None = None
        self._replaying: asyncio.Task[None] | None = None
        self._commit_waits: set[asyncio.Task[None]] = set()
        # When each partition's shard began to load (as leader, standby or again).
        self.load_started: dict[TopicPartition, float] = {}
        # Standbys that said they caught up with the leader, once per load.
        self._ready: set[TopicPartition] = set()
        self._ready_checks: dict[TopicPartition, asyncio.TimerHandle] = {}

    def event_loop(self) -> asyncio.AbstractEventLoop:
        """The broker's loop, kept: asyncio.get_running_loop() makes a system call
        (getpid) each time, once per commit on the request path."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    # -- inputs ------------------------------------------------------------------

    # write() and read() run the operation at once and return the coroutine of its
    # answer, rather than being coroutines themselves: one coroutine fewer to create and
    # step through on every OffsetCommit.

    def write(
        self, kind: CoordinatorType[Any], partition: int, operation: WriteOperation[Any]
    ) -> Coroutine[Any, Any, Any]:
        """Run `operation` on the shard; awaited, its response once it may be sent, or
        CoordinatorError."""
        token = object()
        return self._answer(
            token, self.runtime.write(kind, partition, token, operation, clock.now())
        )

    def read(
        self, kind: CoordinatorType[Any], partition: int, operation: ReadOperation[Any]
    ) -> Coroutine[Any, Any, Any]:
        """Read `operation` from the shard; awaited, what it read once every earlier write
        of the shard is committed, or CoordinatorError."""
        token = object()
        return self._answer(token, self.runtime.read(kind, partition, token, operation))

    async def _answer(self, token: object, out: Output) -> Any:
        """The answer to `token`'s operation, whose Output is `out`.

        Most answers come in the Output of their own operation (on one broker, or with
        acks met at once, a commit is committed by its append): returned at once, with
        no future to wait on and no pass of the event loop to wake this task, which cost
        more than all the runtime's own work on an OffsetCommit."""
        for reply in out.replies:
            if reply.token is token:
                self.handle(out)
                return reply.response
        for errored, error in out.errors:
            if errored is token:
                self.handle(out)
                raise CoordinatorError(error)
        waiter: asyncio.Future[Any] = (self._loop or self.event_loop()).create_future()
        self._waiting[token] = waiter
        try:
            self.handle(out)
            return await waiter
        finally:
            self._waiting.pop(token, None)

    async def complete_transaction(
        self,
        kind: CoordinatorType[Any],
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
    ) -> None:
        """Write a transaction's marker to `kind`'s partition and apply it; return once it
        is committed, or raise CoordinatorError."""
        token = object()
        out = self.runtime.complete_transaction(
            kind,
            partition,
            token,
            producer_id,
            producer_epoch,
            coordinator_epoch,
            committed,
            clock.now(),
        )
        await self._answer(token, out)

    def on_leadership(self, tp: TopicPartition, role: ReplicaRole | None) -> None:
        if self._roles.get(tp) is not role:
            # What this broker knew committed as leader says nothing in another role.
            self.writer.forget(tp)
            self.load_started[tp] = time.monotonic()
            self._ready.discard(tp)
            if role is None:
                del self._roles[tp]
            else:
                self._roles[tp] = role
        self.handle(self.runtime.on_leadership(tp, role, clock.now()))
        self._check_ready(tp)

    def high_watermark_moved(self, tp: TopicPartition, high_watermark: int) -> None:
        self.handle(self.runtime.high_watermark_moved(tp, high_watermark))
        self._check_ready(tp)

    def postpone_timers(self, stalled_ms: int) -> None:
        self.handle(self.runtime.postpone_timers(stalled_ms))

    def close(self) -> None:
        self.handle(self.runtime.close())
        if self._replaying is not None:
            self._replaying.cancel()
        for handle in (*self._timers.values(), *self._ready_checks.values()):
            handle.cancel()
        for task in self._commit_waits:
            task.cancel()

    # -- outputs -----------------------------------------------------------------

    def handle(self, out: Output) -> None:
        """Do what the runtime asked, in its order."""
        waiting = self._waiting
        for reply in out.replies:
            waiter = waiting.get(reply.token)
            if waiter is not None and not waiter.done():
                waiter.set_result(reply.response)
        # Most inputs (a heartbeat, a commit) give replies alone: each test below is cheaper
        # than a loop over an empty list.
        if out.errors:
            for token, error in out.errors:
                waiter = waiting.get(token)
                if waiter is not None and not waiter.done():
                    waiter.set_exception(CoordinatorError(error))
        if out.deadlines:
            for tp, deadline in out.deadlines.items():
                self._arm(tp, deadline)
        if out.replay:
            self._to_replay.update(dict.fromkeys(out.replay))
            if self._replaying is None or self._replaying.done():
                self._replaying = self.event_loop().create_task(self._replay())
        if out.offloads:
            for offload in out.offloads:
                self._offload(offload)
        if out.loaded or out.reloads:
            for summary in out.loaded:
                # A new leader answers nobody until its log's uncommitted tail is committed.
                self.writer.await_tail(summary.tp)
            for reload in out.reloads:
                self.load_started[reload.tp] = time.monotonic()
                self._ready.discard(reload.tp)
        if self.writer.uncommitted:
            waits, self.writer.uncommitted = self.writer.uncommitted, []
            loop = self.event_loop()
            for wait in waits:
                task = loop.create_task(self._await_commit(wait))
                self._commit_waits.add(task)
                task.add_done_callback(self._commit_waits.discard)
        if out.rebalances or out.loaded or out.reloads:
            self._on_events(out)

    async def _await_commit(self, wait: CommitWait) -> None:
        tp = wait.tp
        try:
            await self.replicas.committed(
                wait.log, ACKS_ALL, wait.end_offset, self.commit_timeout_ms
            )
        except (PartitionError, StorageError) as exc:
            self.handle(self.runtime.commit_failed(tp, wait.end_offset, str(exc)))
            return
        except Exception as exc:
            log.exception("committing to %s failed", tp)
            reason = f"{type(exc).__name__}: {exc}"
            self.handle(self.runtime.commit_failed(tp, wait.end_offset, reason))
            return
        committed = self.writer.committed(wait)
        if committed is not None:
            self.handle(self.runtime.high_watermark_moved(tp, committed))

    # -- timers ------------------------------------------------------------------

    def _arm(self, tp: TopicPartition, deadline: int | None) -> None:
        handle = self._timers.pop(tp, None)
        if handle is not None:
            handle.cancel()
        if deadline is not None:
            # The runtime's deadlines are on the monotonic clock, as the loop's own timers.
            delay = max(deadline - clock.monotonic_ms(), 0) / 1000
            self._timers[tp] = self.event_loop().call_later(delay, self._fire, tp)

    def _fire(self, tp: TopicPartition) -> None:
        self._timers.pop(tp, None)
        # A stall that just ended moves every deadline on before any is judged.
        self._observe_stalls()
        self.handle(self.runtime.poll(tp, clock.now()))

    # -- offloaded work ----------------------------------------------------------

    def _offload(self, offload: Offload) -> None:
        if self._executor is None:
            value = _run_offloaded(offload.work)
            self.handle(self.runtime.offloaded_done(offload, value, clock.now()))
            return
        future = self.event_loop().run_in_executor(self._executor, _run_offloaded, offload.work)
        future.add_done_callback(
            lambda done: self.handle(
                self.runtime.offloaded_done(
                    offload, None if done.cancelled() else done.result(), clock.now()
                )
            )
        )

    # -- replay ------------------------------------------------------------------

    async def _replay(self) -> None:
        while self._to_replay:
            tp = self._next_to_replay()
            del self._to_replay[tp]
            applied = self.runtime.applied_offset(tp)
            try:
                out = self.runtime.replay(tp, clock.now())
            except Exception:
                # A log that cannot be read: the shard stays loading, and says so.
                log.exception("replaying %s failed", tp)
                continue
            self.handle(out)
            if tp not in self._to_replay:
                self._check_ready(tp)
            if self.runtime.applied_offset(tp) != applied:
                # The loop runs between reads; a step that read nothing (an empty
                # partition activating) goes on at once, so that a broker with empty
                # partitions serves all of them as soon as it starts.
                await asyncio.sleep(0)

    def _next_to_replay(self) -> TopicPartition:
        """The partition being replayed, until it is done; a leader's before a standby's."""
        state = self.runtime.state
        current = self._replaying_now
        if current is not None and current in self._to_replay:
            if state(current) is ShardState.LOADING:
                return current
        else:
            current = next(iter(self._to_replay))
        loading = next((tp for tp in self._to_replay if state(tp) is ShardState.LOADING), None)
        self._replaying_now = current if loading is None else loading
        return self._replaying_now

    def _check_ready(self, tp: TopicPartition) -> None:
        """Say once when a standby has caught up with a high watermark that is the
        leader's own: this replica is in the ISR, so a takeover now replays only an
        uncommitted tail. Until then, look again now and then: joining the ISR moves
        nothing here."""
        if (
            tp in self._ready
            or tp in self._to_replay
            or tp in self._ready_checks
            or self.runtime.state(tp) is not ShardState.STANDBY
        ):
            return
        partition_log = self.writer.log(tp)
        applied = self.runtime.applied_offset(tp)
        if applied is None or applied < partition_log.high_watermark:
            return
        if not self.replicas.in_sync(partition_log):
            self._ready_checks[tp] = self.event_loop().call_later(
                READY_RECHECK_S, self._recheck_ready, tp
            )
            return
        self._ready.add(tp)
        log.info(
            "standby of %s ready: %d records replayed in %.3fs",
            tp,
            self.runtime.loaded_records(tp) or 0,
            time.monotonic() - self.load_started.get(tp, time.monotonic()),
        )

    def _recheck_ready(self, tp: TopicPartition) -> None:
        del self._ready_checks[tp]
        self._check_ready(tp)


def _run_offloaded(work: OffloadedWork) -> Any:
    """The work's value, None if it failed (the coordinator then tries again later)."""
    try:
        return work.run()
    except Exception:
        log.exception("offloaded coordinator work failed")
        return None

"""The coordinator runtime: hosts the shards of every coordinator, one per partition of
its internal topic, over the log reached through a PartitionWriter.

It is Kafka's CoordinatorRuntime as a pure state machine: no threads, no clock, no
I/O. The broker feeds it inputs (leadership, operations, high watermark moves, replay
steps, timer polls with `now`, offloaded work done, stalls) and acts on the Output each
input returns; the asyncio glue (futures, loop timers, the executor) stays in broker/.

The rules it keeps, whatever the coordinator:
- a leader replays its partition to the log end before it serves; until then its
  requests get COORDINATOR_LOAD_IN_PROGRESS, and a follower's NOT_COORDINATOR;
- a follower keeps a warm standby replayed up to the high watermark, so a takeover
  replays only the uncommitted tail;
- replies are released in order, once the records of their operation and of every
  earlier one are committed;
- when a partition stops serving, the shard's own unload() answers the requests it
  parked, and every other waiting caller gets NOT_COORDINATOR;
- a failed append or a commit that does not come in time rebuilds the shard by
  replay, since its state ran ahead of the log.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable
from typing import Any

from herdless.coordinator.now import Now
from herdless.coordinator.result import TransactionalProducer
from herdless.coordinator.runtime.contract import CoordinatorType, ReadOperation, S, WriteOperation
from herdless.coordinator.runtime.loader import replay_transactional
from herdless.coordinator.runtime.output import Offload, Output
from herdless.coordinator.runtime.partition_context import CoordinatorContext
from herdless.coordinator.runtime.shard_state import NOT_SERVING, RuntimeConfig, ShardState
from herdless.coordinator.runtime.writer import (
    EndTransaction,
    PartitionWriter,
    TopicPartition,
    WriteError,
)
from herdless.protocol.errors import ErrorCode


class ReplicaRole(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


class CoordinatorRuntime:
    def __init__(
        self,
        writer: PartitionWriter,
        kinds: Iterable[CoordinatorType[Any]],
        config: RuntimeConfig | None = None,
    ) -> None:
        self._writer = writer
        self._config = config or RuntimeConfig()
        self._kinds: dict[str, CoordinatorType[Any]] = {}
        for kind in kinds:
            self.register(kind)
        self._contexts: dict[TopicPartition, CoordinatorContext[Any]] = {}
        self._closed = False

    def register(self, kind: CoordinatorType[Any]) -> None:
        """Host `kind` too: a broker builds one runtime, and each coordinator brings its
        type when it is built. Leadership of its topic told before is not replayed."""
        if kind.topic in self._kinds:
            raise ValueError(f"two coordinators on {kind.topic}")
        self._kinds[kind.topic] = kind

    # -- leadership --------------------------------------------------------------

    def on_leadership(self, tp: TopicPartition, role: ReplicaRole | None, now: Now) -> Output:
        """This broker now leads `tp`, follows it, or holds no replica of it (None).

        Partitions of topics no coordinator runs on are ignored, so the broker may tell
        of every partition."""
        out = Output()
        kind = self._kinds.get(tp.topic)
        if kind is None or self._closed:
            return out
        context = self._contexts.get(tp)
        if role is ReplicaRole.FOLLOWER and not kind.standby:
            role = None
        if role is None:
            if context is not None:
                context.close(out)
                del self._contexts[tp]
            return out
        if context is None:
            state = ShardState.LOADING if role is ReplicaRole.LEADER else ShardState.STANDBY
            context = CoordinatorContext(tp, kind, self._writer, state, self._config)
            self._contexts[tp] = context
            # A leader loads; a standby replays what is already committed.
            if state is ShardState.LOADING or context.applied_offset < context.committed_offset:
                out.add_replay(tp)
        elif role is ReplicaRole.LEADER:
            context.lead(out)
        else:
            context.follow(out)
        return out

    # -- operations --------------------------------------------------------------

    def write(
        self,
        kind: CoordinatorType[S],
        partition: int,
        token: Hashable,
        operation: WriteOperation[S],
        now: Now,
    ) -> Output:
        """Run `operation` on the shard of `kind` for `partition`; the caller identified
        by `token` gets its Reply once it is committed, or an error."""
        out = Output()
        context = self._serving(kind, partition, token, out)
        if context is not None:
            context.write(token, operation, now, out)
        return out

    def read(
        self, kind: CoordinatorType[S], partition: int, token: Hashable, operation: ReadOperation[S]
    ) -> Output:
        """Answer `token` with what `operation` reads from the shard, once every earlier
        write of the shard is committed."""
        out = Output()
        context = self._serving(kind, partition, token, out)
        if context is not None:
            context.read(token, operation, out)
        return out

    def complete_transaction(
        self,
        kind: CoordinatorType[Any],
        partition: int,
        token: Hashable,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        now: Now,
    ) -> Output:
        """End `producer_id`'s transaction in `kind`'s `partition` (WriteTxnMarkers): the
        marker is appended and replayed into the shard, and `token` is answered NONE
        once it is committed, or with an error (Kafka's scheduleTransactionCompletion)."""
        out = Output()
        context = self._serving(kind, partition, token, out)
        if context is None:
            return out
        # The marker is written first, then applied as replay applies it: one the log
        # refuses (an old producer or coordinator epoch) has changed nothing, and the
        # caller gets the log's error for it, where a state applied first would need a
        # rebuild (Kafka reverts its snapshot instead).
        try:
            end = self._writer.append_end_transaction_marker(
                context.tp, producer_id, producer_epoch, coordinator_epoch, committed
            )
        except WriteError as exc:
            out.add_error(token, exc.error_code)
            return out
        producer = TransactionalProducer(producer_id, producer_epoch)
        replay_transactional(context.shard, EndTransaction(producer, committed))
        context.written(token, ErrorCode.NONE, end, now, out)
        return out

    def _serving(
        self, kind: CoordinatorType[Any], partition: int, token: Hashable, out: Output
    ) -> CoordinatorContext[Any] | None:
        """The context that serves `kind`'s `partition`, or None with the caller's error
        in `out`."""
        if self._kinds.get(kind.topic) is not kind:
            raise ValueError(f"no coordinator of this kind on {kind.topic}")
        if self._closed:
            error: ErrorCode | None = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            # A TopicPartition is the tuple it holds, so a plain tuple finds it: none is
            # built on the path of every request.
            context = self._contexts.get((kind.topic, partition))  # type: ignore[call-overload]
            if context is None:
                # Another broker leads the partition, or no broker holds it yet.
                error = ErrorCode.NOT_COORDINATOR
            elif context.state is not ShardState.ACTIVE:
                error = NOT_SERVING[context.state]
            elif not self._writer.is_leader(context.tp):
                # It led when it last heard, but this broker lost the partition's
                # leadership or cannot prove it still has it (paused past its
                # ZooKeeper session).
                error = ErrorCode.NOT_COORDINATOR
            else:
                return context
        out.add_error(token, error)
        return None

    # -- the log -----------------------------------------------------------------

    def high_watermark_moved(self, tp: TopicPartition, high_watermark: int) -> Output:
        """What is committed of `tp` moved (or, after an unclean election, went back)."""
        out = Output()
        context = self._contexts.get(tp)
        if context is not None:
            context.high_watermark_moved(high_watermark, out)
        return out

    def commit_failed(self, tp: TopicPartition, end_offset: int, reason: str) -> Output:
        """The records of `tp` below `end_offset` cannot be committed (a failed flush, too
        few in-sync replicas, a commit wait that timed out): a shard still waiting on
        them is rebuilt by replay, since its state ran ahead of the log."""
        out = Output()
        context = self._contexts.get(tp)
        if context is not None:
            context.commit_failed(end_offset, reason, out)
        return out

    def replay(self, tp: TopicPartition, now: Now) -> Output:
        """Replay one bounded read of `tp`; `tp` is in the Output's `replay` while there
        is more to do."""
        out = Output()
        context = self._contexts.get(tp)
        if context is not None:
            context.replay(now, out)
        return out

    # -- time ----------------------------------------------------------------------

    def poll(self, tp: TopicPartition, now: Now) -> Output:
        """The broker's timer for `tp` fired (it fires once; the Output arms it again)."""
        out = Output()
        context = self._contexts.get(tp)
        if context is not None:
            context.poll(now, out)
        return out

    def offloaded_done(self, offload: Offload, value: Any, now: Now) -> Output:
        """`offload.work.run()` returned `value` (None if it raised)."""
        out = Output()
        context = self._contexts.get(offload.tp)
        if context is not None:
            context.offloaded_done(offload, value, now, out)
        return out

    def postpone_timers(self, stalled_ms: int) -> Output:
        """The broker could not run for `stalled_ms`: no deadline counts that time."""
        out = Output()
        for context in self._contexts.values():
            context.postpone_timers(stalled_ms, out)
        return out

    def close(self) -> Output:
        out = Output()
        self._closed = True
        for context in self._contexts.values():
            context.close(out)
        self._contexts.clear()
        return out

    # -- inspection ----------------------------------------------------------------

    def state(self, tp: TopicPartition) -> ShardState | None:
        context = self._contexts.get(tp)
        return None if context is None else context.state

    def shard(self, kind: CoordinatorType[S], partition: int) -> S | None:
        """The shard of `kind` for `partition`, whatever its state: for metrics and tests.
        Answers to clients go through read(), which waits for what they show to be
        committed."""
        context = self._contexts.get(TopicPartition(kind.topic, partition))
        return None if context is None else context.shard

    def applied_offset(self, tp: TopicPartition) -> int | None:
        """The next offset of `tp` that replay would apply."""
        context = self._contexts.get(tp)
        return None if context is None else context.applied_offset

    def loaded_records(self, tp: TopicPartition) -> int | None:
        """How many records replay has applied to the shard of `tp` since it was built."""
        context = self._contexts.get(tp)
        return None if context is None else context.loaded_records

    def partitions(self) -> dict[TopicPartition, ShardState]:
        return {tp: context.state for tp, context in self._contexts.items()}

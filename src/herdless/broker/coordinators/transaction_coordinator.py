"""The transaction coordinator: the shards of `__transaction_state` on this broker.

One shard per partition of `__transaction_state` (coordinator/transactions/), hosted
on the broker's one coordinator runtime beside the groups' (coordinator_host.py),
following leadership with a warm standby as they do. This module adds what is the
transactions' own: the internal topic, producer ids the pure shard can take without
waiting, and the markers every ended transaction needs written on its partitions'
leaders (txn_markers.py) before it completes.

Markers are found two ways: EndTxn's answer carries them, and a sweep of the shards
this broker leads finds every other transaction waiting for them (aborted by its
timeout, fenced by a new producer, or left in Prepare* by a coordinator that failed
over before they were written), as Kafka's coordinator resends them on load.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, Protocol

from herdless.broker.coordinators.coordinator_host import CoordinatorHost
from herdless.broker.coordinators.coordinator_loop import CoordinatorError
from herdless.broker.coordinators.internal_topic import InternalTopicCoordinator
from herdless.broker.coordinators.txn_markers import MarkerWriter
from herdless.broker.replication.replica_manager import PartitionError
from herdless.coordinator import Now, Result, partition_for
from herdless.coordinator.runtime import Output, ShardState, TopicPartition
from herdless.coordinator.transactions import (
    TRANSACTION_STATE_TOPIC,
    TransactionConfig,
    TransactionCoordinatorShard,
    TransactionMetadata,
    TransactionState,
    TxnMarkers,
    transaction_coordinator,
)
from herdless.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# How often the shards this broker leads are looked through for markers no EndTxn
# carried: a transaction's timeout is honoured within as much. A load, and a new
# producer fencing an open transaction, look at once. A shard answers from its index of
# the ids in Prepare* (and times transactions out by their own timers), so the sweep
# costs nothing for idle transactional ids, however many.
MARKER_SWEEP_S = 1.0

TxnOperation = Callable[[TransactionCoordinatorShard, Hashable, Now], Result]

__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionCoordinator", "TransactionEvents"]


class TransactionEvents(Protocol):
    """What the coordinator reports as it happens (the broker's metrics)."""

    def transaction_ended(self, committed: bool, timed_out: bool, marker_seconds: float) -> None:
        """A transaction completed here: its markers written in `marker_seconds`;
        `timed_out` when the coordinator aborted it past its transaction.timeout.ms."""

    def producer_fenced(self) -> None:
        """A new producer with a transactional id fenced the one before it."""


class TransactionCoordinator(InternalTopicCoordinator):
    topic = TRANSACTION_STATE_TOPIC
    num_partitions_setting = "transaction.state.log.num.partitions"

    def __init__(
        self,
        host: CoordinatorHost,
        config: TransactionConfig,
        allocate_producer_id: Callable[[], int],
        num_partitions: int,
        markers: MarkerWriter,
        min_insync_replicas: int = 1,
        segment_bytes: int = 104_857_600,
        events: TransactionEvents | None = None,
        standalone: bool = False,
    ) -> None:
        # Kafka's settings for the transaction log: compacted, its own min.insync.replicas.
        topic_configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(segment_bytes),
            "min.insync.replicas": str(min_insync_replicas),
        }
        super().__init__(host, num_partitions, topic_configs, standalone)
        self.events = events
        self.config = config
        self.markers = markers
        self.kind = transaction_coordinator(config, allocate_producer_id)
        host.register(self.kind, self._on_events)
        # Markers being written, each once, and the task writing them.
        self._writing: dict[TxnMarkers, asyncio.Task[None]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._looking: set[asyncio.Task[None]] = set()
        # Transactional ids whose new producer's retry is still to come after a fence
        # aborted their open transaction (producer_fenced).
        self._fenced_aborting: set[str] = set()

    # -- the topic and leadership ------------------------------------------------------

    def resume(self) -> None:
        super().resume()
        self.start_sweeping()

    def start(self) -> None:
        super().start()
        self.start_sweeping()

    def start_sweeping(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    def partition(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def held(self) -> dict[int, list[TransactionMetadata]]:
        """The transactional ids of each partition this broker serves, as its shards hold
        them now (for metrics: what clients see goes through read())."""
        held = {}
        for tp, state in self.host.runtime.partitions().items():
            if tp.topic != TRANSACTION_STATE_TOPIC or state is not ShardState.ACTIVE:
                continue
            shard = self.host.runtime.shard(self.kind, tp.partition)
            if shard is not None:
                held[tp.partition] = list(shard.transactions.transactions.values())
        return held

    def coordinator_epoch(self, partition: int) -> int:
        """The epoch markers carry: the leader epoch of the transaction log's partition,
        so that a partition leader refuses the markers of a coordinator since replaced."""
        try:
            partition_log = self.host.replicas.leader_log(TRANSACTION_STATE_TOPIC, partition)
        except PartitionError:
            return 0
        return max(self.host.replicas.leader_epoch(partition_log), 0)

    # -- operations --------------------------------------------------------------------

    def run(self, transactional_id: str, operation: TxnOperation) -> Coroutine[Any, Any, Any]:
        """Run `operation` on the shard of `transactional_id`: its response once committed,
        or CoordinatorError."""
        return self.host.loop.write(self.kind, self.partition(transactional_id), operation)

    def read(
        self, partition: int, operation: Callable[[TransactionCoordinatorShard], Any]
    ) -> Coroutine[Any, Any, Any]:
        return self.host.loop.read(self.kind, partition, operation)

    async def add_or_verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        add: bool = False,
    ) -> dict[TopicPartition, ErrorCode]:
        """Whether each partition is in the producer's open transaction (KIP-890 part 1),
        or, with `add`, each added to it on the producer's behalf, as a transaction
        version 2 producer expects of Produce v12+ and TxnOffsetCommit v5+ (KIP-890 part
        2; Kafka's AddPartitionsToTxnManager.addOrVerifyTransaction). Asked of the id's
        coordinator: this broker's shard, or another broker's."""
        partition = self.partition(transactional_id)
        if partition in self.coordinating():
            try:
                if add:
                    return await self.run(
                        transactional_id,
                        lambda shard, token, now: shard.add_partitions(
                            transactional_id,
                            producer_id,
                            producer_epoch,
                            partitions,
                            token,
                            now,
                            client_transaction_version=2,
                        ),
                    )
                return await self.read(
                    partition,
                    lambda shard: shard.verify_partitions(
                        transactional_id, producer_id, producer_epoch, partitions
                    ),
                )
            except CoordinatorError as exc:
                return dict.fromkeys(partitions, exc.error_code)
        coordinator = self.markers.leader_of(TRANSACTION_STATE_TOPIC, partition)
        if coordinator is None or coordinator.node_id == self.markers.node_id:
            return dict.fromkeys(partitions, ErrorCode.NOT_COORDINATOR)
        return await self.markers.add_or_verify_partitions(
            coordinator, transactional_id, producer_id, producer_epoch, partitions, add
        )

    def send_markers(
        self, partition: int, markers: TxnMarkers, cause: str = "", timed_out: bool = False
    ) -> None:
        """Write `markers` in the background (once, however often asked), then complete
        the transaction on the shard of `partition`."""
        if markers in self._writing:
            return
        task = asyncio.get_running_loop().create_task(
            self._complete(partition, markers, cause, timed_out)
        )
        self._writing[markers] = task
        task.add_done_callback(lambda _: self._writing.pop(markers, None))

    def producer_fenced(self, transactional_id: str, aborting: bool) -> bool:
        """A new producer with `transactional_id` fenced the one before it, aborting its
        open transaction or not; False (nothing counted) when this is the retry of a
        producer whose fence aborted a transaction, which was counted then."""
        if not aborting and transactional_id in self._fenced_aborting:
            self._fenced_aborting.discard(transactional_id)
            return False
        if aborting:
            self._fenced_aborting.add(transactional_id)
        if self.events is not None:
            self.events.producer_fenced()
        return True

    async def _complete(
        self, partition: int, markers: TxnMarkers, cause: str, timed_out: bool
    ) -> None:
        started = time.monotonic()
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        written = await self.markers.write(
            markers,
            self.coordinator_epoch(partition),
            lambda: self.host.runtime.state(tp) is ShardState.ACTIVE,
        )
        if not written:
            # Fenced, or this broker no longer coordinates: the new coordinator resends.
            return
        try:
            answer = await self.host.loop.write(
                self.kind, partition, lambda s, t, n: s.complete_markers(markers, t, n)
            )
        except CoordinatorError as exc:
            log.info(
                "transaction %s: markers written, but not completed here (%s); the"
                " coordinator that took over completes it",
                markers.transactional_id,
                exc.error_code.name,
            )
            return
        if answer != ErrorCode.NONE:
            return
        marker_seconds = time.monotonic() - started
        if self.events is not None:
            self.events.transaction_ended(markers.committed, timed_out, marker_seconds)
        log.info(
            "transaction %s %s%s: producer id %d epoch %d, %d partitions (%s); markers"
            " written in %d ms",
            markers.transactional_id,
            "committed" if markers.committed else "aborted",
            cause,
            markers.producer_id,
            markers.producer_epoch,
            len(markers.partitions),
            ", ".join(sorted(str(tp) for tp in markers.partitions)[:10]),
            marker_seconds * 1000,
        )

    # -- markers of transactions nobody's EndTxn carries ---------------------------------

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(MARKER_SWEEP_S)
            try:
                await self._sweep_once()
            except Exception:
                log.exception("looking for transaction markers to write failed")

    async def _sweep_once(self) -> None:
        for tp, state in list(self.host.runtime.partitions().items()):
            if tp.topic == TRANSACTION_STATE_TOPIC and state is ShardState.ACTIVE:
                await self._look_for_markers(tp.partition)

    def look_for_markers(self, partition: int) -> None:
        """Write, in the background, the markers the shard of `partition` waits for."""
        task = asyncio.get_running_loop().create_task(self._look_for_markers(partition))
        self._looking.add(task)
        task.add_done_callback(self._looking.discard)

    async def _look_for_markers(self, partition: int) -> None:
        shard = self.host.runtime.shard(self.kind, partition)
        if shard is None or all(m in self._writing for m in shard.pending_markers()):
            return
        # Read again through the runtime: only what is committed gets markers.
        try:
            found = await self.read(partition, _pending_with_metadata)
        except CoordinatorError:
            return
        for markers, meta in found:
            if markers not in self._writing:
                timed_out = _timed_out(markers, meta)
                self.send_markers(partition, markers, _cause(markers, meta), timed_out)

    def _on_events(self, out: Output) -> None:
        for reload in out.reloads:
            log.info("%s: %s; replaying it", reload.tp, reload.reason)
        for summary in out.loaded:
            tp = summary.tp
            shard = self.host.runtime.shard(self.kind, tp.partition)
            since = self.host.loop.load_started.get(tp, time.monotonic())
            log.log(
                logging.INFO if summary.records else logging.DEBUG,
                "coordinating the transactions of %s: %d transactional ids; %d records"
                " replayed, %d of them since it became leader, %.3fs ago",
                tp,
                0 if shard is None else len(shard.transactions.transactions),
                summary.records,
                summary.records_since_leader,
                time.monotonic() - since,
            )
            # Transactions a coordinator before this one left waiting for markers.
            self.look_for_markers(tp.partition)

    async def close(self) -> None:
        tasks = [*self._writing.values(), *self._looking]
        if self._sweeper is not None:
            tasks.append(self._sweeper)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _pending_with_metadata(
    shard: TransactionCoordinatorShard,
) -> list[tuple[TxnMarkers, TransactionMetadata | None]]:
    found = shard.transactions.transactions
    return [(m, found.get(m.transactional_id)) for m in shard.pending_markers()]


def _timed_out(markers: TxnMarkers, meta: TransactionMetadata | None) -> bool:
    """Whether the coordinator is aborting the transaction for being open past its timeout."""
    if markers.committed or meta is None or meta.state is not TransactionState.PREPARE_ABORT:
        return False
    return meta.last_update_timestamp_ms - meta.start_timestamp_ms >= meta.timeout_ms


def _cause(markers: TxnMarkers, meta: TransactionMetadata | None) -> str:
    """Why a transaction no EndTxn ended is ending, for its log line."""
    if markers.committed or meta is None or meta.state is not TransactionState.PREPARE_ABORT:
        return " (markers resent)"
    if _timed_out(markers, meta):
        open_ms = meta.last_update_timestamp_ms - meta.start_timestamp_ms
        return (
            f" by the coordinator: open {open_ms} ms, past its transaction.timeout.ms"
            f" of {meta.timeout_ms}"
        )
    return " by the coordinator (fenced, or markers resent)"

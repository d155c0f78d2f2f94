"""The transaction coordinator's shard: one per `__transaction_state` partition, hosted
on the coordinator runtime like the group coordinator's (Kafka's
TransactionCoordinatorShard). A thin dispatcher: the rules are the manager's."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Sequence

from herdless.coordinator.now import Now
from herdless.coordinator.result import Result
from herdless.coordinator.runtime.contract import CoordinatorType
from herdless.coordinator.runtime.writer import TopicPartition
from herdless.coordinator.timers import CoordinatorTimer
from herdless.coordinator.transactions import reads
from herdless.coordinator.transactions.config import TransactionConfig
from herdless.coordinator.transactions.manager import (
    ProducerIdAllocator,
    TransactionManager,
    TxnTimerKey,
)
from herdless.coordinator.transactions.messages import TxnMarkers
from herdless.coordinator.transactions.metadata import TransactionMetadata
from herdless.protocol.errors import ErrorCode

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionCoordinatorShard:
    def __init__(
        self, config: TransactionConfig, allocate_producer_id: ProducerIdAllocator
    ) -> None:
        self.timer: CoordinatorTimer[TxnTimerKey] = CoordinatorTimer()
        self.transactions = TransactionManager(config, allocate_producer_id, self.timer)

    # -- the runtime's calls -----------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        self.transactions.replay(key, value)

    def replay_records(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        for key, value in zip(keys, values, strict=True):
            self.transactions.replay(key, value)

    def on_loaded(self, now: Now) -> Result:
        return self.transactions.start_timers(now)

    def unload(self) -> Result:
        # Nothing is parked: every request is answered by its own operation.
        self.timer.cancel_all(Result())
        return Result()

    def poll(self, now: Now) -> Result:
        return self.timer.poll(now)

    def next_deadline(self) -> int | None:
        return self.timer.next_deadline()

    def postpone_timers(self, stalled_ms: int) -> Result:
        return self.timer.postpone(stalled_ms)

    # -- writes --------------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        token: Hashable,
        now: Now,
    ) -> Result:
        return self.transactions.init_producer_id(
            transactional_id, timeout_ms, expected, token, now
        )

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        token: Hashable,
        now: Now,
        client_transaction_version: int = 0,
    ) -> Result:
        return self.transactions.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            token,
            now,
            client_transaction_version,
        )

    def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        token: Hashable,
        now: Now,
    ) -> Result:
        return self.transactions.add_offsets(
            transactional_id, producer_id, producer_epoch, group_id, token, now
        )

    def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        token: Hashable,
        now: Now,
        client_transaction_version: int = 0,
    ) -> Result:
        return self.transactions.end_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            committed,
            token,
            now,
            client_transaction_version,
        )

    def complete_markers(self, markers: TxnMarkers, token: Hashable, now: Now) -> Result:
        return self.transactions.complete_markers(markers, token, now)

    # -- reads ---------------------------------------------------------------------------

    def pending_markers(self) -> list[TxnMarkers]:
        return self.transactions.pending_markers()

    def describe(self, transactional_id: str) -> TransactionMetadata | ErrorCode:
        return reads.describe(self.transactions.transactions, transactional_id)

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
        now_wall_ms: int = 0,
        transactional_id_pattern: re.Pattern[str] | None = None,
    ) -> list[TransactionMetadata]:
        return reads.list_transactions(
            self.transactions.transactions,
            states,
            producer_ids,
            min_duration_ms,
            now_wall_ms,
            transactional_id_pattern,
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        return reads.verify_partitions(
            self.transactions.transactions,
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
        )


def transaction_coordinator(
    config: TransactionConfig, allocate_producer_id: ProducerIdAllocator
) -> CoordinatorType[TransactionCoordinatorShard]:
    """The transaction coordinator as the runtime hosts it, on `__transaction_state`."""

    def build(tp: TopicPartition) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(config, allocate_producer_id)

    return CoordinatorType(TRANSACTION_STATE_TOPIC, build)

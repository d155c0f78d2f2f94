"""One transactional id's state (Kafka's TransactionMetadata), and its record.

Immutable: a transition builds the next value, the record is that value encoded, and
replaying the record gives it back, so live state and a loaded one cannot disagree.
Kafka does not write the last producer epoch; a loaded id has none, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from herdless.coordinator.runtime.writer import TopicPartition
from herdless.coordinator.transactions.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionLogValue,
)
from herdless.coordinator.transactions.state import TransactionState, check_transition

# Kafka keeps Short.MaxValue out of a producer's reach so the coordinator can always
# fence it with one more bump.
MAX_PRODUCER_EPOCH = 32767
NO_TIMESTAMP = -1


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    # Wall-clock times: written, and read by another broker after a failover.
    start_timestamp_ms: int
    last_update_timestamp_ms: int
    # The producer id of the previous state (a retry across a producer id rotation).
    previous_producer_id: int = NO_PRODUCER_ID
    # The producer id an epoch overflow at EndTxn moves to once the markers are written.
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    client_transaction_version: int = 0

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    def transition(
        self, state: TransactionState, now_ms: int, **changes: object
    ) -> TransactionMetadata:
        """The next state: legal by the table in state.py, with the previous producer
        id set to this one's and the update time to `now_ms`, as Kafka's every
        transition does."""
        check_transition(self.state, state)
        return replace(
            self,
            state=state,
            previous_producer_id=self.producer_id,
            last_update_timestamp_ms=now_ms,
            **changes,  # type: ignore[arg-type]
        )

    def to_value(self) -> TransactionLogValue:
        empty = self.state is TransactionState.EMPTY
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            transaction_status=self.state.value,
            transaction_partitions=None if empty else tuple(sorted(self.partitions)),
            transaction_last_update_timestamp_ms=self.last_update_timestamp_ms,
            transaction_start_timestamp_ms=self.start_timestamp_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )

    @classmethod
    def from_value(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        state = TransactionState.from_id(value.transaction_status)
        partitions = value.transaction_partitions
        return cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            timeout_ms=value.transaction_timeout_ms,
            state=state,
            partitions=frozenset()
            if state is TransactionState.EMPTY or partitions is None
            else frozenset(partitions),
            start_timestamp_ms=value.transaction_start_timestamp_ms,
            last_update_timestamp_ms=value.transaction_last_update_timestamp_ms,
            previous_producer_id=value.previous_producer_id,
            next_producer_id=value.next_producer_id,
            client_transaction_version=value.client_transaction_version,
        )

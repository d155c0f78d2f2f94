"""The transaction coordinator's settings, at Kafka's broker defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    # transaction.max.timeout.ms: the longest timeout a producer may ask for.
    max_timeout_ms: int = 900_000
    # transactional.id.expiration.ms: an idle transactional id is removed after this.
    transactional_id_expiration_ms: int = 604_800_000
    # transaction.version: 2 bumps the epoch at every transaction's end (KIP-890 part 2)
    # and, from 1, __transaction_state values are written as v1 (flexible).
    transaction_version: int = 2
    # offsets.topic.num.partitions: AddOffsetsToTxn adds the group's offsets partition.
    offsets_topic_num_partitions: int = 50

    @property
    def log_value_version(self) -> int:
        return 1 if self.transaction_version >= 1 else 0

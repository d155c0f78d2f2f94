"""What the transaction coordinator answers, and the markers it asks the broker to write."""

from __future__ import annotations

from dataclasses import dataclass

from herdless.coordinator.runtime.writer import TopicPartition
from herdless.coordinator.transactions.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from herdless.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    """InitProducerId's answer; EndTxn's too from v5 on (the epoch KIP-890 bumped)."""

    error_code: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TxnMarkers:
    """WriteTxnMarkers to send, one marker per partition, on behalf of a transaction in
    PrepareCommit or PrepareAbort: once every partition has its marker, the broker calls
    the shard's complete_markers and the transaction completes."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[TopicPartition]
    # The transaction's client transaction version, sent with the markers (WriteTxnMarkers
    # v2, KIP-1228): from 2 the epoch was bumped for them, so a leader may refuse a
    # marker at the epoch its producer's open transaction was written at.
    transaction_version: int = 0


@dataclass(frozen=True, slots=True)
class EndTxnAnswer:
    """EndTxn's response, and the markers the broker writes once it is released (after
    the Prepare* record is committed, which is why they travel with the reply)."""

    response: ProducerIdAndEpoch
    markers: TxnMarkers | None = None

"""Sans-IO transaction coordinator (Kafka's), a second coordinator on the runtime:
`__transaction_state` records, transaction states, InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, timeouts and transactional id expiration."""

from herdless.coordinator.transactions.config import TransactionConfig
from herdless.coordinator.transactions.manager import TransactionManager, TxnTimerKey
from herdless.coordinator.transactions.messages import EndTxnAnswer, ProducerIdAndEpoch, TxnMarkers
from herdless.coordinator.transactions.metadata import TransactionMetadata
from herdless.coordinator.transactions.shard import (
    TRANSACTION_STATE_TOPIC,
    TransactionCoordinatorShard,
    transaction_coordinator,
)
from herdless.coordinator.transactions.state import TransactionState

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "EndTxnAnswer",
    "ProducerIdAndEpoch",
    "TransactionConfig",
    "TransactionCoordinatorShard",
    "TransactionManager",
    "TransactionMetadata",
    "TransactionState",
    "TxnMarkers",
    "TxnTimerKey",
    "transaction_coordinator",
]

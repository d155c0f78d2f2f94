"""What the transaction coordinator answers from its state alone, with nothing to write:
DescribeTransactions, ListTransactions, and the partition leaders' verify-only
AddPartitionsToTxn. Run as the runtime's reads, released once every earlier write is
committed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from herdless.coordinator.runtime.writer import TopicPartition
from herdless.coordinator.transactions.metadata import NO_TIMESTAMP, TransactionMetadata
from herdless.coordinator.transactions.state import TransactionState
from herdless.protocol.errors import ErrorCode

S = TransactionState
E = ErrorCode


def describe(
    transactions: Mapping[str, TransactionMetadata], transactional_id: str
) -> TransactionMetadata | ErrorCode:
    """DescribeTransactions of one id."""
    if not transactional_id:
        return E.INVALID_REQUEST
    meta = transactions.get(transactional_id)
    return E.TRANSACTIONAL_ID_NOT_FOUND if meta is None else meta


def list_transactions(
    transactions: Mapping[str, TransactionMetadata],
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    min_duration_ms: int = -1,
    now_wall_ms: int = 0,
    transactional_id_pattern: re.Pattern[str] | None = None,
) -> list[TransactionMetadata]:
    """ListTransactions: every id, or those in one of `states` (Kafka's names), of
    one of `producer_ids`, open for at least `min_duration_ms` (KIP-994), whose id
    `transactional_id_pattern` matches whole (KIP-1152, as Java's Matcher.matches)."""
    wanted_states, wanted_ids = frozenset(states), frozenset(producer_ids)
    return [
        meta
        for meta in transactions.values()
        if (not wanted_states or meta.state.state_name in wanted_states)
        and (not wanted_ids or meta.producer_id in wanted_ids)
        and (
            transactional_id_pattern is None
            or transactional_id_pattern.fullmatch(meta.transactional_id) is not None
        )
        and (
            min_duration_ms < 0
            or (
                meta.start_timestamp_ms != NO_TIMESTAMP
                and now_wall_ms - meta.start_timestamp_ms >= min_duration_ms
            )
        )
    ]


def verify_partitions(
    transactions: Mapping[str, TransactionMetadata],
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn's verify-only form (KIP-890 part 1): a partition leader asks,
    before it appends a transactional batch, whether its partition is in the
    producer's open transaction; one that is not makes the transaction abortable."""
    wanted = frozenset(partitions)
    meta = transactions.get(transactional_id)
    if not transactional_id:
        error = E.INVALID_REQUEST
    elif meta is None or meta.producer_id != producer_id:
        error = E.INVALID_PRODUCER_ID_MAPPING
    elif meta.producer_epoch != producer_epoch:
        error = E.PRODUCER_FENCED
    elif meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        error = E.CONCURRENT_TRANSACTIONS
    else:
        return {tp: E.NONE if tp in meta.partitions else E.TRANSACTION_ABORTABLE for tp in wanted}
    return dict.fromkeys(wanted, error)

"""InitProducerId's rules for a producer's id and epoch (KIP-360): which producer may
still claim a transactional id, and the epoch it gets."""

from __future__ import annotations

from herdless.coordinator.transactions.metadata import MAX_PRODUCER_EPOCH, TransactionMetadata
from herdless.coordinator.transactions.records import NO_PRODUCER_EPOCH


def producer_id_matches(meta: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """Whether a recovering producer's id and epoch still belong to this transactional
    id: it was just created, the ids match (the epoch is checked next), or a retry after
    a rotation the producer never heard of."""
    return (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == meta.producer_id
        or (producer_id == meta.previous_producer_id and producer_epoch >= MAX_PRODUCER_EPOCH - 1)
    )


def bump_epoch(meta: TransactionMetadata, expected_epoch: int | None) -> tuple[int, int] | None:
    """InitProducerId's (epoch, last epoch), None when the producer is fenced."""
    bumped = meta.producer_epoch + 1
    if expected_epoch is None:
        return bumped, NO_PRODUCER_EPOCH
    if meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
        return bumped, meta.producer_epoch
    if expected_epoch == meta.last_producer_epoch:
        # A retry of a call that went through: the epoch it was given.
        return meta.producer_epoch, meta.last_producer_epoch
    return None

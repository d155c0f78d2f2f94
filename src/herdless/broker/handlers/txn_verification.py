"""KIP-890: before a transaction's first batch is appended to a partition, its leader
asks the transaction coordinator whether the partition is in the producer's open
transaction (`transaction.partition.verification.enable`, on by default); from
Produce v12 (a transaction version 2 producer, which sends no AddPartitionsToTxn) it
asks the coordinator to add the partition instead (KIP-890 part 2).

Without it, a batch delayed past its transaction's end (a hanging transaction) would
open a transaction no coordinator knows of and hold the last stable offset back for
good. A batch whose producer already has a transaction open in the partition was
verified when that transaction's first batch came, so only first batches are asked
about. The coordinator's answer takes time: the transaction may end meanwhile, so
each partition asked about gets a verification guard before the question goes out,
and the append carries it (storage/verification_guard.py). The coordinator's answers
become the codes a producer of the request's version handles, as Kafka maps them.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from herdless.broker import clock
from herdless.broker.replication.replica_manager import PartitionError
from herdless.coordinator.internal_topics import OFFSETS_TOPIC
from herdless.coordinator.runtime import TopicPartition
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import InvalidBatch, parse_header
from herdless.storage import StorageError, VerificationGuard
from herdless.storage.verification_guard import SENTINEL

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

# Produce from v11 on knows TRANSACTION_ABORTABLE; older producers get INVALID_TXN_STATE.
TRANSACTION_ABORTABLE_PRODUCE_VERSION = 11
# From v12 a transactional Produce adds its partitions to the transaction itself.
ADD_PARTITION_PRODUCE_VERSION = 12
# The coordinator could not answer now: a produce error a producer retries.
_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


@dataclass
class Verified:
    """What verifying a transactional Produce decided, by (topic, partition)."""

    # The partitions whose batch may not be appended, with the error to answer.
    refused: dict[tuple[str, int], ErrorCode] = field(default_factory=dict)
    # The guard each partition's append carries; none for a partition not verified.
    guards: dict[tuple[str, int], VerificationGuard] = field(default_factory=dict)


async def verify_transactional_batches(
    context: BrokerContext,
    transactional_id: str,
    topic_data: Iterable[Any],
    refused_topics: set[str],
    produce_version: int,
) -> Verified:
    """Verify (or, from Produce v12, add) the partitions of a transactional Produce with
    the coordinator: which may not be appended, and the guard each append carries."""
    verified = Verified()
    coordinator = context.transactions
    add = produce_version >= ADD_PARTITION_PRODUCE_VERSION
    # Verification may be turned off; adding may not, as in Kafka: a transaction version
    # 2 producer relies on it to put its partitions in the transaction at all.
    if coordinator is None or not (add or context.config.transaction_partition_verification_enable):
        return verified
    asking: dict[tuple[int, int], list[TopicPartition]] = defaultdict(list)
    now_ms = clock.wall_ms()
    for topic in topic_data:
        if topic.name in refused_topics:
            continue
        for partition_data in topic.partition_data:
            try:
                header = parse_header(partition_data.records or b"")
                partition_log = context.replicas.leader_log(topic.name, partition_data.index)
                if not header.is_transactional:
                    continue
                guard = partition_log.start_transaction_verification(
                    header.producer_id, header.producer_epoch, now_ms
                )
            except (InvalidBatch, PartitionError, StorageError):
                continue  # the append answers for it
            verified.guards[topic.name, partition_data.index] = guard
            if guard is not SENTINEL:
                asking[header.producer_id, header.producer_epoch].append(
                    TopicPartition(topic.name, partition_data.index)
                )
    for (producer_id, producer_epoch), partitions in asking.items():
        errors = await coordinator.add_or_verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions, add
        )
        for tp, error in errors.items():
            if error != ErrorCode.NONE:
                answered = _produce_error(error, produce_version)
                verified.refused[tp.topic, tp.partition] = answered
                log.info(
                    "refused a batch of transactional id %s (producer id %d epoch %d) for %s"
                    " with %s: the coordinator answered %s%s",
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    tp,
                    answered.name,
                    error.name,
                    " (the partition is not in its transaction: no AddPartitionsToTxn)"
                    if error == ErrorCode.TRANSACTION_ABORTABLE
                    else "",
                )
    return verified


def _produce_error(error: ErrorCode, produce_version: int) -> ErrorCode:
    if error in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    old_producer = produce_version < TRANSACTION_ABORTABLE_PRODUCE_VERSION
    if error == ErrorCode.TRANSACTION_ABORTABLE and old_producer:
        return ErrorCode.INVALID_TXN_STATE
    return error


async def add_offsets_partition(
    context: BrokerContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    group_id: str,
) -> ErrorCode:
    """TxnOffsetCommit v5+ from a transaction version 2 producer, which sends no
    AddOffsetsToTxn: the group's `__consumer_offsets` partition is added to the
    transaction here, so that its marker reaches the commit (KIP-890 part 2, Kafka's
    implicit AddOffsetsToTxn). NONE at once when the producer's transaction already
    holds that partition; else the coordinator's answer as the commit answers it."""
    coordinator = context.transactions
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    tp = TopicPartition(OFFSETS_TOPIC, context.groups.partition(group_id))
    try:
        offsets_log = context.replicas.leader_log(tp.topic, tp.partition)
        if offsets_log.producers.has_ongoing_transaction(producer_id, producer_epoch):
            return ErrorCode.NONE
    except PartitionError:
        pass  # the commit itself answers for a group this broker does not coordinate
    errors = await coordinator.add_or_verify_partitions(
        transactional_id, producer_id, producer_epoch, [tp], add=True
    )
    error = errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
    if error == ErrorCode.NONE:
        return error
    # As Kafka's group coordinator answers a failed verification: what the coordinator
    # could not do now, the producer retries; a fenced producer is told so.
    answered = (
        ErrorCode.COORDINATOR_NOT_AVAILABLE
        if error in _RETRIABLE
        else ErrorCode.INVALID_PRODUCER_EPOCH
        if error == ErrorCode.PRODUCER_FENCED
        else error
    )
    log.info(
        "TxnOffsetCommit of transactional id %s (producer id %d epoch %d) for group %s"
        " refused with %s: adding %s to its transaction, the coordinator answered %s",
        transactional_id,
        producer_id,
        producer_epoch,
        group_id,
        answered.name,
        tp,
        error.name,
    )
    return answered

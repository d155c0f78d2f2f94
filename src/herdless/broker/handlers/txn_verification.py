"""KIP-890 part 1: before a transaction's first batch is appended to a partition, its
leader asks the transaction coordinator whether the partition is in the producer's
open transaction (`transaction.partition.verification.enable`, on by default).

Without it, a batch delayed past its transaction's end (a hanging transaction) would
open a transaction no coordinator knows of and hold the last stable offset back for
good. A batch whose producer already has a transaction open in the partition was
verified when that transaction's first batch came, so only first batches are asked
about. The coordinator's answers become the codes a producer of the request's version
handles, as Kafka maps them.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from herdless.broker.replication.replica_manager import PartitionError
from herdless.coordinator.runtime import TopicPartition
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import InvalidBatch, parse_header

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

# Produce from v11 on knows TRANSACTION_ABORTABLE; older producers get INVALID_TXN_STATE.
TRANSACTION_ABORTABLE_PRODUCE_VERSION = 11
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


async def verify_transactional_batches(
    context: BrokerContext,
    transactional_id: str,
    topic_data: Iterable[Any],
    refused_topics: set[str],
    produce_version: int,
) -> dict[tuple[str, int], ErrorCode]:
    """The partitions of a transactional Produce whose batch may not be appended, with
    the error to answer for each; the others are appended as any produce's."""
    coordinator = context.transactions
    if coordinator is None or not context.config.transaction_partition_verification_enable:
        return {}
    asking: dict[tuple[int, int], list[TopicPartition]] = defaultdict(list)
    for topic in topic_data:
        if topic.name in refused_topics:
            continue
        for partition_data in topic.partition_data:
            try:
                header = parse_header(partition_data.records or b"")
                partition_log = context.replicas.leader_log(topic.name, partition_data.index)
            except (InvalidBatch, PartitionError):
                continue  # the append answers for it
            if not header.is_transactional:
                continue
            entry = partition_log.producers.entry(header.producer_id)
            if entry is not None and entry.in_transaction and entry.epoch == header.producer_epoch:
                continue
            asking[header.producer_id, header.producer_epoch].append(
                TopicPartition(topic.name, partition_data.index)
            )
    refused: dict[tuple[str, int], ErrorCode] = {}
    for (producer_id, producer_epoch), partitions in asking.items():
        errors = await coordinator.verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )
        for tp, error in errors.items():
            if error != ErrorCode.NONE:
                answered = refused[tp.topic, tp.partition] = _produce_error(error, produce_version)
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
    return refused


def _produce_error(error: ErrorCode, produce_version: int) -> ErrorCode:
    if error in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    old_producer = produce_version < TRANSACTION_ABORTABLE_PRODUCE_VERSION
    if error == ErrorCode.TRANSACTION_ABORTABLE and old_producer:
        return ErrorCode.INVALID_TXN_STATE
    return error

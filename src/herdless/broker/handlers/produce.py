"""Produce and InitProducerId."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from herdless.broker.coordinators.group_coordinator import INTERNAL_TOPICS, REBALANCES_TOPIC
from herdless.broker.coordinators.history_forwarder import FORWARDING_CLIENT_ID_PREFIX
from herdless.broker.handlers.authorization import (
    REFUSALS,
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
    authorized_names,
)
from herdless.broker.handlers.transactions import handle_transactional_init
from herdless.broker.handlers.txn_verification import Verified, verify_transactional_batches
from herdless.broker.replication.replica_manager import PartitionError
from herdless.cluster.errors import ClusterError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.protocol.produced import produced_batch
from herdless.protocol.records import HEADER_SIZE, BatchHeader, InvalidBatch, parse_header
from herdless.security.acls import AclOperation, ResourceType
from herdless.storage import (
    OutOfOrderSequence,
    PartitionLog,
    RecordsRefused,
    StorageError,
    VerificationGuard,
)

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)


async def handle_produce(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.PRODUCE)
    TopicResponse = Response.TopicProduceResponse
    PartitionResponse = TopicResponse.PartitionProduceResponse
    acks = body.acks
    transactional_id = body.transactional_id
    # Topics the caller may not write to (Kafka answers each of their partitions).
    refused_topics: set[str] = set()
    refusal: ErrorCode | None = None
    if transactional_id is not None and not authorize(
        context, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        # As Kafka: WRITE on the transactional id first, then on each topic.
        refusal = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        if context.acls is not None:
            names = [t.name for t in body.topic_data]
            allowed = authorized_names(
                context, request, AclOperation.WRITE, ResourceType.TOPIC, names
            )
            refused_topics.update(name for name in names if name not in allowed)
        refusal = ErrorCode.INVALID_REQUIRED_ACKS if acks not in (-1, 0, 1) else None
    verified = Verified()
    if transactional_id is not None and refusal is None:
        verified = await verify_transactional_batches(
            context, transactional_id, body.topic_data, refused_topics, request.api_version
        )
    unverified = verified.refused

    appended: list[tuple[PartitionLog, int, Any]] = []
    topics = []
    for topic_data in body.topic_data:
        partitions = []
        unauthorized = topic_data.name in refused_topics
        for partition_data in topic_data.partition_data:
            result = PartitionResponse(index=partition_data.index, base_offset=-1)
            if unauthorized:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif refusal is not None:
                result.error_code = refusal
            elif (topic_data.name, partition_data.index) in unverified:
                result.error_code = unverified[topic_data.name, partition_data.index]
                if result.error_code == ErrorCode.INVALID_TXN_STATE:
                    result.error_message = "the partition was not added to the transaction"
            elif not _writable(topic_data.name, request.client_id):
                result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
                result.error_message = f"{topic_data.name} is internal: only brokers write to it"
            else:
                written = _append(
                    context,
                    topic_data.name,
                    partition_data,
                    acks,
                    result,
                    request.api_version,
                    verified.guards.get((topic_data.name, partition_data.index)),
                )
                if written is not None:
                    appended.append((*written, result))
            partitions.append(result)
        topics.append(TopicResponse(name=topic_data.name, partition_responses=partitions))

    # The answer waits until each append may be acknowledged: the flush policy met
    # (producers share fsyncs) and, for acks=all, the in-sync replicas have it.
    for partition_log, end_offset, result in appended:
        try:
            await context.replicas.committed(partition_log, acks, end_offset, body.timeout_ms)
        except PartitionError as exc:
            result.error_code = exc.error_code
            result.error_message = exc.message
    if acks == 0:
        return None
    return Response(responses=topics, throttle_time_ms=0)


def _writable(topic: str, client_id: str | None) -> bool:
    if topic not in INTERNAL_TOPICS:
        return True
    # Another broker forwards the rebalance history of the groups it coordinates.
    return (
        topic == REBALANCES_TOPIC
        and client_id is not None
        and client_id.startswith(FORWARDING_CLIENT_ID_PREFIX)
    )


def _append(
    context: BrokerContext,
    topic: str,
    partition_data: Any,
    acks: int,
    result: Any,
    api_version: int,
    verification: VerificationGuard | None,
) -> tuple[PartitionLog, int] | None:
    """Append one partition's batch and fill in `result`; (log, end offset) if accepted.
    `verification`: the guard of its transactional batch's verification, if verified."""
    try:
        partition_log = context.replicas.leader_log(topic, partition_data.index)
        config = partition_log.config
        batches = produced_batch(
            partition_data.records or b"",
            api_version,
            max_batch_size=config.max_message_bytes,
            log_append_time=config.log_append_time,
        )
        info = context.replicas.append(partition_log, batches, acks, verification=verification)
    except InvalidBatch as exc:
        result.error_code = exc.error
        result.error_message = str(exc)
        log.info("refused a batch for %s-%d: %s", topic, partition_data.index, exc)
        return None
    except RecordsRefused as exc:
        # KIP-467: the batch is refused whole, naming the records at fault so that a
        # producer fails those and may send the others again.
        RecordError = type(result).BatchIndexAndErrorMessage
        result.error_code = exc.error_code
        result.error_message = str(exc)
        result.record_errors = [
            RecordError(batch_index=e.batch_index, batch_index_error_message=e.message)
            for e in exc.record_errors
        ]
        return None
    except (StorageError, PartitionError) as exc:
        result.error_code = exc.error_code
        result.error_message = str(exc)
        _note_refusal(context, topic, partition_data, exc, result)
        return None
    if len(context.replicas.refused_batches):
        context.replicas.refused_batches.written(topic, partition_data.index, batches[0][0])
    result.error_code = ErrorCode.NONE
    result.base_offset = info.first_offset
    result.log_append_time_ms = info.log_append_time_ms
    result.log_start_offset = info.log_start_offset
    return partition_log, info.last_offset + 1


def _note_refusal(
    context: BrokerContext,
    topic: str,
    partition_data: Any,
    exc: StorageError | PartitionError,
    result: Any,
) -> None:
    """Remember an idempotent batch refused unwritten; a batch out of order behind one
    gets that refusal again instead (refused_batches.py)."""
    header = _producer_header(partition_data.records)
    if header is None:
        return
    refused = context.replicas.refused_batches
    error = ErrorCode(exc.error_code)
    if isinstance(exc, OutOfOrderSequence):
        cause = refused.gap_cause(topic, partition_data.index, header)
        if cause is None:
            return
        error = result.error_code = cause
        result.error_message = (
            f"{exc}: the batch before it was refused ({cause.name}); send both again"
        )
    refused.refused(topic, partition_data.index, header, error)


def _producer_header(records: bytes | None) -> BatchHeader | None:
    """The header of a magic 2 batch, whose producer fields are set; None for records
    too short to hold one or of an older format."""
    if records is None or len(records) < HEADER_SIZE:
        return None
    header = parse_header(records)
    return header if header.magic == 2 else None


async def handle_init_producer_id(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.INIT_PRODUCER_ID)
    if request.body.transactional_id is not None:
        return await handle_transactional_init(context, request)
    if not _may_write_idempotently(context, request):
        return Response(
            throttle_time_ms=0,
            error_code=REFUSALS[ResourceType.CLUSTER][0],
            producer_id=-1,
            producer_epoch=-1,
        )
    try:
        producer_id = await context.producer_ids.next_id()
    except (ClusterError, StorageError) as exc:
        # Ids come in blocks, reserved in ZooKeeper or on disk; the client retries this.
        log.warning("no producer id to hand out: %s", exc)
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            producer_id=-1,
            producer_epoch=-1,
        )
    return Response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0
    )


def _may_write_idempotently(context: BrokerContext, request: Request) -> bool:
    """An idempotent producer's id: IDEMPOTENT_WRITE on the cluster or, since Kafka 2.8
    (KIP-679), WRITE on any topic, which every producer has where it writes."""
    if context.acls is None:
        return True
    return authorize_cluster(
        context, request, AclOperation.IDEMPOTENT_WRITE, log_denied=False
    ) or authorize_by_resource_type(context, request, AclOperation.WRITE, ResourceType.TOPIC)

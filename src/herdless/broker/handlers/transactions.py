"""The transaction APIs: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, WriteTxnMarkers, DescribeTransactions, ListTransactions.

Each asks Kafka's authorization first (WRITE or DESCRIBE on the transactional id,
CLUSTER_ACTION for what only brokers send), then runs on the transactional id's shard
of the transaction coordinator, answering NOT_COORDINATOR or
COORDINATOR_LOAD_IN_PROGRESS from the runtime as the group APIs do. EndTxn's answer
is sent once its Prepare* record is committed, and its markers are written after.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import defaultdict
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from herdless.broker import clock
from herdless.broker.coordinators.coordinator_loop import CoordinatorError
from herdless.broker.coordinators.transaction_coordinator import TransactionCoordinator
from herdless.broker.coordinators.txn_markers import append_marker
from herdless.broker.handlers.authorization import (
    authorize,
    authorize_cluster,
    authorized_names,
)
from herdless.broker.producer_ids import ProducerIdsNotReady
from herdless.coordinator import Now
from herdless.coordinator.runtime import TopicPartition
from herdless.coordinator.transactions import (
    EndTxnAnswer,
    ProducerIdAndEpoch,
    TransactionCoordinatorShard,
    TransactionMetadata,
    TransactionState,
)
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# EndTxn from v5 on is a transaction version 2 client's (KIP-890 part 2: an epoch bump
# per transaction).
END_TXN_EPOCH_BUMP_VERSION = 5
# AddPartitionsToTxn from v4 on is the batched form brokers send (KIP-890 part 1).
BATCHED_ADD_PARTITIONS_VERSION = 4
STATE_NAMES = frozenset(state.state_name for state in TransactionState)


class _NoCoordinator(Exception):
    def __init__(self, error_code: ErrorCode) -> None:
        self.error_code = error_code


def _coordinator(context: BrokerContext) -> TransactionCoordinator:
    if context.transactions is None:
        raise _NoCoordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return context.transactions


async def _run(context: BrokerContext, transactional_id: str, operation: Any) -> Any:
    """Run a write on the id's shard; _NoCoordinator with the code to answer if it cannot
    run here now."""
    try:
        return await _coordinator(context).run(transactional_id, operation)
    except CoordinatorError as exc:
        raise _NoCoordinator(exc.error_code) from None
    except ProducerIdsNotReady:
        # As Kafka's ProducerIdManager while it fetches the next block: retriable.
        raise _NoCoordinator(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) from None


# -- InitProducerId -----------------------------------------------------------------------


async def handle_transactional_init(context: BrokerContext, request: Request) -> Any:
    """InitProducerId for a transactional id (produce.py serves the idempotent form)."""
    body = request.body
    Response = response_class(ApiKey.INIT_PRODUCER_ID)
    transactional_id: str = body.transactional_id

    def answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Any:
        return Response(
            throttle_time_ms=0, error_code=error, producer_id=producer_id, producer_epoch=epoch
        )

    if not authorize(
        context, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    producer_id = getattr(body, "producer_id", NO_PRODUCER_ID)
    producer_epoch = getattr(body, "producer_epoch", NO_PRODUCER_EPOCH)
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        # KIP-360: a producer recovering sends both, a new one neither.
        return answer(ErrorCode.INVALID_REQUEST)
    expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
    before: list[TransactionMetadata | None] = []

    def operation(shard: TransactionCoordinatorShard, token: Hashable, now: Now) -> Any:
        before.append(shard.transactions.transactions.get(transactional_id))
        return shard.init_producer_id(
            transactional_id, body.transaction_timeout_ms, expected, token, now
        )

    try:
        result: ProducerIdAndEpoch = await _run(context, transactional_id, operation)
    except _NoCoordinator as exc:
        return answer(exc.error_code)
    _log_fencing(
        _coordinator(context), transactional_id, before[0] if before else None, result, expected
    )
    if result.error_code == ErrorCode.CONCURRENT_TRANSACTIONS:
        # The transaction this producer waits on (one it fenced, or one ending) gets its
        # markers now, not at the next sweep.
        coordinator = _coordinator(context)
        coordinator.look_for_markers(coordinator.partition(transactional_id))
    return answer(result.error_code, result.producer_id, result.producer_epoch)


def _log_fencing(
    coordinator: TransactionCoordinator,
    transactional_id: str,
    before: TransactionMetadata | None,
    result: ProducerIdAndEpoch,
    expected: tuple[int, int] | None,
) -> None:
    """Say once when a new producer with the id fences the one before it (its retry
    after the fenced transaction's abort is the same fence)."""
    if before is None or before.producer_epoch < 0 or expected is not None:
        return
    if result.error_code == ErrorCode.CONCURRENT_TRANSACTIONS and before.state in (
        TransactionState.ONGOING,
    ):
        coordinator.producer_fenced(transactional_id, aborting=True)
        log.info(
            "transactional id %s: a new producer fenced producer id %d epoch %d; aborting"
            " its open transaction",
            transactional_id,
            before.producer_id,
            before.producer_epoch,
        )
    elif (
        result.error_code == ErrorCode.NONE
        and before.state is not TransactionState.PREPARE_ABORT
        and coordinator.producer_fenced(transactional_id, aborting=False)
    ):
        log.info(
            "transactional id %s: a new producer fenced producer id %d epoch %d (now producer"
            " id %d epoch %d)",
            transactional_id,
            before.producer_id,
            before.producer_epoch,
            result.producer_id,
            result.producer_epoch,
        )


# -- AddPartitionsToTxn -------------------------------------------------------------------


async def handle_add_partitions_to_txn(context: BrokerContext, request: Request) -> Any:
    if request.api_version >= BATCHED_ADD_PARTITIONS_VERSION:
        return await _add_partitions_batched(context, request)
    body = request.body
    Response = response_class(ApiKey.ADD_PARTITIONS_TO_TXN)
    transactional_id: str = body.v3_and_below_transactional_id
    wanted = {
        TopicPartition(topic.name, index): ErrorCode.NONE
        for topic in body.v3_and_below_topics
        for index in topic.partitions
    }
    errors = await _add_partitions(
        context,
        request,
        transactional_id,
        body.v3_and_below_producer_id,
        body.v3_and_below_producer_epoch,
        wanted,
    )
    return Response(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(errors))


async def _add_partitions(
    context: BrokerContext,
    request: Request,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    wanted: dict[TopicPartition, ErrorCode],
) -> dict[TopicPartition, ErrorCode]:
    """A client's AddPartitionsToTxn: Kafka's checks, then the coordinator's answer."""
    if not authorize(
        context, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    topics = {tp.topic for tp in wanted}
    allowed = (
        topics
        if context.acls is None
        else authorized_names(context, request, AclOperation.WRITE, ResourceType.TOPIC, topics)
    )
    refused: dict[TopicPartition, ErrorCode] = {}
    for tp in wanted:
        if tp.topic not in allowed:
            refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not _exists(context, tp):
            refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        # As Kafka: nothing is added, and the partitions at fault are named.
        return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    try:
        return await _run(
            context,
            transactional_id,
            lambda shard, token, now: shard.add_partitions(
                transactional_id, producer_id, producer_epoch, list(wanted), token, now
            ),
        )
    except _NoCoordinator as exc:
        return dict.fromkeys(wanted, exc.error_code)


def _exists(context: BrokerContext, tp: TopicPartition) -> bool:
    count = context.metadata.partition_count(tp.topic)
    return count is not None and 0 <= tp.partition < count


async def _add_partitions_batched(context: BrokerContext, request: Request) -> Any:
    """The broker form (KIP-890): many transactions at once, each verify-only (is the
    partition already in the transaction?) or an add on the producer's behalf."""
    body = request.body
    Response = response_class(ApiKey.ADD_PARTITIONS_TO_TXN)
    Result = Response.AddPartitionsToTxnResult
    if not authorize_cluster(context, request, AclOperation.CLUSTER_ACTION):
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            results_by_transaction=[],
        )
    results = await asyncio.gather(
        *(_one_batched(context, transaction) for transaction in body.transactions)
    )
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        results_by_transaction=[
            Result(transactional_id=t.transactional_id, topic_results=_topic_results(errors))
            for t, errors in zip(body.transactions, results, strict=True)
        ],
    )


async def _one_batched(context: BrokerContext, transaction: Any) -> dict[TopicPartition, ErrorCode]:
    txn_id: str = transaction.transactional_id
    wanted = [TopicPartition(t.name, p) for t in transaction.topics for p in t.partitions]
    try:
        coordinator = _coordinator(context)
        if transaction.verify_only:
            try:
                return await coordinator.read(
                    coordinator.partition(txn_id),
                    lambda shard: shard.verify_partitions(
                        txn_id, transaction.producer_id, transaction.producer_epoch, wanted
                    ),
                )
            except CoordinatorError as exc:
                raise _NoCoordinator(exc.error_code) from None
        return await _run(
            context,
            txn_id,
            lambda shard, token, now: shard.add_partitions(
                txn_id,
                transaction.producer_id,
                transaction.producer_epoch,
                wanted,
                token,
                now,
                client_transaction_version=2,
            ),
        )
    except _NoCoordinator as exc:
        return dict.fromkeys(wanted, exc.error_code)


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[Any]:
    TopicResult = response_class(ApiKey.ADD_PARTITIONS_TO_TXN).AddPartitionsToTxnTopicResult
    PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for tp, error in errors.items():
        by_topic[tp.topic].append(
            PartitionResult(partition_index=tp.partition, partition_error_code=error)
        )
    return [
        TopicResult(name=name, results_by_partition=partitions)
        for name, partitions in by_topic.items()
    ]


# -- AddOffsetsToTxn ----------------------------------------------------------------------


async def handle_add_offsets_to_txn(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.ADD_OFFSETS_TO_TXN)
    txn_id: str = body.transactional_id
    if not authorize(context, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return Response(
            throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
    if not authorize(context, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        error = await _run(
            context,
            txn_id,
            lambda shard, token, now: shard.add_offsets(
                txn_id, body.producer_id, body.producer_epoch, body.group_id, token, now
            ),
        )
    except _NoCoordinator as exc:
        error = exc.error_code
    return Response(throttle_time_ms=0, error_code=error)


# -- EndTxn -------------------------------------------------------------------------------


async def handle_end_txn(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.END_TXN)
    txn_id: str = body.transactional_id
    if not authorize(context, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return Response(
            throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
    version = 2 if request.api_version >= END_TXN_EPOCH_BUMP_VERSION else 0
    try:
        coordinator = _coordinator(context)
        answer: EndTxnAnswer = await _run(
            context,
            txn_id,
            lambda shard, token, now: shard.end_transaction(
                txn_id, body.producer_id, body.producer_epoch, body.committed, token, now, version
            ),
        )
    except _NoCoordinator as exc:
        return Response(throttle_time_ms=0, error_code=exc.error_code)
    if answer.markers is not None:
        coordinator.send_markers(coordinator.partition(txn_id), answer.markers)
    elif answer.response.error_code != ErrorCode.NONE:
        log.info(
            "EndTxn of transactional id %s (producer id %d epoch %d, %s) refused: %s",
            txn_id,
            body.producer_id,
            body.producer_epoch,
            "commit" if body.committed else "abort",
            answer.response.error_code.name,
        )
    response = answer.response
    return Response(
        throttle_time_ms=0,
        error_code=response.error_code,
        producer_id=response.producer_id,
        producer_epoch=response.producer_epoch,
    )


# -- WriteTxnMarkers ----------------------------------------------------------------------


async def handle_write_txn_markers(context: BrokerContext, request: Request) -> Any:
    """A coordinator's markers for partitions this broker leads: appended as control
    batches and answered once committed as an acks=all produce is."""
    body = request.body
    Response = response_class(ApiKey.WRITE_TXN_MARKERS)
    MarkerResult = Response.WritableTxnMarkerResult
    TopicResult = MarkerResult.WritableTxnMarkerTopicResult
    PartitionResult = TopicResult.WritableTxnMarkerPartitionResult
    allowed = authorize_cluster(context, request, AclOperation.CLUSTER_ACTION)
    results = []
    for marker in body.markers:
        tps = [TopicPartition(t.name, p) for t in marker.topics for p in t.partition_indexes]
        if allowed:
            errors = await asyncio.gather(
                *(
                    append_marker(
                        context.replicas,
                        context.groups,
                        tp,
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.coordinator_epoch,
                        marker.transaction_result,
                        # v2 (KIP-1228): the transaction's version, for the epoch check.
                        getattr(marker, "transaction_version", 0),
                    )
                    for tp in tps
                )
            )
        else:
            errors = [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * len(tps)
        refused = {
            str(tp): e.name for tp, e in zip(tps, errors, strict=True) if e != ErrorCode.NONE
        }
        if refused:
            # The coordinator looks for the leaders again and retries (txn_markers.py).
            log.info(
                "WriteTxnMarkers from %s: markers of producer id %d refused: %s",
                request.client_id,
                marker.producer_id,
                ", ".join(f"{tp} {name}" for tp, name in sorted(refused.items())),
            )
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for tp, error in zip(tps, errors, strict=True):
            by_topic[tp.topic].append(
                PartitionResult(partition_index=tp.partition, error_code=error)
            )
        results.append(
            MarkerResult(
                producer_id=marker.producer_id,
                topics=[TopicResult(name=n, partitions=ps) for n, ps in by_topic.items()],
            )
        )
    return Response(markers=results)


# -- DescribeTransactions and ListTransactions --------------------------------------------


async def handle_describe_transactions(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DESCRIBE_TRANSACTIONS)
    State = Response.TransactionState
    states = []
    for txn_id in request.body.transactional_ids:
        found: TransactionMetadata | ErrorCode
        if not authorize(
            context, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id
        ):
            found = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            try:
                coordinator = _coordinator(context)
                found = await coordinator.read(
                    coordinator.partition(txn_id), lambda shard, i=txn_id: shard.describe(i)
                )
            except _NoCoordinator as exc:
                found = exc.error_code
            except CoordinatorError as exc:
                found = exc.error_code
        if isinstance(found, ErrorCode):
            states.append(
                State(
                    error_code=found,
                    transactional_id=txn_id,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=[],
                )
            )
            continue
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in sorted(found.partitions):
            by_topic[tp.topic].append(tp.partition)
        visible = (
            set(by_topic)
            if context.acls is None
            else authorized_names(
                context,
                request,
                AclOperation.DESCRIBE,
                ResourceType.TOPIC,
                by_topic,
                log_denied=False,
            )
        )
        states.append(
            State(
                error_code=ErrorCode.NONE,
                transactional_id=txn_id,
                transaction_state=found.state.state_name,
                transaction_timeout_ms=found.timeout_ms,
                transaction_start_time_ms=found.start_timestamp_ms,
                producer_id=found.producer_id,
                producer_epoch=found.producer_epoch,
                topics=[
                    State.TopicData(topic=name, partitions=partitions)
                    for name, partitions in by_topic.items()
                    if name in visible
                ],
            )
        )
    return Response(throttle_time_ms=0, transaction_states=states)


async def handle_list_transactions(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.LIST_TRANSACTIONS)
    State = Response.TransactionState
    wanted_states = list(body.state_filters or ())
    unknown = [name for name in wanted_states if name not in STATE_NAMES]
    duration = getattr(body, "duration_filter", -1)
    error = ErrorCode.NONE
    listed: list[TransactionMetadata] = []
    coordinator = context.transactions
    pattern = _transactional_id_pattern(getattr(body, "transactional_id_pattern", None))
    if isinstance(pattern, ErrorCode):
        error = pattern
    elif coordinator is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        now = clock.wall_ms()
        for partition in coordinator.coordinating():
            try:
                listed.extend(
                    await coordinator.read(
                        partition,
                        lambda shard: shard.list_transactions(
                            wanted_states, body.producer_id_filters or (), duration, now, pattern
                        ),
                    )
                )
            except CoordinatorError as exc:
                if exc.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    error = exc.error_code
    visible = (
        {meta.transactional_id for meta in listed}
        if context.acls is None
        else authorized_names(
            context,
            request,
            AclOperation.DESCRIBE,
            ResourceType.TRANSACTIONAL_ID,
            [meta.transactional_id for meta in listed],
            log_denied=False,
        )
    )
    return Response(
        throttle_time_ms=0,
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=[
            State(
                transactional_id=meta.transactional_id,
                producer_id=meta.producer_id,
                transaction_state=meta.state.state_name,
            )
            for meta in listed
            if meta.transactional_id in visible
        ],
    )


def _transactional_id_pattern(given: str | None) -> re.Pattern[str] | ErrorCode | None:
    """ListTransactions v2's TransactionalIdPattern (KIP-1152): none when null or empty,
    INVALID_REGULAR_EXPRESSION when it does not compile, as Kafka answers."""
    if not given:
        return None
    try:
        return re.compile(given)
    except re.error as exc:
        log.info("ListTransactions refused: transactional id pattern %r: %s", given, exc)
        return ErrorCode.INVALID_REGULAR_EXPRESSION

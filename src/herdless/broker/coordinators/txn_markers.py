"""Writing a transaction's markers on its partitions' leaders (Kafka's
TransactionMarkerChannelManager), and appending one marker where this broker leads.

The coordinator writes one COMMIT or ABORT marker into every partition of an ended
transaction: appended here for partitions this broker leads, sent as WriteTxnMarkers
to the leader of the others over the inter-broker connection, one request per leader
naming all its partitions. A partition that moved, a leader that is down, a timeout:
each is tried again with fresh metadata until every marker is written, for as long as
this broker still coordinates the transaction. A marker a leader refuses as fenced
(an older producer epoch or coordinator epoch than it has seen) ends the attempt: a
newer coordinator owns the transaction.

A marker for a partition of `__consumer_offsets` goes through the group coordinator,
which makes the offsets the transaction committed visible (or drops them) with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

from herdless.broker import clock
from herdless.broker.peers.connection import PeerError, PeerSecurity
from herdless.broker.peers.pool import PeerPool
from herdless.broker.replication.replica_manager import ACKS_ALL, PartitionError, ReplicaManager
from herdless.cluster.metadata import BrokerEndpoint
from herdless.coordinator.internal_topics import OFFSETS_TOPIC
from herdless.coordinator.runtime import TopicPartition
from herdless.coordinator.transactions import TxnMarkers
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    build_marker_batch,
)
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import parse_header
from herdless.storage import StorageError

if TYPE_CHECKING:
    from herdless.broker.coordinators.group_coordinator import GroupCoordinator

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 2
ADD_PARTITIONS_VERSION = 4
# How long a marker's append may wait to be committed, and a request to another broker.
MARKER_TIMEOUT_MS = 10_000
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0
# Errors after which the coordinator stops: a newer coordinator owns the transaction.
FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
_NOT_SERVING = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)
# The client id markers are sent with, then the broker's id.
MARKER_CLIENT_ID_PREFIX = "herdless-txn-markers-"


async def append_marker(
    replicas: ReplicaManager,
    groups: GroupCoordinator,
    tp: TopicPartition,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    committed: bool,
    transaction_version: int = 0,
) -> ErrorCode:
    """Append one marker to a partition this broker leads and wait until it is
    committed as an acks=all produce would: the error code WriteTxnMarkers answers.
    `transaction_version`: the transaction's, as WriteTxnMarkers v2 carries it."""
    if tp.topic == OFFSETS_TOPIC:
        error = await groups.complete_transaction(
            tp.partition, producer_id, producer_epoch, coordinator_epoch, committed
        )
        # A coordinator that does not serve the partition is a replica that does not lead
        # it, to the sender, as Kafka answers: it looks for the leader again and retries.
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if error in _NOT_SERVING else error
    marker = EndTransactionMarker(
        ControlRecordType.COMMIT if committed else ControlRecordType.ABORT, coordinator_epoch
    )
    try:
        partition_log = replicas.leader_log(tp.topic, tp.partition)
        batch = memoryview(build_marker_batch(marker, producer_id, producer_epoch, clock.wall_ms()))
        info = replicas.append(
            partition_log,
            [(parse_header(batch), batch)],
            ACKS_ALL,
            transaction_version=transaction_version,
        )
        await replicas.committed(partition_log, ACKS_ALL, info.last_offset + 1, MARKER_TIMEOUT_MS)
    except (StorageError, PartitionError) as exc:
        return exc.error_code
    return ErrorCode.NONE


class MarkerWriter:
    def __init__(
        self,
        node_id: int,
        replicas: ReplicaManager,
        groups: GroupCoordinator,
        leader_of: Callable[[str, int], BrokerEndpoint | None],
        topic_exists: Callable[[str], bool],
        security: PeerSecurity | None = None,
    ) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.groups = groups
        self.leader_of = leader_of
        self._topic_exists = topic_exists
        self._security = security
        self._peers = PeerPool(
            f"{MARKER_CLIENT_ID_PREFIX}{node_id}", MARKER_TIMEOUT_MS / 1000, security
        )

    async def write(
        self, markers: TxnMarkers, coordinator_epoch: int, coordinating: Callable[[], bool]
    ) -> bool:
        """Write every marker of `markers`; False if the attempt ended first (fenced, or
        this broker no longer coordinates the transaction)."""
        pending = set(markers.partitions)
        backoff = FIRST_BACKOFF_S
        # Partitions whose marker failed once: said once, then retried quietly.
        said: set[TopicPartition] = set()
        while pending:
            if not coordinating():
                return False
            errors = await self._write_once(markers, coordinator_epoch, pending)
            for tp, error in errors.items():
                if error == ErrorCode.NONE:
                    pending.discard(tp)
                elif error in FENCED:
                    log.warning(
                        "transaction %s: the leader of %s refused its marker (%s); a newer"
                        " coordinator owns it",
                        markers.transactional_id,
                        tp,
                        error.name,
                    )
                    return False
            failed = {tp: e for tp, e in errors.items() if e != ErrorCode.NONE and tp not in said}
            if failed:
                said.update(failed)
                log.info(
                    "transaction %s: markers for %s not written yet (%s); retrying at their"
                    " current leaders",
                    markers.transactional_id,
                    ", ".join(sorted(map(str, failed))),
                    ", ".join(sorted({e.name for e in failed.values()})),
                )
            if pending:
                log.debug(
                    "transaction %s: markers for %s not written yet (%s); trying again",
                    markers.transactional_id,
                    sorted(map(str, pending)),
                    {str(tp): e.name for tp, e in errors.items() if e != ErrorCode.NONE},
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
        return True

    async def _write_once(
        self, markers: TxnMarkers, coordinator_epoch: int, partitions: set[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        errors: dict[TopicPartition, ErrorCode] = {}
        local: list[TopicPartition] = []
        remote: dict[int, tuple[BrokerEndpoint, list[TopicPartition]]] = {}
        for tp in partitions:
            if not self._topic_exists(tp.topic):
                # As Kafka: a deleted topic needs no marker.
                log.info(
                    "transaction %s: %s is gone; no marker for it",
                    markers.transactional_id,
                    tp,
                )
                errors[tp] = ErrorCode.NONE
            elif self.replicas.leads(tp.topic, tp.partition):
                local.append(tp)
            else:
                leader = self.leader_of(tp.topic, tp.partition)
                if leader is None or leader.node_id == self.node_id:
                    errors[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    remote.setdefault(leader.node_id, (leader, []))[1].append(tp)
        jobs = [self._append_local(markers, coordinator_epoch, tp) for tp in local]
        jobs.extend(
            self._send(leader, markers, coordinator_epoch, tps) for leader, tps in remote.values()
        )
        for found in await asyncio.gather(*jobs):
            errors.update(found)
        return errors

    async def _append_local(
        self, markers: TxnMarkers, coordinator_epoch: int, tp: TopicPartition
    ) -> dict[TopicPartition, ErrorCode]:
        error = await append_marker(
            self.replicas,
            self.groups,
            tp,
            markers.producer_id,
            markers.producer_epoch,
            coordinator_epoch,
            markers.committed,
            markers.transaction_version,
        )
        return {tp: error}

    async def _send(
        self,
        leader: BrokerEndpoint,
        markers: TxnMarkers,
        coordinator_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        by_topic = _by_topic(partitions)
        try:
            response = await self._peers.request(
                leader,
                ApiKey.WRITE_TXN_MARKERS,
                WRITE_TXN_MARKERS_VERSION,
                markers=[
                    {
                        "producer_id": markers.producer_id,
                        "producer_epoch": markers.producer_epoch,
                        "transaction_result": markers.committed,
                        "topics": [
                            {"name": topic, "partition_indexes": indexes}
                            for topic, indexes in by_topic.items()
                        ],
                        "coordinator_epoch": coordinator_epoch,
                        "transaction_version": markers.transaction_version,
                    }
                ],
            )
        except PeerError as exc:
            log.debug("WriteTxnMarkers to broker %d failed: %s", leader.node_id, exc)
            return dict.fromkeys(partitions, ErrorCode.REQUEST_TIMED_OUT)
        errors = dict.fromkeys(partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
        for result in response.markers:
            for topic in result.topics:
                for partition in topic.partitions:
                    tp = TopicPartition(topic.name, partition.partition_index)
                    if tp in errors:
                        errors[tp] = _error(partition.error_code)
        return errors

    async def add_or_verify_partitions(
        self,
        coordinator: BrokerEndpoint,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        """Ask the coordinator on another broker whether `partitions` are in the
        producer's transaction, or to add them (AddPartitionsToTxn's broker form,
        KIP-890)."""
        by_topic = _by_topic(partitions)
        try:
            response = await self._peers.request(
                coordinator,
                ApiKey.ADD_PARTITIONS_TO_TXN,
                ADD_PARTITIONS_VERSION,
                transactions=[
                    {
                        "transactional_id": transactional_id,
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "verify_only": not add,
                        "topics": [
                            {"name": topic, "partitions": indexes}
                            for topic, indexes in by_topic.items()
                        ],
                    }
                ],
            )
        except PeerError as exc:
            log.debug("verifying with broker %d failed: %s", coordinator.node_id, exc)
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        errors = dict.fromkeys(partitions, _error(response.error_code))
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for partition in topic.results_by_partition:
                    tp = TopicPartition(topic.name, partition.partition_index)
                    if tp in errors and response.error_code == ErrorCode.NONE:
                        errors[tp] = _error(partition.partition_error_code)
        return errors

    def close(self) -> None:
        self._peers.close()


def _error(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _by_topic(partitions: list[TopicPartition]) -> dict[str, list[int]]:
    """Partitions as a request names them: each topic once, with its partitions."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition)
    return by_topic

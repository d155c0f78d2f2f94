"""Writes the dead letters of a share group (KIP-1191): each record its share partition
archived unaccepted, as a record of the group's dead-letter topic with headers saying
the group, the original topic, partition and offset, the delivery count and why.

The share partition's leader writes them before it writes the archive through the
Persister (share_partition_manager.py), and each write is acks=all: once the archive is
durable, so are its dead letters. A write that fails is tried again a few times; if it
still fails the archive is not written either, the share partition is read back from
the Persister, and the records come back (Available, or archived again at load): the
dead letters are written on the next try. So a dead letter may be written twice (at
least once, as in Kafka), never not at all.

Two cases stop that promise, by design, both a topic that is not there for dead
letters: one that does not exist and that the broker may not create
(errors.deadletterqueue.auto.create.topics.enable, false by default, as in Kafka),
and one whose owner has not let share groups write to it (the topic config
errors.deadletterqueue.group.enable, KIP-1191's opt-in). Waiting for either would
stop the share group, so the records are archived without dead letters, and the
broker says so in its log and counts them in herdless_share_dead_letters_lost.
A topic the broker creates opts in.

Dead letters go to the partition of the dead-letter topic with the original's index,
wrapped round (Kafka's rule): here when this broker leads it, else to its leader as
a Produce.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from herdless.broker import clock
from herdless.broker.peers.connection import PeerError, PeerSecurity
from herdless.broker.peers.pool import PeerPool
from herdless.broker.replication.replica_manager import ACKS_ALL, PartitionError, ReplicaManager
from herdless.broker.share.dead_letter_metrics import DeadLetterMetrics
from herdless.broker.share.share_group_settings import DeadLetterTopic
from herdless.broker.topics.admin_errors import TopicAdminError
from herdless.broker.topics.topic_admin import NewTopic, TopicAdmin
from herdless.cluster.metadata import BrokerEndpoint
from herdless.coordinator.dead_letter_config import (
    InvalidDeadLetterTopic,
    check_dead_letter_topic,
)
from herdless.coordinator.share_partitions.dead_letters import (
    ArchivedRecord,
    dead_letter_headers,
    dead_letter_partition,
)
from herdless.coordinator.share_state.state import ShareStateError
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from herdless.protocol.record_headers import HeadedRecord, encode_headed_batch, iter_headed_records
from herdless.protocol.records import InvalidBatch, iter_batches, parse_header
from herdless.storage import StorageError

log = logging.getLogger(__name__)

PRODUCE_VERSION = 9
TIMEOUT_MS = 10_000
ATTEMPTS = 4
FIRST_BACKOFF_S = 0.1
# How much of the original partition one read takes when copying records.
READ_BYTES = 1 << 20
# Dead letters per batch: under any max.message.bytes when they carry headers alone.
BATCH_RECORDS = 500
# A batch carrying copies is closed past this many bytes of keys and values.
BATCH_BYTES = 512 * 1024
# The topic config by which a topic's owner lets share groups use it (KIP-1191).
DEAD_LETTER_TOPIC_ENABLE = "errors.deadletterqueue.group.enable"
# How often a topic just created is looked for in this broker's metadata.
CREATED_POLL_S = 0.05
# The client id dead letters are forwarded with, then the broker's id.
CLIENT_ID_PREFIX = "herdless-dead-letters-"


class DeadLetterError(ShareStateError):
    """Dead letters that could not be written: the archive must not be written either."""


class DeadLetterWriter:
    def __init__(
        self,
        node_id: int,
        replicas: ReplicaManager,
        topics: TopicAdmin,
        partition_count: Callable[[str], int | None],
        leader_of: Callable[[str, int], BrokerEndpoint | None] | None,
        metrics: DeadLetterMetrics,
        *,
        auto_create: bool = False,
        prefix: str = "",
        security: PeerSecurity | None = None,
    ) -> None:
        self._replicas = replicas
        self._topics = topics
        self._partition_count = partition_count
        # None on one broker: it leads every partition.
        self._leader_of = leader_of
        self._metrics = metrics
        self._auto_create = auto_create
        self._prefix = prefix
        self._peers = PeerPool(f"{CLIENT_ID_PREFIX}{node_id}", TIMEOUT_MS / 1000, security)

    async def write(
        self,
        group_id: str,
        topic: str,
        partition: int,
        records: Sequence[ArchivedRecord],
        target: DeadLetterTopic,
    ) -> None:
        """Write the dead letters of `records` (of `topic`-`partition`) to `target`; returns
        once they are committed, or at once if the topic is missing and not created or has
        not opted in (said and counted); DeadLetterError if they could not be written."""
        if not records:
            return
        partitions = await self._partitions(target.name)
        refusal = None
        if partitions is None:
            refusal = (
                "does not exist (create it with errors.deadletterqueue.group.enable=true, or"
                " set errors.deadletterqueue.auto.create.topics.enable=true)"
            )
        elif not self._opted_in(target.name):
            refusal = "does not set errors.deadletterqueue.group.enable=true"
        if partitions is None or refusal is not None:
            log.warning(
                "share group %s: %d records of %s-%d archived without dead letters: the"
                " dead-letter topic %s %s",
                group_id,
                len(records),
                topic,
                partition,
                target.name,
                refusal,
            )
            self._metrics.lost(group_id, target.name, len(records))
            return
        originals = self._originals(topic, partition, records) if target.copy_record else {}
        now = clock.wall_ms()
        entries = []
        for record in records:
            context = dead_letter_headers(group_id, topic, partition, record)
            original = originals.get(record.offset)
            if original is None:
                entries.append((now, None, None, context))
            else:
                headers = [*original.headers, *context]
                entries.append((now, original.key, original.value, headers))
        destination = dead_letter_partition(partition, partitions)
        error = ErrorCode.NONE
        backoff = FIRST_BACKOFF_S
        for attempt in range(1, ATTEMPTS + 1):
            error = await self._append_all(target.name, destination, entries)
            if error == ErrorCode.NONE:
                for record in records:
                    self._metrics.written(group_id, record.reason.value)
                return
            if attempt < ATTEMPTS:
                await asyncio.sleep(backoff)
                backoff *= 2
        self._metrics.failed(group_id, target.name)
        raise DeadLetterError(
            error,
            f"cannot write {len(records)} dead letters of {topic}-{partition} to"
            f" {target.name}-{destination}: {error.name}",
        )

    def close(self) -> None:
        self._peers.close()

    async def _partitions(self, name: str) -> int | None:
        """How many partitions the dead-letter topic has, creating it first if it is
        missing and the broker may; None if it is missing still."""
        count = self._partition_count(name)
        if count is not None or not self._auto_create:
            return count
        try:
            # The name was checked when the group set it, but against the prefix of then.
            check_dead_letter_topic(name, self._prefix)
        except InvalidDeadLetterTopic as exc:
            log.warning("not creating the dead-letter topic: %s", exc)
            return None
        try:
            await self._topics.create_topic(
                NewTopic(name, configs={DEAD_LETTER_TOPIC_ENABLE: "true"}), timeout_ms=TIMEOUT_MS
            )
            log.info("created the dead-letter topic %s", name)
        except TopicAdminError as exc:
            if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("cannot create the dead-letter topic %s: %s", name, exc)
                return None
        # In a cluster this broker learns of the new topic from ZooKeeper's watch, a
        # moment after the controller made it.
        deadline = asyncio.get_running_loop().time() + TIMEOUT_MS / 1000
        while (count := self._partition_count(name)) is None:
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(CREATED_POLL_S)
        return count

    def _opted_in(self, name: str) -> bool:
        """Whether the topic's owner lets share groups write dead letters to it (KIP-1191's
        topic config), so that a group cannot have the broker write into any topic."""
        config = self._topics.topic_config(name)
        return config is not None and config.errors_deadletterqueue_group_enable

    def _originals(
        self, topic: str, partition: int, records: Sequence[ArchivedRecord]
    ) -> dict[int, HeadedRecord]:
        """The archived records as the log holds them, by offset; one the log no longer
        holds (retention, compaction) is left out, and its dead letter has headers alone."""
        wanted = {record.offset for record in records}
        found: dict[int, HeadedRecord] = {}
        try:
            partition_log = self._replicas.leader_log(topic, partition)
            position = min(wanted)
            last = max(wanted)
            while position <= last:
                data = partition_log.read(position, READ_BYTES, max_offset=last + 1)
                batches = list(iter_batches(data))
                if not batches:
                    break
                for pos, header in batches:
                    batch = memoryview(data)[pos : pos + header.size]
                    for record in iter_headed_records(batch, header):
                        if record.offset in wanted:
                            found[record.offset] = record
                position = max(position, batches[-1][1].last_offset + 1)
        except (PartitionError, StorageError, InvalidBatch) as exc:
            log.warning(
                "cannot read %s-%d to copy records into dead letters: %s", topic, partition, exc
            )
        return found

    async def _append_all(
        self,
        name: str,
        partition: int,
        entries: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    ) -> ErrorCode:
        start = 0
        while start < len(entries):
            end, size = start, 0
            while end < len(entries) and end - start < BATCH_RECORDS and size < BATCH_BYTES:
                _, key, value, _ = entries[end]
                size += len(key or b"") + len(value or b"")
                end += 1
            batch = encode_headed_batch(entries[start:end])
            error = await self._append(name, partition, batch)
            if error != ErrorCode.NONE:
                return error
            start = end
        return ErrorCode.NONE

    async def _append(self, name: str, partition: int, batch: bytes) -> ErrorCode:
        """Append one batch to the dead-letter partition, acks=all: here if this broker
        leads it, else at its leader."""
        if self._leader_of is None or self._replicas.leads(name, partition):
            try:
                partition_log = self._replicas.leader_log(name, partition)
                view = memoryview(batch)
                info = self._replicas.append(partition_log, [(parse_header(view), view)], ACKS_ALL)
                await self._replicas.committed(
                    partition_log, ACKS_ALL, info.last_offset + 1, TIMEOUT_MS
                )
            except (StorageError, PartitionError) as exc:
                return exc.error_code
            return ErrorCode.NONE
        leader = self._leader_of(name, partition)
        if leader is None:
            return ErrorCode.LEADER_NOT_AVAILABLE
        try:
            response = await self._peers.request(
                leader,
                ApiKey.PRODUCE,
                PRODUCE_VERSION,
                transactional_id=None,
                acks=ACKS_ALL,
                timeout_ms=TIMEOUT_MS,
                topic_data=[
                    {"name": name, "partition_data": [{"index": partition, "records": batch}]}
                ],
            )
        except PeerError:
            return ErrorCode.REQUEST_TIMED_OUT
        try:
            return ErrorCode(response.responses[0].partition_responses[0].error_code)
        except (IndexError, ValueError):
            return ErrorCode.UNKNOWN_SERVER_ERROR

"""The partitions this broker hosts: which it leads, and appending to and waiting on them.

Produce, Fetch, ListOffsets and the group coordinator reach partition logs
through here, never the LogManager directly, so that leadership, the in-sync
replica set and what "committed" means are decided in one place. On one broker
it leads every partition it hosts and is alone in each ISR: an append is
committed once the flush policy is met.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from herdless.broker.clock import monotonic_ms
from herdless.broker.replication.appends import AppendNotifier, TopicPartition
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.refused_batches import RefusedBatches
from herdless.cluster.metadata import SINGLE_NODE_LEADER_EPOCH
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import BatchHeader
from herdless.security.session import NO_REQUESTS_BEHIND, RequestsBehind
from herdless.storage import (
    AppendInfo,
    LogManager,
    PartitionLog,
    StorageError,
    StorageIOError,
    VerificationGuard,
)

ACKS_ALL = -1
NO_EPOCH = -1


class PartitionError(Exception):
    """The partition cannot serve this request here; `error_code` tells the client why."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code
        self.message = message


class ReplicaManager:
    def __init__(self, logs: LogManager, durability: Durability, clock: Callable[[], int]) -> None:
        self.logs = logs
        self.durability = durability
        self.appends = AppendNotifier()
        # The wall clock: appends write its time (LogAppendTime, segments' ages).
        self._clock = clock
        # Producers' batches refused unwritten, for the batches pipelined behind them.
        self.refused_batches = RefusedBatches(monotonic_ms)

    def leader_log(
        self, topic: str, partition: int, current_leader_epoch: int = NO_EPOCH
    ) -> PartitionLog:
        """The log of a partition this broker leads; a request made in another leader
        epoch than this one is fenced, as Kafka fences it (KIP-320)."""
        partition_log = self.logs.partition(topic, partition)
        if partition_log is None:
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        check_leader_epoch(SINGLE_NODE_LEADER_EPOCH, current_leader_epoch)
        return partition_log

    def replica_log(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition this broker holds a replica of, as leader or follower:
        what a request any replica may answer reads (DescribeProducers, as Kafka's
        ReplicaManager.getPartitionOrError serves it)."""
        return self.leader_log(topic, partition)

    def leads(self, topic: str, partition: int) -> bool:
        """Whether leader_log() would give the log (asked on the path of every
        coordinator request, where raising and catching would cost more)."""
        return self.logs.partition(topic, partition) is not None

    def consumer_log(
        self, topic: str, partition: int, current_leader_epoch: int, any_replica: bool
    ) -> PartitionLog:
        """The log a consumer's Fetch reads, below its high watermark: the leader's, or with
        `any_replica` (Fetch v11 on, KIP-392) this broker's replica, leader or follower.
        One broker leads all it hosts."""
        return self.leader_log(topic, partition, current_leader_epoch)

    def preferred_read_replica(
        self, partition_log: PartitionLog, client_rack: str, fetch_offset: int
    ) -> int | None:
        """The broker a consumer in `client_rack` should fetch the partition from instead
        of this one, as replica.selector.class picks it (KIP-392); None: here. One broker
        has no other replica to offer."""
        return None

    def follower_log(
        self, topic: str, partition: int, replica_id: int, current_leader_epoch: int
    ) -> PartitionLog:
        """The log a follower fetches from: one broker has no followers."""
        raise PartitionError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {replica_id} is not a replica here"
        )

    def record_follower_fetch(
        self,
        topic: str,
        partition: int,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int = -1,
    ) -> None:
        """A follower fetched at `fetch_offset` (nothing to do without followers)."""

    def leader_throttled(self, partition_log: PartitionLog, replica_id: int) -> bool:
        """Whether a follower's fetch of the partition gets no records now, the leader's
        replication quota being exceeded (never without followers)."""
        return False

    def record_sent_to_follower(self, partition_log: PartitionLog, size: int) -> None:
        """Bytes of the partition answered to a follower (nothing to count without one)."""

    def leader_epoch(self, partition_log: PartitionLog) -> int:
        return SINGLE_NODE_LEADER_EPOCH

    def in_sync_replicas(self, partition_log: PartitionLog) -> int:
        return 1

    def in_sync(self, partition_log: PartitionLog) -> bool:
        """Whether this broker's replica is in the partition's ISR."""
        return True

    def append(
        self,
        partition_log: PartitionLog,
        batches: list[tuple[BatchHeader, memoryview]],
        acks: int,
        *,
        keyed: bool = False,
        verification: VerificationGuard | None = None,
        transaction_version: int = 0,
    ) -> AppendInfo:
        """Append as leader; StorageError or PartitionError if nothing was written.
        `keyed`, `verification` and `transaction_version`: as PartitionLog.append takes
        them."""
        required = partition_log.config.min_insync_replicas
        in_sync = self.in_sync_replicas(partition_log)
        if acks == ACKS_ALL and in_sync < required:
            # As Kafka answers: acks=all cannot be met with fewer in-sync replicas than
            # the topic demands, so nothing is written.
            raise PartitionError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{partition_log.name} has min.insync.replicas={required} but"
                f" {in_sync} in-sync replica{'s' if in_sync != 1 else ''}, so acks=all"
                " cannot be satisfied",
            )
        try:
            info = partition_log.append(
                batches,
                self._clock(),
                leader_epoch=self.leader_epoch(partition_log),
                keyed=keyed,
                verification=verification,
                transaction_version=transaction_version,
            )
        except StorageIOError as exc:
            self.logs.on_io_error("append", partition_log.name, exc)
            raise
        if not info.duplicate:
            self.appends.notify(partition_log.topic, partition_log.partition)
        return info

    async def committed(
        self, partition_log: PartitionLog, acks: int, end_offset: int, timeout_ms: int
    ) -> None:
        """Return once the records before `end_offset` may be acknowledged to a producer
        that asked for `acks`; PartitionError if they cannot be within `timeout_ms`."""
        await self.durable(partition_log)

    async def durable(self, partition_log: PartitionLog) -> None:
        """Return once the topic's flush policy is met; PartitionError if the flush failed
        (KAFKA_STORAGE_ERROR: the records are in the log, but not known to be on disk)."""
        try:
            await self.durability.after_append(partition_log)
        except StorageError as exc:
            if isinstance(exc, StorageIOError):
                self.logs.on_io_error("flush", partition_log.name, exc)
            raise PartitionError(exc.error_code, str(exc)) from exc

    def committed_now(self, partition_log: PartitionLog, acks: int, end_offset: int) -> bool:
        """True when `committed` would return at once, with nothing to wait for: lets a
        caller answer without a task to wait in. False says nothing."""
        return partition_log.high_watermark >= end_offset and self.durability.durable_now(
            partition_log
        )

    async def wait_for_appends(
        self,
        partitions: Iterable[TopicPartition],
        timeout_s: float,
        behind: RequestsBehind = NO_REQUESTS_BEHIND,
    ) -> bool:
        return await self.appends.wait(partitions, timeout_s, behind)

    def forget(self, partition_log: PartitionLog) -> None:
        self.durability.forget(partition_log)


def check_leader_epoch(leader_epoch: int, current_leader_epoch: int) -> None:
    """Kafka's fencing of requests made with another leader epoch (KIP-320); -1 means
    the client does not know the epoch and is not checked."""
    if current_leader_epoch in (NO_EPOCH, leader_epoch):
        return
    raise PartitionError(
        ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch < leader_epoch
        else ErrorCode.UNKNOWN_LEADER_EPOCH
    )

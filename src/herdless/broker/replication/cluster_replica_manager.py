"""Replicas across brokers, as Kafka replicates: leaders, followers, the ISR and the high watermark.

Each hosted partition is led by one broker (named, with its leader epoch, by
the partition's state in ZooKeeper) and followed by the other replicas, which
fetch from the leader with their replica id. The leader tracks each follower's
log end offset from the offsets it fetches at; the high watermark is the
smallest log end offset in the ISR, and only records below it are committed:
consumers read up to it, and an `acks=all` produce is answered once it passes
the produced records and the ISR holds at least `min.insync.replicas`.

The leader changes the ISR itself: a follower that has not caught up within
`replica.lag.time.max.ms` leaves it, one that has caught up joins it. Each
change is a write to the partition's state in ZooKeeper conditional on the
version this broker last saw, so a broker that has been replaced as leader
(the controller bumped the epoch) fails the write and steps down.

A leader must also stop before anyone else can be elected in its place: it
serves only while its ZooKeeper session is provably alive (`lease`, from
cluster.store), which a paused or partitioned broker finds expired when it
resumes, before it answers anything.

Consumers read from the leader, or from any replica (Fetch v11 on, KIP-392): a
follower serves them below the high watermark its leader told it, and a leader with
a `replica.selector.class` may send a consumer to an in-sync follower in its rack
(preferred_read_replica; replica_selector.py).

A broker whose data directory failed takes every replica offline (take_offline):
it leads and follows nothing, and answers KAFKA_STORAGE_ERROR for them, as Kafka
answers for a replica in an offline log directory, until the directory writes
again (bring_online).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from herdless.broker.clock import monotonic_ms
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.quota import UNLIMITED, ReplicationQuota
from herdless.broker.replication.replica_manager import (
    ACKS_ALL,
    NO_EPOCH,
    PartitionError,
    ReplicaManager,
    check_leader_epoch,
)
from herdless.broker.replication.replica_selector import ReplicaSelector, ReplicaView
from herdless.cluster.layout import PartitionState
from herdless.cluster.metadata_cache import ClusterMetadata
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import BatchHeader
from herdless.storage import AppendInfo, LogManager, PartitionLog, VerificationGuard

log = logging.getLogger(__name__)

# Writes a new ISR for (topic, partition) if the state is still at `version`; returns
# the new version, or None if the state moved on (this broker must re-read it).
IsrWriter = Callable[[str, int, PartitionState, int], Awaitable[int | None]]


# How often a leader waiting for its followers checks that it may still lead.
LEASE_CHECK_S = 0.1


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower, from the fetches it receives."""

    log_end_offset: int = -1
    # As the follower said in its last fetch (-1: not said); a consumer sent to it must
    # find its fetch offset there.
    log_start_offset: int = -1
    # The leader's log end offset when this follower last fetched, and when that was.
    # Times here are the leader's monotonic clock: lag is a duration, which a stepped
    # wall clock would stretch (a dead follower kept in the ISR, stalling acks=all) or
    # shrink (every follower dropped at once).
    leader_end_at_last_fetch: int = 0
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0


@dataclass(eq=False)
class Partition:
    log: PartitionLog
    role: Role
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    # The version of the partition's state znode this broker last saw.
    state_version: int
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # (end offset, waiter) of acks=all produces and coordinator writes, in offset order.
    waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)
    # An ISR write in flight: no second one until it is answered.
    isr_write: asyncio.Task[None] | None = None

    @property
    def key(self) -> tuple[str, int]:
        return self.log.topic, self.log.partition


class ClusterReplicaManager(ReplicaManager):
    def __init__(
        self,
        logs: LogManager,
        durability: Durability,
        clock: Callable[[], int],
        node_id: int,
        metadata: ClusterMetadata,
        lease_valid: Callable[[], bool],
        write_isr: IsrWriter,
        replica_lag_time_max_ms: int,
        monotonic_clock: Callable[[], int] = monotonic_ms,
        leader_quota: ReplicationQuota | None = None,
        replica_selector: ReplicaSelector | None = None,
    ) -> None:
        super().__init__(logs, durability, clock)
        # replica.selector.class; None: consumers read from the leader (KIP-392).
        self._replica_selector = replica_selector
        self._monotonic = monotonic_clock
        self.node_id = node_id
        self._metadata = metadata
        self._lease_valid = lease_valid
        self._write_isr = write_isr
        self._lag_max_ms = replica_lag_time_max_ms
        # leader.replication.throttled.rate over the partitions the topics name.
        self.leader_quota = leader_quota or ReplicationQuota(node_id, UNLIMITED, monotonic_clock)
        # Since when (monotonic ms) the lag check has found the session unproven, if it has.
        self._unproven_since: int | None = None
        self.partitions: dict[tuple[str, int], Partition] = {}
        # The data directory failed: every replica here is offline until it writes again.
        self.offline = False
        # Told when this broker starts or stops leading, or following, a partition.
        self.on_role_change: Callable[[Partition | None, tuple[str, int]], None] = (
            lambda partition, key: None
        )

    # -- roles, from the partition's state in ZooKeeper --------------------------

    def apply_state(
        self,
        partition_log: PartitionLog,
        state: PartitionState,
        version: int,
        replicas: tuple[int, ...],
    ) -> Partition:
        """Lead or follow as `state` says; a no-op if this broker already acts on it."""
        key = (partition_log.topic, partition_log.partition)
        current = self.partitions.get(key)
        role = Role.LEADER if state.leader == self.node_id else Role.FOLLOWER
        if current is not None and state.leader_epoch < current.leader_epoch:
            return current  # a stale watch delivery
        if current is not None and current.role is role and current.leader == state.leader:
            # The same leader: only the epoch (the controller changed the ISR or the
            # replicas), the ISR or the replicas may differ. Waiting produces carry on.
            new_term = state.leader_epoch != current.leader_epoch
            current.leader_epoch = state.leader_epoch
            current.isr = tuple(state.isr)
            current.replicas = replicas
            current.state_version = max(current.state_version, version)
            if role is Role.LEADER:
                for replica in replicas:
                    if replica != self.node_id and replica not in current.followers:
                        current.followers[replica] = FollowerState()
                # A replica reassigned away fetches no more here, nor rejoins the ISR.
                for gone in set(current.followers) - set(replicas):
                    del current.followers[gone]
                if new_term:
                    partition_log.assign_leader_epoch(state.leader_epoch)
                self._maybe_advance_high_watermark(current)
            if new_term:
                self.on_role_change(current, key)
            return current
        if current is not None:
            self._fail_waiters(current, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        partition = Partition(
            partition_log,
            role,
            state.leader,
            state.leader_epoch,
            replicas,
            tuple(state.isr),
            version,
        )
        self.partitions[key] = partition
        if role is Role.LEADER:
            self._become_leader(partition)
        log.info(
            "%s: %s in leader epoch %d (leader %d, ISR %s)",
            partition_log.name,
            role.value,
            state.leader_epoch,
            state.leader,
            list(state.isr),
        )
        self.on_role_change(partition, key)
        return partition

    def _become_leader(self, partition: Partition) -> None:
        now = self._monotonic()
        partition.followers = {
            replica: FollowerState(last_caught_up_ms=now if replica in partition.isr else 0)
            for replica in partition.replicas
            if replica != self.node_id
        }
        # Records from here on carry the new epoch; the cache learns where it starts
        # even before the first append, as Kafka's does (followers ask for it).
        partition.log.assign_leader_epoch(partition.leader_epoch)
        self._maybe_advance_high_watermark(partition)

    def stop_replica(self, topic: str, index: int) -> Partition | None:
        """This broker no longer hosts the partition (deleted, or reassigned away)."""
        partition = self.partitions.pop((topic, index), None)
        if partition is not None:
            self._fail_waiters(partition, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self.on_role_change(None, (topic, index))
        return partition

    def take_offline(self) -> None:
        """The data directory failed: lead and follow nothing until bring_online(). Waiting
        produces are answered KAFKA_STORAGE_ERROR, and so is every request for a replica
        here meanwhile (Kafka's HostedPartition.Offline)."""
        self.offline = True
        for key, partition in list(self.partitions.items()):
            del self.partitions[key]
            self._fail_waiters(partition, ErrorCode.KAFKA_STORAGE_ERROR)
            self.on_role_change(None, key)

    def bring_online(self) -> None:
        """The data directory writes again: from here on the replicas take the roles their
        partitions' states give them (apply_state)."""
        self.offline = False

    def resign_all(self) -> None:
        """The ZooKeeper session is gone: lead nothing until the new one says so."""
        for partition in self.partitions.values():
            if partition.role is Role.LEADER:
                self._fail_waiters(partition, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                partition.role = Role.FOLLOWER
                partition.leader = -1
                self.on_role_change(partition, partition.key)

    # -- leading -----------------------------------------------------------------

    def _led(self, topic: str, index: int, current_leader_epoch: int = NO_EPOCH) -> Partition:
        partition = self._hosted(topic, index)
        check_leader_epoch(partition.leader_epoch, current_leader_epoch)
        self._require_leading(partition)
        return partition

    def _hosted(self, topic: str, index: int) -> Partition:
        """The partition this broker holds a replica of, leading it or not."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            assignment = self._metadata.assignment(topic)
            if assignment is None or index not in assignment.replicas:
                raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if self.offline and self.node_id in assignment.replicas[index]:
                raise PartitionError(
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    f"{topic}-{index}: the replica on broker {self.node_id} is offline:"
                    " its data directory failed",
                )
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition

    def replica_log(self, topic: str, partition: int) -> PartitionLog:
        return self._hosted(topic, partition).log

    def _require_leading(self, partition: Partition) -> None:
        """That this broker still leads `partition`, in a session it can prove alive: a
        broker paused past its ZooKeeper session, or replaced meanwhile, must not act."""
        if self.partitions.get(partition.key) is not partition or partition.role is not Role.LEADER:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if not self._lease_valid():
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{partition.log.name}: this broker cannot prove its ZooKeeper session is alive",
            )

    def leader_log(
        self, topic: str, partition: int, current_leader_epoch: int = NO_EPOCH
    ) -> PartitionLog:
        return self._led(topic, partition, current_leader_epoch).log

    # -- what consumers fetch (KIP-392) -------------------------------------------

    def consumer_log(
        self, topic: str, index: int, current_leader_epoch: int, any_replica: bool
    ) -> PartitionLog:
        partition = self._hosted(topic, index)
        if not any_replica or partition.role is Role.LEADER:
            # A leader serves only while it may lead, as for every other request.
            return self._led(topic, index, current_leader_epoch).log
        # A follower serves what its leader has told it is committed (its high
        # watermark), fenced by the leader epoch it knows as a leader fences.
        check_leader_epoch(partition.leader_epoch, current_leader_epoch)
        return partition.log

    def preferred_read_replica(
        self, partition_log: PartitionLog, client_rack: str, fetch_offset: int
    ) -> int | None:
        selector = self._replica_selector
        partition = self.partitions.get((partition_log.topic, partition_log.partition))
        # A consumer that names no rack stays on the leader, whatever the selector: no
        # need to gather the replicas on every fetch.
        if (
            selector is None
            or not client_rack
            or partition is None
            or partition.role is not Role.LEADER
        ):
            return None
        # Live brokers only: one that is gone cannot be sent a consumer.
        racks = {b.node_id: b.rack for b in self._metadata.brokers()}
        now = self._monotonic()
        leader = ReplicaView(self.node_id, racks.get(self.node_id), partition.log.log_end_offset, 0)
        offered = [leader]
        for replica, follower in sorted(partition.followers.items()):
            if (
                replica in partition.isr
                and replica in racks
                and follower.log_start_offset <= fetch_offset <= follower.log_end_offset
            ):
                offered.append(
                    ReplicaView(
                        replica,
                        racks[replica],
                        follower.log_end_offset,
                        now - follower.last_caught_up_ms,
                    )
                )
        chosen = selector(client_rack, leader, offered)
        return None if chosen.node_id == self.node_id else chosen.node_id

    def replicated(self, partition_log: PartitionLog) -> None:
        """A followed partition's log or high watermark moved: consumers long-polling
        this follower (KIP-392) read on."""
        self.appends.notify(partition_log.topic, partition_log.partition)

    def leads(self, topic: str, partition: int) -> bool:
        try:
            self._led(topic, partition)
        except PartitionError:
            return False
        return True

    def leader_epoch(self, partition_log: PartitionLog) -> int:
        partition = self.partitions.get((partition_log.topic, partition_log.partition))
        return NO_EPOCH if partition is None else partition.leader_epoch

    def in_sync_replicas(self, partition_log: PartitionLog) -> int:
        partition = self.partitions.get((partition_log.topic, partition_log.partition))
        return 0 if partition is None else len(partition.isr)

    def in_sync(self, partition_log: PartitionLog) -> bool:
        partition = self.partitions.get((partition_log.topic, partition_log.partition))
        return partition is not None and self.node_id in partition.isr

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
        partition = self._led(partition_log.topic, partition_log.partition)
        info = super().append(
            partition_log,
            batches,
            acks,
            keyed=keyed,
            verification=verification,
            transaction_version=transaction_version,
        )
        # Alone in the ISR, the leader's own append moves the high watermark.
        self._maybe_advance_high_watermark(partition)
        return info

    def committed_now(self, partition_log: PartitionLog, acks: int, end_offset: int) -> bool:
        # Followers have yet to fetch what was just appended: always wait in committed().
        return False

    async def committed(
        self, partition_log: PartitionLog, acks: int, end_offset: int, timeout_ms: int
    ) -> None:
        await self.durable(partition_log)
        partition = self.partitions.get((partition_log.topic, partition_log.partition))
        if partition is None or partition.role is not Role.LEADER:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if acks == ACKS_ALL and partition_log.high_watermark < end_offset:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry = (end_offset, waiter)
            bisect.insort(partition.waiters, entry, key=lambda e: e[0])
            try:
                async with asyncio.timeout(max(timeout_ms, 0) / 1000):
                    await self._released(partition, waiter)
            except TimeoutError:
                raise PartitionError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"{partition_log.name}: the in-sync replicas did not all have the records"
                    f" within {timeout_ms} ms",
                ) from None
            finally:
                if not waiter.done():
                    waiter.cancel()
                    # A timed-out wait leaves no entry for the high watermark to release.
                    with contextlib.suppress(ValueError):
                        partition.waiters.remove(entry)
        # Kafka's rule, whether or not the answer had to wait: a shrink of the ISR moves
        # the high watermark past records only the leader holds, so the ISR is checked
        # as the answer is given, for every partition of a request.
        if acks == ACKS_ALL and len(partition.isr) < partition_log.config.min_insync_replicas:
            raise PartitionError(
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                f"{partition_log.name}: written, but the ISR shrank to"
                f" {len(partition.isr)} below min.insync.replicas"
                f"={partition_log.config.min_insync_replicas}",
            )
        # Answer only while still the leader this broker was.
        self._require_leading(partition)

    async def _released(self, partition: Partition, waiter: asyncio.Future[None]) -> None:
        """Until the high watermark passes the waiter's records, or this broker can no
        longer prove its session: from then on it refuses its followers' fetches, so
        nothing would release the waiter but the request's timeout, and the producer (or
        the group coordinator's commit) had better learn now that this leader is gone."""
        while True:
            done, _ = await asyncio.wait((waiter,), timeout=LEASE_CHECK_S)
            if done:
                return waiter.result()
            self._require_leading(partition)

    # -- what followers fetch -----------------------------------------------------

    def follower_log(
        self, topic: str, index: int, replica_id: int, current_leader_epoch: int
    ) -> PartitionLog:
        partition = self._led(topic, index, current_leader_epoch)
        if replica_id not in partition.followers:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {replica_id} is not a replica of {partition.log.name}",
            )
        return partition.log

    def leader_throttled(self, partition_log: PartitionLog, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle: a throttled partition, the quota exceeded, and a
        follower out of the ISR."""
        quota = self.leader_quota
        listed = partition_log.config.leader_replication_throttled_replicas
        if not quota.is_throttled(listed, partition_log.partition) or not quota.exceeded():
            return False
        partition = self.partitions.get((partition_log.topic, partition_log.partition))
        return partition is None or replica_id not in partition.isr

    def record_sent_to_follower(self, partition_log: PartitionLog, size: int) -> None:
        listed = partition_log.config.leader_replication_throttled_replicas
        if self.leader_quota.is_throttled(listed, partition_log.partition):
            self.leader_quota.record(size)

    def record_follower_fetch(
        self, topic: str, index: int, replica_id: int, fetch_offset: int, log_start_offset: int = -1
    ) -> None:
        """A follower fetched at `fetch_offset`: everything below it is on that follower."""
        partition = self.partitions.get((topic, index))
        if partition is None or partition.role is not Role.LEADER:
            return
        follower = partition.followers.get(replica_id)
        if follower is None:
            return
        now = self._monotonic()
        leader_end = partition.log.log_end_offset
        # Kafka's rule: caught up if it has everything the leader had now, or everything
        # the leader had at its previous fetch (so a steady producer cannot keep a
        # healthy follower out of the ISR).
        if fetch_offset >= leader_end:
            follower.last_caught_up_ms = now
        elif fetch_offset >= follower.leader_end_at_last_fetch:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end_offset = fetch_offset
        follower.log_start_offset = log_start_offset
        follower.leader_end_at_last_fetch = leader_end
        follower.last_fetch_ms = now
        if replica_id not in partition.isr and self._may_join_isr(partition, follower):
            self._change_isr(partition, tuple(sorted({*partition.isr, replica_id})))
        self._maybe_advance_high_watermark(partition)

    def _may_join_isr(self, partition: Partition, follower: FollowerState) -> bool:
        # Caught up to the high watermark, and holding this leader epoch's first record,
        # so nothing it has can be a divergent tail of an earlier leader.
        log_ = partition.log
        epoch_start = next(
            (
                e.start_offset
                for e in log_.leader_epoch_entries
                if e.epoch == partition.leader_epoch
            ),
            0,
        )
        return follower.log_end_offset >= max(log_.high_watermark, epoch_start)

    def _maybe_advance_high_watermark(self, partition: Partition) -> None:
        if partition.role is not Role.LEADER:
            return
        log_ = partition.log
        ends = [log_.log_end_offset]
        for replica in partition.isr:
            if replica != self.node_id:
                follower = partition.followers.get(replica)
                ends.append(follower.log_end_offset if follower is not None else -1)
        new_high_watermark = min(ends)
        if new_high_watermark > log_.high_watermark:
            log_.set_high_watermark(new_high_watermark)
            # Consumers long-polling read only up to the high watermark.
            self.appends.notify(log_.topic, log_.partition)
        self._release_waiters(partition)

    def _release_waiters(self, partition: Partition) -> None:
        high_watermark = partition.log.high_watermark
        while partition.waiters and partition.waiters[0][0] <= high_watermark:
            _, waiter = partition.waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)

    def _fail_waiters(self, partition: Partition, error: ErrorCode) -> None:
        waiters, partition.waiters = partition.waiters, []
        for _, waiter in waiters:
            if not waiter.done():
                waiter.set_exception(PartitionError(error))

    # -- the ISR -------------------------------------------------------------------

    def shrink_lagging(self) -> None:
        """Drop followers that have not caught up within replica.lag.time.max.ms."""
        now = self._monotonic()
        if not self._lease_valid():
            # Cut from ZooKeeper, this broker may already have been replaced as leader, and
            # its followers' silence may be the same cut: it could not write the ISR anyway,
            # and a try every half lag for every partition would only flood the log.
            if self._unproven_since is None:
                self._unproven_since = now
            return
        if self._unproven_since is not None:
            # Proven again: meanwhile it refused its followers' fetches, so the gap is not
            # theirs to answer for (as stall grace spares group members a broker's stall).
            gap, self._unproven_since = now - self._unproven_since, None
            for partition in self.partitions.values():
                for follower in partition.followers.values():
                    follower.last_caught_up_ms += gap
        for partition in list(self.partitions.values()):
            if partition.role is not Role.LEADER:
                continue
            lagging = {
                replica
                for replica in partition.isr
                if replica != self.node_id
                and now - partition.followers.get(replica, FollowerState()).last_caught_up_ms
                > self._lag_max_ms
            }
            if lagging:
                isr = tuple(r for r in partition.isr if r not in lagging)
                log.info(
                    "%s: replicas %s fell behind for %d ms; shrinking the ISR to %s",
                    partition.log.name,
                    sorted(lagging),
                    self._lag_max_ms,
                    list(isr),
                )
                self._change_isr(partition, isr)

    def _change_isr(self, partition: Partition, isr: tuple[int, ...]) -> None:
        if partition.isr_write is not None and not partition.isr_write.done():
            return  # the next fetch or shrink check tries again once this one is answered
        partition.isr_write = asyncio.get_running_loop().create_task(
            self._write_new_isr(partition, isr)
        )

    async def _write_new_isr(self, partition: Partition, isr: tuple[int, ...]) -> None:
        state = PartitionState(
            leader=self.node_id,
            leader_epoch=partition.leader_epoch,
            isr=isr,
            controller_epoch=-1,  # filled in by the writer from the state it replaces
        )
        try:
            version = await self._write_isr(
                partition.log.topic, partition.log.partition, state, partition.state_version
            )
        except Exception:
            log.exception("%s: writing the ISR %s failed", partition.log.name, list(isr))
            return
        if self.partitions.get(partition.key) is not partition:
            return
        if version is None:
            # The state moved on without us (a new leader epoch): its watch will say how.
            log.info("%s: the ISR changed elsewhere; waiting for the new state", partition.log.name)
            return
        partition.isr = isr
        partition.state_version = version
        self._maybe_advance_high_watermark(partition)

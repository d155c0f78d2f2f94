"""A follower's fetcher: copies the partitions this broker follows from one leader.

As a Kafka follower does: first, for a partition whose leader changed,
truncate any divergent tail by asking the leader where this replica's latest
leader epoch ends (OffsetForLeaderEpoch); then fetch from the log end offset
with this broker's replica id, append what comes back byte for byte, and take
the high watermark the leader reports. The leader learns how far this replica
has got from the offset of its next fetch.

The fetches go in a fetch session (KIP-227), as Kafka's followers' do: after
the first, each names only the partitions whose fetch offset (or epoch, or log
start) moved, and the leader answers only those with news. A follower of many
quiet partitions then costs the leader next to nothing per fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from herdless.broker.peers.connection import PeerConnection, PeerError, PeerSecurity
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.fetch_session_handler import FetchSessionHandler, PartitionFetch
from herdless.broker.replication.quota import ReplicationQuota
from herdless.cluster.metadata import BrokerEndpoint
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from herdless.storage import PartitionLog, StorageError, StorageIOError, UnexpectedAppendOffset

log = logging.getLogger(__name__)
_T = TypeVar("_T")

# Versions sent: the newest that still names topics (not ids) and is served by herdless.
FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
NO_EPOCH = -1
UNDEFINED_OFFSET = -1
# Kafka's replica.fetch.wait.max.ms, replica.fetch.max.bytes, replica.fetch.backoff.ms.
FETCH_WAIT_MAX_MS = 500
FETCH_MAX_BYTES = 1024 * 1024
FETCH_RESPONSE_MAX_BYTES = 10 * 1024 * 1024
BACKOFF_S = 0.2
# While the follower quota holds back every partition: look again this soon (Kafka backs
# off replica.fetch.backoff.ms, a second; a tenth keeps the rate near its bound).
THROTTLED_BACKOFF_S = 0.1
REQUEST_TIMEOUT_S = 10.0
SESSION_ERRORS = (
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
    ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
)


@dataclass(eq=False, slots=True)
class FollowedPartition:
    log: PartitionLog
    leader_epoch: int
    # Set when the leader changed: truncate to the leader's epochs before fetching.
    needs_truncation: bool = True
    # Until when this partition is left out of fetches after an error (loop time).
    delayed_until: float = 0.0


class ReplicaFetcher:
    def __init__(
        self,
        node_id: int,
        leader: BrokerEndpoint,
        durability: Durability,
        clock: Callable[[], int],
        on_replicated: Callable[[PartitionLog], None] = lambda partition_log: None,
        security: PeerSecurity | None = None,
        quota: ReplicationQuota | None = None,
        in_sync: Callable[[PartitionLog], bool] = lambda partition_log: True,
    ) -> None:
        """quota: follower.replication.throttled.rate, shared by the broker's fetchers;
        in_sync: whether this broker's replica of a partition is in its ISR."""
        self.node_id = node_id
        self._clock = clock
        # Told after each truncation, and each fetch that moved a log or its high watermark.
        self._on_replicated = on_replicated
        self._quota = quota
        self._in_sync = in_sync
        self.leader = leader
        self._durability = durability
        self._connection = PeerConnection(
            leader.host, leader.port, f"herdless-replica-{node_id}", REQUEST_TIMEOUT_S, security
        )
        self.partitions: dict[tuple[str, int], FollowedPartition] = {}
        self._session = FetchSessionHandler(leader.node_id)
        self._changed = asyncio.Event()
        # Set when a partition is to be truncated and fetched anew (a new leader, newly
        # followed): the long poll in flight is abandoned rather than waited out. At a
        # leader change producers wait on this follower, and the poll on the other
        # partitions may wait its whole replica.fetch.wait.max.ms for records that those
        # producers, held up, do not send.
        self._interrupt = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # The failure last logged, until a round of fetching succeeds.
        self._failure: str | None = None

    # -- what it follows ---------------------------------------------------------

    def follow(self, partition_log: PartitionLog, leader_epoch: int, new_leader: bool) -> None:
        key = (partition_log.topic, partition_log.partition)
        current = self.partitions.get(key)
        if current is None or current.log is not partition_log:
            self.partitions[key] = FollowedPartition(partition_log, leader_epoch)
            self._interrupt.set()
        else:
            current.leader_epoch = leader_epoch
            current.needs_truncation = current.needs_truncation or new_leader
            current.delayed_until = 0.0
            if new_leader:
                self._interrupt.set()
        self._changed.set()

    def unfollow(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._connection.close()

    # -- the loop ----------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._interrupt.clear()
            now = loop.time()
            ready = [p for p in self.partitions.values() if p.delayed_until <= now]
            if not ready:
                self._changed.clear()
                wake = min((p.delayed_until for p in self.partitions.values()), default=None)
                timeout = None if wake is None else max(wake - now, 0)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._changed.wait()
                continue
            try:
                truncating = [p for p in ready if p.needs_truncation]
                if truncating:
                    await self._truncate(truncating)
                fetching = [p for p in ready if not p.needs_truncation and not self._throttled(p)]
                if not fetching and not truncating:
                    # Every partition waits for the follower quota (Kafka's fetch backoff).
                    await asyncio.sleep(THROTTLED_BACKOFF_S)
                    continue
                if fetching:
                    # The long poll ends when a partition backing off may be tried again.
                    waiting = [p.delayed_until for p in self.partitions.values() if p not in ready]
                    wait_ms = FETCH_WAIT_MAX_MS
                    if waiting:
                        until_ms = int((min(waiting) - loop.time()) * 1000)
                        wait_ms = max(0, min(wait_ms, until_ms))
                    await self._fetch(fetching, wait_ms)
                if self._failure is not None:
                    log.info("fetching from broker %d again", self.leader.node_id)
                    self._failure = None
            except PeerError as exc:
                # Said once while it lasts: a leader that stays down, or refuses this
                # broker's login, would otherwise fill the log every BACKOFF_S.
                if str(exc) != self._failure:
                    log.info("fetching from broker %d: %s; retrying", self.leader.node_id, exc)
                    self._failure = str(exc)
                await asyncio.sleep(BACKOFF_S)
            except Exception:
                log.exception("fetcher for broker %d failed; retrying", self.leader.node_id)
                await asyncio.sleep(BACKOFF_S)

    def _throttled(self, partition: FollowedPartition) -> bool:
        """Kafka's shouldFollowerThrottle: a throttled partition this replica is catching
        up on, while the follower quota is exceeded."""
        quota = self._quota
        if quota is None:
            return False
        listed = partition.log.config.follower_replication_throttled_replicas
        return (
            quota.is_throttled(listed, partition.log.partition)
            and quota.exceeded()
            and not self._in_sync(partition.log)
        )

    def _delay(self, partition: FollowedPartition) -> None:
        partition.delayed_until = asyncio.get_running_loop().time() + BACKOFF_S

    # -- truncation ----------------------------------------------------------------

    async def _truncate(self, partitions: list[FollowedPartition]) -> None:
        """Cut each log back to where it agrees with the leader (KIP-101/279)."""
        by_topic: dict[str, list[FollowedPartition]] = {}
        for partition in partitions:
            by_topic.setdefault(partition.log.topic, []).append(partition)
        response = await self._connection.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            replica_id=self.node_id,
            topics=[
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": p.log.partition,
                            "current_leader_epoch": p.leader_epoch,
                            "leader_epoch": _latest_epoch(p.log),
                        }
                        for p in members
                    ],
                }
                for topic, members in by_topic.items()
            ],
        )
        for topic_result in response.topics:
            for result in topic_result.partitions:
                partition = self.partitions.get((topic_result.topic, result.partition))
                if partition is None or partition not in partitions:
                    continue
                if result.error_code != ErrorCode.NONE:
                    log.debug(
                        "%s: OffsetForLeaderEpoch answered %s",
                        partition.log.name,
                        ErrorCode(result.error_code).name,
                    )
                    self._delay(partition)
                    continue
                if self._truncate_one(partition, result.leader_epoch, result.end_offset):
                    partition.needs_truncation = False

    def _truncate_one(self, partition: FollowedPartition, leader_epoch: int, end: int) -> bool:
        """Truncate as the leader's answer says; False if another round is needed."""
        partition_log = partition.log
        log_end = partition_log.log_end_offset
        requested = _latest_epoch(partition_log)
        final = True
        if requested == NO_EPOCH or end == UNDEFINED_OFFSET:
            # Nothing to compare by epoch: keep only what was committed.
            target = min(partition_log.high_watermark, log_end)
        elif leader_epoch in (requested, NO_EPOCH):
            target = min(end, log_end)
        else:
            # The leader knows our epoch only up to an older one: where does ours end?
            our_epoch, our_end = partition_log.end_offset_for_epoch(leader_epoch)
            if our_epoch == leader_epoch:
                target = min(end, our_end)
            else:
                target, final = our_end, False
        if target < log_end:
            log.info(
                "%s: truncating %d..%d to agree with leader %d",
                partition_log.name,
                target,
                log_end,
                self.leader.node_id,
            )
            try:
                partition_log.truncate_to(target, self._clock())
            except StorageIOError as exc:
                # The data directory failing: reported (it goes offline), tried again later.
                partition_log.on_io_error("truncation", partition_log.name, exc)
                self._delay(partition)
                return False
            self._on_replicated(partition_log)
        return final

    # -- fetching ------------------------------------------------------------------

    async def _fetch(self, partitions: list[FollowedPartition], wait_ms: int) -> None:
        fetch = self._session.build(
            {
                (p.log.topic, p.log.partition): PartitionFetch(
                    fetch_offset=p.log.log_end_offset,
                    current_leader_epoch=p.leader_epoch,
                    log_start_offset=p.log.log_start_offset,
                    partition_max_bytes=FETCH_MAX_BYTES,
                )
                for p in partitions
            }
        )
        try:
            response = await self._interruptible(
                self._connection.request(
                    ApiKey.FETCH,
                    FETCH_VERSION,
                    timeout_s=wait_ms / 1000,
                    replica_id=self.node_id,
                    max_wait_ms=wait_ms,
                    min_bytes=1,
                    max_bytes=FETCH_RESPONSE_MAX_BYTES,
                    isolation_level=0,
                    session_id=fetch.session_id,
                    session_epoch=fetch.epoch,
                    topics=[
                        {
                            "topic": topic,
                            "topic_id": None,
                            "partitions": [
                                {
                                    "partition": index,
                                    "current_leader_epoch": wanted.current_leader_epoch,
                                    "fetch_offset": wanted.fetch_offset,
                                    "last_fetched_epoch": wanted.last_fetched_epoch,
                                    "log_start_offset": wanted.log_start_offset,
                                    "partition_max_bytes": wanted.partition_max_bytes,
                                }
                                for index, wanted in members.items()
                            ],
                        }
                        for topic, members in _by_topic(fetch.partitions).items()
                    ],
                    forgotten_topics_data=[
                        {"topic": topic, "partitions": list(members)}
                        for topic, members in _by_topic(dict.fromkeys(fetch.forgotten)).items()
                    ],
                    rack_id="",
                )
            )
        except PeerError:
            self._session.handle_error()
            raise
        if response is None:
            return
        answered = {
            (topic_result.topic, result.partition_index)
            for topic_result in response.responses
            for result in topic_result.partitions
        }
        if not self._session.handle_response(
            fetch, response.error_code, response.session_id, answered
        ):
            if response.error_code in SESSION_ERRORS or response.error_code == ErrorCode.NONE:
                return  # the next fetch, a full one, starts the session again
            raise PeerError(f"fetch answered {ErrorCode(response.error_code).name}")
        for topic_result in response.responses:
            for result in topic_result.partitions:
                partition = self.partitions.get((topic_result.topic, result.partition_index))
                if partition is not None and partition in partitions:
                    await self._apply(partition, result)

    async def _interruptible(self, request: Coroutine[Any, Any, _T]) -> _T | None:
        """The request's answer; None if a partition to truncate came first, and then the
        connection is closed (an answer half read cannot be left on it) and the session
        starts again with the next, full, fetch."""
        if self._interrupt.is_set():
            request.close()  # never sent: the connection stays as it is
            self._session.handle_error()  # the session was told of what is not sent
            return None
        sending = asyncio.ensure_future(request)
        interrupted = asyncio.ensure_future(self._interrupt.wait())
        try:
            await asyncio.wait({sending, interrupted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            interrupted.cancel()
            if not sending.done():
                sending.cancel()
                await asyncio.gather(sending, return_exceptions=True)
                self._connection.close()
                self._session.handle_error()
        if sending.cancelled():
            return None
        return sending.result()

    async def _apply(self, partition: FollowedPartition, result: Any) -> None:
        partition_log = partition.log
        error = result.error_code
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            if 0 <= partition_log.log_end_offset < result.log_start_offset:
                # The leader no longer has what we need next: start again at its log start.
                log.info(
                    "%s: leader's log starts at %d past our end %d; starting over there",
                    partition_log.name,
                    result.log_start_offset,
                    partition_log.log_end_offset,
                )
                try:
                    partition_log.truncate_fully_and_start_at(result.log_start_offset)
                except StorageIOError as exc:
                    partition_log.on_io_error("truncation", partition_log.name, exc)
                    self._delay(partition)
                    return
                self._on_replicated(partition_log)
            else:
                partition.needs_truncation = True
            return
        if error != ErrorCode.NONE:
            # Not (or no longer) the leader, or another epoch: the new state's watch
            # tells this broker whom to follow; meanwhile, back off.
            self._delay(partition)
            return
        previous_high_watermark = partition_log.high_watermark
        records = result.records
        if records and self._quota is not None:
            listed = partition_log.config.follower_replication_throttled_replicas
            if self._quota.is_throttled(listed, partition_log.partition):
                self._quota.record(len(records))
        if records:
            try:
                try:
                    partition_log.append_as_follower(records, self._clock())
                except UnexpectedAppendOffset as exc:
                    if partition_log.log_start_offset != partition_log.log_end_offset:
                        raise
                    # An empty replica takes the leader's batches from where they start.
                    partition_log.truncate_fully_and_start_at(exc.first_offset)
                    partition_log.append_as_follower(records, self._clock())
            except StorageIOError as exc:
                # A full or failing disk: nothing was stored; fetch again later.
                partition_log.on_io_error("append", partition_log.name, exc)
                self._delay(partition)
                return
            except StorageError as exc:
                log.warning("%s: %s; truncating again", partition_log.name, exc)
                partition.needs_truncation = True
                return
            try:
                await self._durability.after_append(partition_log)
            except StorageIOError as exc:
                partition_log.on_io_error("flush", partition_log.name, exc)
                self._delay(partition)
                return
        high_watermark = partition_log.high_watermark
        if result.high_watermark >= 0:
            high_watermark = partition_log.set_high_watermark(
                min(result.high_watermark, partition_log.log_end_offset)
            )
        if records or high_watermark != previous_high_watermark:
            self._on_replicated(partition_log)


def _by_topic(partitions: dict[tuple[str, int], _T]) -> dict[str, dict[int, _T]]:
    by_topic: dict[str, dict[int, _T]] = {}
    for (topic, index), value in partitions.items():
        by_topic.setdefault(topic, {})[index] = value
    return by_topic


def _latest_epoch(partition_log: PartitionLog) -> int:
    latest = partition_log.latest_epoch
    return NO_EPOCH if latest is None else latest

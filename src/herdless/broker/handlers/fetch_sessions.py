"""Fetch sessions (KIP-227): the broker remembers what a fetcher asks for, so it need not.

A fetcher (consumer or follower) opens a session with a full fetch at epoch 0;
the answer carries a session id. Later fetches name the session and its next
epoch and list only the partitions whose fetch offset or limits changed, plus
the partitions to forget; the answer leaves out every partition with nothing
new to say (no records, the same high watermark, last stable offset and log
start offset, no error). With hundreds of idle partitions that shrinks both
the request and the response to almost nothing.

As Kafka's FetchSessionCache: at most `max.incremental.fetch.session.cache.slots`
sessions. When it is full, a new session may take the place of one that has not
been used for EVICTION_MS, or else of the least valuable one that is older than
EVICTION_MS: a consumer's before a follower's, then the one with fewer
partitions. A follower's session may also take the place of any consumer's.
Kafka splits the cache into 8 shards, each with its own lock and an eighth of
the slots, because its request threads contend for it; one event loop has no
such contention, so herdless keeps one cache, as Kafka did before 3.8, and
eviction weighs every session against every other.

Sans clock: every call that needs the time takes `now`, in milliseconds on a
clock that does not go backwards.
"""

from __future__ import annotations

import bisect
import random
import uuid
from collections.abc import Sized
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from herdless.protocol.errors import ErrorCode
from herdless.protocol.fetch_metadata import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    next_epoch,
)

MAX_SESSION_ID = 2**31 - 1
# Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: how long a session is safe from
# being evicted after it is created, and how long unused before it is stale.
EVICTION_MS = 120_000
DEFAULT_MAX_SESSIONS = 1_000

# (privileged, partitions, id): the session that sorts first is evicted first.
EvictableKey = tuple[bool, int, int]
# A session's key, and whether any newcomer, or only a follower's, may evict it.
_Filing = tuple[EvictableKey, bool, bool]

# A partition as a session knows it: (topic id, index) in sessions that use topic ids
# (Fetch v13+), else (topic name, index).
PartitionKey = tuple[uuid.UUID | str | None, int]


class PartitionResponse(Protocol):
    """What a session compares of a partition's answer (a FetchResponse PartitionData)."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    preferred_read_replica: int
    records: Sized | None


Response = TypeVar("Response", bound=PartitionResponse)


@dataclass(slots=True, eq=False)
class CachedPartition:
    """One partition of a fetch: what the fetcher asked, and what it was last told."""

    topic: str | None
    topic_id: uuid.UUID | None
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    # The fetcher's own log start offset (a follower's), not this broker's.
    log_start_offset: int = -1
    last_fetched_epoch: int = -1
    # As last answered: a partition whose answer would repeat these is left out.
    high_watermark: int = -1
    last_stable_offset: int = -1
    local_log_start_offset: int = -1

    def key(self, uses_topic_ids: bool) -> PartitionKey:
        return (self.topic_id if uses_topic_ids else self.topic, self.partition)

    def update_request(self, requested: CachedPartition) -> None:
        self.fetch_offset = requested.fetch_offset
        self.partition_max_bytes = requested.partition_max_bytes
        self.current_leader_epoch = requested.current_leader_epoch
        self.log_start_offset = requested.log_start_offset
        self.last_fetched_epoch = requested.last_fetched_epoch

    def remember(self, response: PartitionResponse) -> None:
        self.high_watermark = response.high_watermark
        self.last_stable_offset = response.last_stable_offset
        self.local_log_start_offset = response.log_start_offset

    def must_respond(self, response: PartitionResponse) -> bool:
        """Whether an incremental answer must carry this partition; remembers what it says.

        An error is always told, and leaves the high watermark unknown so that the
        partition is told again once the error clears. Unlike Kafka's, a moved last
        stable offset alone is told too: a read_committed consumer waits on it.
        """
        changed = (
            bool(response.records)
            or response.high_watermark != self.high_watermark
            or response.last_stable_offset != self.last_stable_offset
            or response.log_start_offset != self.local_log_start_offset
            or response.preferred_read_replica >= 0
        )
        self.remember(response)
        if response.error_code != ErrorCode.NONE:
            self.high_watermark = -1
            return True
        return changed


@dataclass(eq=False)
class FetchSession:
    id: int
    # A follower's session: only another follower's can evict it.
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    # The epoch the next incremental fetch must carry.
    epoch: int
    # In the order they are read: a partition that returned records moves to the end,
    # so that a response's byte budget goes round all of them.
    partitions: dict[PartitionKey, CachedPartition]

    def update(
        self, requested: dict[PartitionKey, CachedPartition], forgotten: list[PartitionKey]
    ) -> None:
        """Take an incremental fetch's added and changed partitions, drop the forgotten."""
        for key, partition in requested.items():
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = partition
            else:
                cached.update_request(partition)
        for key in forgotten:
            self.partitions.pop(key, None)


class FetchSessionCache:
    """The broker's fetch sessions, by id; eviction as Kafka's FetchSessionCacheShard."""

    def __init__(
        self,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        eviction_ms: int = EVICTION_MS,
        rng: random.Random | None = None,
    ) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        # Least recently used first: a touch moves a session to the end.
        self._sessions: dict[int, FetchSession] = {}
        # Sorted (privileged, size, id) of the sessions each kind of newcomer may evict,
        # as they were when last touched, and where each session is filed.
        self._evictable_by_all: list[EvictableKey] = []
        self._evictable_by_privileged: list[EvictableKey] = []
        self._filed: dict[int, _Filing] = {}
        self.total_partitions = 0
        self.evictions = 0
        # Fetches answered with a session error, by error: a client recovers from each
        # with a full fetch, so a steady count means sessions that do not last.
        self.errors: dict[ErrorCode, int] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def create(
        self,
        now: int,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: dict[PartitionKey, CachedPartition],
    ) -> int:
        """A new session's id, or INVALID_SESSION_ID if there is no room for it."""
        if len(self._sessions) >= self.max_sessions and not self._evict(
            privileged, len(partitions), now
        ):
            return INVALID_SESSION_ID
        session = FetchSession(
            id=self._new_session_id(),
            privileged=privileged,
            uses_topic_ids=uses_topic_ids,
            creation_ms=now,
            last_used_ms=now,
            epoch=next_epoch(INITIAL_EPOCH),
            partitions=partitions,
        )
        self._sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._unfile(session_id)
        return session

    def touch(self, session: FetchSession, now: int) -> None:
        """Mark a session used at `now` and refile it under its current size."""
        self._sessions[session.id] = self._sessions.pop(session.id)
        session.last_used_ms = now
        # Young sessions are safe from eviction, a young follower's even from followers.
        old_enough = now - session.creation_ms > self.eviction_ms
        filing = (
            (session.privileged, len(session.partitions), session.id),
            old_enough,
            old_enough or not session.privileged,
        )
        if self._filed.get(session.id) == filing:
            return
        self._unfile(session.id)
        key, by_all, by_privileged = self._filed[session.id] = filing
        if by_all:
            bisect.insort(self._evictable_by_all, key)
        if by_privileged:
            bisect.insort(self._evictable_by_privileged, key)
        self.total_partitions += key[1]

    def _unfile(self, session_id: int) -> None:
        filing = self._filed.pop(session_id, None)
        if filing is None:
            return
        key, by_all, by_privileged = filing
        if by_all:
            _discard(self._evictable_by_all, key)
        if by_privileged:
            _discard(self._evictable_by_privileged, key)
        self.total_partitions -= key[1]

    def _evict(self, privileged: bool, size: int, now: int) -> bool:
        """Make room for a new session of `size` partitions, if one may be evicted.

        The least recently used session goes if it is stale; else the least valuable
        one the newcomer may evict, if it is worth less than the newcomer: a consumer's
        is worth less than a follower's, and fewer partitions less than more.
        """
        if not self._sessions:
            return False
        least_recent = next(iter(self._sessions.values()))
        if now - least_recent.last_used_ms > self.eviction_ms:
            victim = least_recent.id
        else:
            evictable = self._evictable_by_privileged if privileged else self._evictable_by_all
            # The newcomer's id sorts before every real one: a tie is no reason to evict.
            if not evictable or (privileged, size, INVALID_SESSION_ID) < evictable[0]:
                return False
            victim = evictable[0][2]
        self.remove(victim)
        self.evictions += 1
        return True

    def counted(self, error_code: ErrorCode) -> ErrorCode:
        """`error_code`, once counted among the session errors answered."""
        self.errors[error_code] = self.errors.get(error_code, 0) + 1
        return error_code

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, MAX_SESSION_ID)
            if session_id not in self._sessions:
                return session_id

    # -- one fetch's context, as Kafka's FetchManager.newContext builds it ---------------

    def new_context(
        self,
        now: int,
        session_id: int,
        epoch: int,
        privileged: bool,
        uses_topic_ids: bool,
        requested: dict[PartitionKey, CachedPartition],
        forgotten: list[PartitionKey],
    ) -> FetchContext:
        """How to serve one fetch request: which partitions to read, and how to answer.

        A full fetch (epoch 0 or -1) closes the session it names; at epoch 0 it opens
        a new one once it is answered. An incremental fetch must name a live session
        at its current epoch, in the same naming (topic names or ids) it was opened
        with; it moves the session to the next epoch.
        """
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            if epoch == FINAL_EPOCH:
                return SessionlessContext(list(requested.values()))
            return FullContext(self, now, privileged, uses_topic_ids, requested)
        session = self._sessions.get(session_id)
        if session is None:
            return SessionErrorContext(self.counted(ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
        if session.epoch != epoch:
            return SessionErrorContext(self.counted(ErrorCode.INVALID_FETCH_SESSION_EPOCH))
        if session.uses_topic_ids != uses_topic_ids:
            return SessionErrorContext(self.counted(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR))
        session.update(requested, forgotten)
        if not session.partitions:
            self.remove(session.id)
            return SessionlessContext(list(requested.values()))
        self.touch(session, now)
        session.epoch = next_epoch(session.epoch)
        return IncrementalContext(self, session, epoch)


def _discard(keys: list[EvictableKey], key: EvictableKey) -> None:
    index = bisect.bisect_left(keys, key)
    if index < len(keys) and keys[index] == key:
        del keys[index]


@dataclass
class SessionAnswer(Generic[Response]):
    """The top level of a fetch answer, and the partitions it carries in order."""

    error_code: ErrorCode
    session_id: int
    partitions: list[tuple[CachedPartition, Response]]


class FetchContext:
    """One fetch request's partitions to read, and how their answers become the response."""

    # Read in this order; the wait for min_bytes counts all of them.
    partitions: list[CachedPartition]

    def answer(self, read: list[tuple[CachedPartition, Response]]) -> SessionAnswer[Response]:
        raise NotImplementedError


class SessionErrorContext(FetchContext):
    """The session named cannot be used: nothing is read, the error is the answer."""

    def __init__(self, error_code: ErrorCode) -> None:
        self.error_code = error_code
        self.partitions = []

    def answer(self, read: list[tuple[CachedPartition, Response]]) -> SessionAnswer[Response]:
        return SessionAnswer(self.error_code, INVALID_SESSION_ID, [])


class SessionlessContext(FetchContext):
    """A full fetch that opens no session: every partition asked for is answered."""

    def __init__(self, partitions: list[CachedPartition]) -> None:
        self.partitions = partitions

    def answer(self, read: list[tuple[CachedPartition, Response]]) -> SessionAnswer[Response]:
        return SessionAnswer(ErrorCode.NONE, INVALID_SESSION_ID, read)


class FullContext(FetchContext):
    """A full fetch at epoch 0: answered whole, then kept as a new session if there is room."""

    def __init__(
        self,
        cache: FetchSessionCache,
        now: int,
        privileged: bool,
        uses_topic_ids: bool,
        requested: dict[PartitionKey, CachedPartition],
    ) -> None:
        self._cache = cache
        self._now = now
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids
        self._requested = requested
        self.partitions = list(requested.values())

    def answer(self, read: list[tuple[CachedPartition, Response]]) -> SessionAnswer[Response]:
        for partition, response in read:
            partition.remember(response)
        session_id = self._cache.create(
            self._now, self._privileged, self._uses_topic_ids, self._requested
        )
        return SessionAnswer(ErrorCode.NONE, session_id, read)


class IncrementalContext(FetchContext):
    """An incremental fetch: every partition of the session is read, the changed answered."""

    def __init__(self, cache: FetchSessionCache, session: FetchSession, request_epoch: int) -> None:
        self._cache = cache
        self.session = session
        self._request_epoch = request_epoch
        self.partitions = list(session.partitions.values())

    def answer(self, read: list[tuple[CachedPartition, Response]]) -> SessionAnswer[Response]:
        session = self.session
        if session.epoch != next_epoch(self._request_epoch):
            # Another fetch in this session was served while this one waited: the client
            # sent two at once, and only the later one's answer can be right.
            error_code = self._cache.counted(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            return SessionAnswer(error_code, session.id, [])
        kept = []
        for partition, response in read:
            if not partition.must_respond(response):
                continue
            kept.append((partition, response))
            if response.records:
                key = partition.key(session.uses_topic_ids)
                session.partitions[key] = session.partitions.pop(key)
        return SessionAnswer(ErrorCode.NONE, session.id, kept)

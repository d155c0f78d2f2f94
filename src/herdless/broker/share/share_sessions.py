"""Share sessions (KIP-932): what a share consumer fetches from this broker, remembered
between its requests, keyed by group and member id rather than by a session id.

As a fetch session (fetch_sessions.py), a share session opens with a full ShareFetch at
epoch 0, whose partitions it keeps; each later ShareFetch carries the next epoch, the
partitions to add and those to forget; ShareAcknowledge carries the next epoch too. A
request at epoch -1 is the member's last: its acknowledgements are applied and the
session closes, releasing the records the member still holds.

As Kafka's ShareSessionCache: at most `group.share.max.share.sessions` sessions; a new
one is refused SHARE_SESSION_LIMIT_REACHED when they are all taken. A member opening a
session again replaces its own. Sessions are not evicted for being idle: they end with
the member (its last request, or its leaving the share group).

Sans clock: calls that need the time take `now`, in monotonic milliseconds.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from herdless.protocol.errors import ErrorCode
from herdless.protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, next_epoch

# Kafka's group.share.max.share.sessions default.
DEFAULT_MAX_SHARE_SESSIONS = 2_000

# (group id, member id)
ShareSessionKey = tuple[str, str]
# (topic id, partition index)
ShareSessionPartition = tuple[uuid.UUID, int]


class ShareSessionError(Exception):
    """A share-session request refused with a Kafka error code, for the whole request."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(eq=False)
class ShareSession:
    key: ShareSessionKey
    # The epoch the member's next request must carry.
    epoch: int
    creation_ms: int
    last_used_ms: int
    # In the order they were added; a dict for order and fast membership.
    partitions: dict[ShareSessionPartition, None] = field(default_factory=dict)

    def update(
        self, added: Iterable[ShareSessionPartition], forgotten: Iterable[ShareSessionPartition]
    ) -> tuple[list[ShareSessionPartition], list[ShareSessionPartition]]:
        """Add and forget partitions; returns those that were new and those that went."""
        new = [p for p in dict.fromkeys(added) if p not in self.partitions]
        for partition in new:
            self.partitions[partition] = None
        gone = [p for p in dict.fromkeys(forgotten) if p in self.partitions]
        for partition in gone:
            del self.partitions[partition]
        return new, gone


class ShareSessionCache:
    def __init__(self, max_sessions: int = DEFAULT_MAX_SHARE_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[ShareSessionKey, ShareSession] = {}
        # (group id, partition) -> how many of the group's sessions here fetch it.
        self._sharing: Counter[tuple[str, ShareSessionPartition]] = Counter()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: ShareSessionKey) -> ShareSession | None:
        return self._sessions.get(key)

    def sessions(self) -> list[ShareSession]:
        return list(self._sessions.values())

    def sharing(self, group_id: str, partition: ShareSessionPartition) -> int:
        """How many members of the group fetch `partition` from this broker."""
        return self._sharing[(group_id, partition)]

    def for_fetch(
        self,
        key: ShareSessionKey,
        epoch: int,
        added: Iterable[ShareSessionPartition],
        forgotten: Iterable[ShareSessionPartition],
        now: int,
    ) -> ShareSession:
        """The session a ShareFetch at `epoch` is served in (Kafka's newContext): at 0 a
        new one with the partitions named, replacing the member's own; at -1 the open
        one, which the caller closes once answered; else the open one at that epoch,
        with the partitions added and forgotten, moved to the next epoch.
        ShareSessionError otherwise."""
        if epoch == INITIAL_EPOCH:
            self.close(key)
            if len(self._sessions) >= self.max_sessions:
                raise ShareSessionError(
                    ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                    f"the broker has its {self.max_sessions} share sessions",
                )
            session = ShareSession(key, next_epoch(INITIAL_EPOCH), now, now)
            session.update(added, ())
            self._sessions[key] = session
            self._count(key[0], session.partitions, 1)
            return session
        session = self._current(key, epoch)
        if epoch != FINAL_EPOCH:
            new, gone = session.update(added, forgotten)
            self._count(key[0], new, 1)
            self._count(key[0], gone, -1)
            self._advance(session, now)
        return session

    def for_acknowledge(self, key: ShareSessionKey, epoch: int, now: int) -> ShareSession:
        """The session a ShareAcknowledge at `epoch` is served in: an open one (none is
        opened by acknowledging: epoch 0 is INVALID_SHARE_SESSION_EPOCH), moved to the
        next epoch unless this is the member's last request."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                "a share session is opened by ShareFetch, not ShareAcknowledge",
            )
        session = self._current(key, epoch)
        if epoch != FINAL_EPOCH:
            self._advance(session, now)
        return session

    def close(self, key: ShareSessionKey) -> ShareSession | None:
        session = self._sessions.pop(key, None)
        if session is not None:
            self._count(key[0], session.partitions, -1)
        return session

    def _count(
        self, group_id: str, partitions: Iterable[ShareSessionPartition], delta: int
    ) -> None:
        for partition in partitions:
            key = (group_id, partition)
            count = self._sharing[key] + delta
            if count:
                self._sharing[key] = count
            else:
                del self._sharing[key]

    def _current(self, key: ShareSessionKey, epoch: int) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(
                ErrorCode.SHARE_SESSION_NOT_FOUND,
                f"no share session for member {key[1]} of group {key[0]}",
            )
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise ShareSessionError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                f"share session epoch {epoch}, expected {session.epoch}",
            )
        return session

    @staticmethod
    def _advance(session: ShareSession, now: int) -> None:
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now

"""A fetcher's side of a fetch session (KIP-227), as Kafka's FetchSessionHandler keeps it.

The follower's fetcher asks one leader for many partitions again and again,
mostly unchanged. The first fetch is full and opens a session; each later one
names only the partitions added or changed since the last (a new fetch offset,
log start offset or leader epoch) and forgets those no longer wanted; the
leader leaves out of its answer every partition with nothing new. Any error,
on the wire or from the session, sends the next fetch full again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from herdless.protocol.errors import ErrorCode
from herdless.protocol.fetch_metadata import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    next_epoch,
)

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """What a fetch asks of one partition."""

    fetch_offset: int
    current_leader_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    last_fetched_epoch: int = -1


@dataclass(frozen=True, slots=True)
class SessionFetch:
    """One fetch request's session fields and partitions."""

    session_id: int
    epoch: int
    # The partitions to name, in order: all of them in a full fetch.
    partitions: dict[TopicPartition, PartitionFetch]
    forgotten: list[TopicPartition]

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    def __init__(self, leader: int) -> None:
        self._leader = leader
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        # The session's partitions as the leader last heard them.
        self._partitions: dict[TopicPartition, PartitionFetch] = {}

    def build(self, wanted: dict[TopicPartition, PartitionFetch]) -> SessionFetch:
        """The next fetch of `wanted`: full, or only what changed since the last one."""
        if self.epoch == INITIAL_EPOCH:
            self._partitions = dict(wanted)
            return SessionFetch(self.session_id, self.epoch, dict(wanted), [])
        forgotten = [key for key in self._partitions if key not in wanted]
        for key in forgotten:
            del self._partitions[key]
        changed = {}
        for key, partition in wanted.items():
            if self._partitions.get(key) != partition:
                self._partitions[key] = changed[key] = partition
        return SessionFetch(self.session_id, self.epoch, changed, forgotten)

    def handle_response(
        self, sent: SessionFetch, error_code: int, session_id: int, answered: set[TopicPartition]
    ) -> bool:
        """Move the session on from a response to `sent`; False if its partitions must
        not be used (a session error, or an answer the session cannot explain)."""
        if error_code != ErrorCode.NONE:
            log.info(
                "broker %d refused fetch session %d at epoch %d: %s; fetching in full",
                self._leader,
                sent.session_id,
                sent.epoch,
                ErrorCode(error_code).name,
            )
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
            return False
        expected = set(self._partitions)
        if (sent.full and answered != expected) or not answered <= expected:
            log.info(
                "broker %d answered a fetch in session %d with other partitions than the"
                " session's: %s; fetching in full",
                self._leader,
                session_id,
                sorted(answered ^ expected if sent.full else answered - expected),
            )
            self.epoch = INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:
            # No session (the leader had no room, or closed it): full fetches until one opens.
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif sent.full:
            self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The fetch got no answer: the next one closes the session and opens another."""
        self.epoch = INITIAL_EPOCH

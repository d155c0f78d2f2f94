"""What every coordinator operation hands back to the broker.

The contract: the broker appends `records` to the shard's `__consumer_offsets`
partition, and sends `replies` only once every record of this result and of
all earlier results of the same shard is durable. Releasing in order is what
makes a reply that wrote nothing (an OffsetFetch, a parked SyncGroup completed
by someone else's write) safe: it can never reveal state the log might lose.
This is Kafka's CoordinatorRuntime rule (a response waits for the high
watermark to pass the last offset written before it).

If an append fails, the shard's in-memory state is ahead of the log; the
broker should unload the shard (`CoordinatorShard.unload`) and load it again
by replay, which rebuilds exactly what the log holds.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

from herdless.coordinator.messages import RebalanceRecord
from herdless.coordinator.now import Now
from herdless.coordinator.records import Record


class TimerKind(Enum):
    HEARTBEAT = "heartbeat"  # session expiry of one member (and the new-member join timeout)
    JOIN = "join"  # end of the join phase of a group's rebalance
    SYNC = "sync"  # members that never sent SyncGroup
    RETENTION = "retention"  # periodic offset expiry of the whole shard
    SESSION = "session"  # session expiry of one consumer group (KIP-848) member
    REVOCATION = "revocation"  # a consumer group member's rebalance timeout to revoke
    # A classic member of a consumer group told to rejoin, or that joined and must sync,
    # within its rebalance timeout.
    CLASSIC_JOIN = "classic-join"
    CLASSIC_SYNC = "classic-sync"
    # A consumer group's next target assignment, once its assignment interval has passed.
    ASSIGNMENT = "assignment"
    SHARE_SESSION = "share-session"  # session expiry of one share group (KIP-932) member


@dataclass(frozen=True, slots=True)
class TimerKey:
    kind: TimerKind
    group_id: str = ""
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class ScheduleTimer:
    """Fire `key` at `deadline_ms` on the monotonic clock, replacing any deadline the key
    had. Groups key their timers by TimerKey; another coordinator by its own keys."""

    key: Hashable
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: Hashable


TimerChange = ScheduleTimer | CancelTimer


@dataclass(frozen=True, slots=True)
class Reply:
    """A response for the request the caller identified by `token`.

    Tokens are opaque to the coordinator; the result of one operation can carry
    replies to other, parked requests (the JoinGroups a rebalance completes).
    """

    token: Hashable
    response: Any


@dataclass(frozen=True, slots=True)
class OffloadedWork:
    """Work the coordinator asks to have done off the broker's event loop (a server
    assignor's run, KIP-1263): the broker calls `run()` on a worker thread, then hands
    what it returned (None if it raised) to `complete` on the loop, with the time then,
    and applies the Result like any operation's. `run` reads only what it was given."""

    run: Callable[[], Any]
    complete: Callable[[Any, Now], Result]


class TransactionalProducer(NamedTuple):
    """The producer a transactional write belongs to (TxnOffsetCommit): its records go
    into the log as one transactional batch of this producer id and epoch, and count
    only once the transaction's COMMIT marker follows them.

    The runtime applies such records itself, through the shard's replay_transactional,
    once the log took them: the log may refuse them (a fenced producer's epoch), and
    then the operation changed nothing and its caller gets the log's error."""

    producer_id: int
    producer_epoch: int


@dataclass(slots=True, init=False)
class Result:
    records: list[Record]
    replies: list[Reply]
    timers: list[TimerChange]
    # Rebalances (and membership changes without one) that completed: (group id, entry).
    # The broker publishes them for operators; they are not coordinator state.
    rebalances: list[tuple[str, RebalanceRecord]]
    offloaded: list[OffloadedWork]
    # Set when `records` belong to a transaction; None for the ordinary writes of groups.
    producer: TransactionalProducer | None

    # Written out: every operation builds a Result, and a dataclass's default factories
    # (a call of `list` per field) cost more than the lists (bench/broker_instructions.py).

    def __init__(
        self,
        records: list[Record] | None = None,
        replies: list[Reply] | None = None,
        timers: list[TimerChange] | None = None,
        rebalances: list[tuple[str, RebalanceRecord]] | None = None,
        offloaded: list[OffloadedWork] | None = None,
        producer: TransactionalProducer | None = None,
    ) -> None:
        self.records = [] if records is None else records
        self.replies = [] if replies is None else replies
        self.timers = [] if timers is None else timers
        self.rebalances = [] if rebalances is None else rebalances
        self.offloaded = [] if offloaded is None else offloaded
        self.producer = producer

    def extend(self, other: Result) -> None:
        if other.records:
            if self.records and other.producer != self.producer:
                # One Result is one batch: a transaction's records and others cannot share it.
                raise ValueError("records of different producers in one result")
            self.producer = other.producer
        self.records += other.records
        self.replies += other.replies
        self.timers += other.timers
        self.rebalances += other.rebalances
        self.offloaded += other.offloaded

    def reply_to(self, token: Hashable) -> Any:
        """The response for `token` in this result, or None if it is still parked."""
        for reply in self.replies:
            if reply.token == token:
                return reply.response
        return None

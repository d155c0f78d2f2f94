"""What a coordinator gives the runtime: a shard per partition, and how to build one.

A shard is a replicated state machine over its partition's log (Kafka's
CoordinatorShard). Operations change it and return a Result (result.py): the records
that make the change durable, the replies, timer changes. Replay applies one record of
the log to it: loading, a warm standby and live writes all end in the same state, which
is what lets the runtime rebuild a shard whose state ran ahead of the log.

The runtime only ever builds a shard by replay, and calls it in this order: replay
while loading (or as a standby), `on_loaded` once the log is replayed and the shard
serves, then operations, `poll` and `postpone_timers` while it serves, and `unload`
when it stops serving (leadership lost, or its state is rebuilt).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from herdless.coordinator.now import Now
from herdless.coordinator.result import Result
from herdless.coordinator.runtime.writer import TopicPartition


class CoordinatorShard(Protocol):
    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of the shard's partition, in log order; value None is a
        tombstone."""
        ...

    def on_loaded(self, now: Now) -> Result:
        """The partition is replayed and the shard serves from now on: start its timers."""
        ...

    def unload(self) -> Result:
        """The shard stops serving: answer the requests it parked (their replies are
        sent at once), cancel its timers. It writes no records."""
        ...

    def poll(self, now: Now) -> Result:
        """Fire every timer due at `now`."""
        ...

    def next_deadline(self) -> int | None:
        """The earliest timer's deadline on the monotonic clock, None with no timer.

        The runtime asks only when a Result scheduled a timer earlier than the one it
        holds, or after a poll: a deadline moved earlier must come with a ScheduleTimer
        in the Result that moved it. A deadline moved later needs nothing: the runtime
        polls early, finds nothing due, and asks again."""
        ...

    def postpone_timers(self, stalled_ms: int) -> Result:
        """The broker could not run for `stalled_ms`: move every deadline on by as much,
        since nobody could be heard meanwhile."""
        ...


@runtime_checkable
class ReplaysRuns(Protocol):
    """A shard that can also apply a run of consecutive records at once."""

    def replay_records(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        """replay() of each (key, value) in order, to the same end state."""
        ...


@runtime_checkable
class ReplaysTransactions(Protocol):
    """A shard whose partition holds transactional writes (the groups' TxnOffsetCommit),
    as Kafka's CoordinatorShard replays them: with their producer, then the marker that
    ends the transaction. A shard without these methods has transactional records
    replayed as any others, and markers passed over, as Kafka's default does."""

    def replay_transactional(
        self, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        """Apply one record of `producer_id`'s open transaction, in log order."""
        ...

    def replay_end_transaction(
        self, producer_id: int, producer_epoch: int, committed: bool
    ) -> None:
        """`producer_id`'s transaction ended here: what it wrote counts from now on if
        `committed`, else never. Loading and a live marker alike."""
        ...


S = TypeVar("S", bound=CoordinatorShard)

# A write: runs on the serving shard with the caller's token and the time, and returns
# the Result whose records are appended and whose replies are released once committed.
# The reply to the caller is the Reply with its token, in this Result or a later one
# (a parked JoinGroup is answered by another member's operation).
WriteOperation = Callable[[S, Hashable, Now], Result]
# A read: the response, computed from the shard's state at once and released after
# every earlier write is committed, so that it never shows state the log may lose.
ReadOperation = Callable[[S], Any]


@dataclass(frozen=True, slots=True)
class CoordinatorType(Generic[S]):
    """One kind of coordinator: its internal topic, and how to build an empty shard for
    one of its partitions."""

    topic: str
    build: Callable[[TopicPartition], S]
    # Whether a follower keeps a warm standby of the partition (a takeover then replays
    # only the uncommitted tail), or holds nothing until it leads.
    standby: bool = True

"""Replies held until the log has committed what they depend on (Kafka's
DeferredEventQueue), and the commit deadlines of the writes they wait for.

A reply waits for the high watermark to reach the log end as it was just after its
operation: past its own records, and past every record an earlier operation wrote.
Those offsets never go down along the queue, so releasing from its head as the high
watermark moves releases replies in the order of their operations; a reply that wrote
nothing (an OffsetFetch, a parked SyncGroup completed by another member's write) can
never reveal state the log might still lose.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from herdless.coordinator.result import Reply


@dataclass(slots=True)
class Deferred:
    # Released once the high watermark reaches this offset.
    offset: int
    replies: list[Reply]
    # Whether its own operation wrote records. One that did not has nothing of its own
    # that a commit would prove, so it must still lead when released.
    wrote: bool


class DeferredReplies:
    def __init__(self) -> None:
        # Read, not changed, on every request's path (an attribute test costs no call).
        self.pending: deque[Deferred] = deque()
        # (end offset, commit deadline on the monotonic clock) of each write not yet
        # committed, in log order, so the earliest deadline is the first.
        self.deadlines: deque[tuple[int, int]] = deque()

    def defer(self, entry: Deferred) -> None:
        self.pending.append(entry)

    def expect_commit(self, offset: int, deadline_ms: int) -> None:
        """Records up to `offset` must be committed by `deadline_ms`."""
        self.deadlines.append((offset, deadline_ms))

    def complete_up_to(self, committed: int) -> Iterator[Deferred]:
        """The entries the high watermark `committed` releases, in order, each taken off
        the queue as it is handed out."""
        deadlines = self.deadlines
        while deadlines and deadlines[0][0] <= committed:
            deadlines.popleft()
        queue = self.pending
        while queue and queue[0].offset <= committed:
            yield queue.popleft()

    def first_deadline(self) -> int | None:
        return self.deadlines[0][1] if self.deadlines else None

    def commit_overdue(self, now_ms: int) -> bool:
        """Whether a write waited past its deadline (Kafka's offsets.commit.timeout.ms)."""
        return bool(self.deadlines) and self.deadlines[0][1] <= now_ms

    def postpone(self, stalled_ms: int) -> None:
        """A stall of the broker is no fault of the followers: nobody could fetch."""
        self.deadlines = deque((offset, at + stalled_ms) for offset, at in self.deadlines)

    def clear(self) -> None:
        self.pending.clear()
        self.deadlines.clear()

"""A shard's timers: one table of keyed deadlines that every part of the shard schedules on.

Kafka's CoordinatorTimer: a timer is a key, a deadline and what firing does; scheduling
a key that is running replaces its deadline and callback, and cancelling is by key.
Deadlines are on the monotonic clock (now.py). The table is sans-IO: each change is
also written into the Result of the operation that made it (ScheduleTimer,
CancelTimer), which is how the broker knows when to come back and `poll`.

The classic groups, the consumer groups and the shard's offset retention each own
their keys (TimerKind); none reaches for another's timers but through this table.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from herdless.coordinator.now import Now
from herdless.coordinator.result import CancelTimer, Result, ScheduleTimer

# What firing does: it writes into the Result of the poll that fired it.
TimerCallback = Callable[[Result, Now], None]
# A timer's key: the group coordinator's TimerKey, or whatever another coordinator keys
# its timers by (the table only hashes keys; ties on deadline are broken by seq).
K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Timer:
    deadline_ms: int
    # Scheduling order: ties fire in it.
    seq: int
    callback: TimerCallback
    # The seq of this timer's entry in the deadline heap; that entry's deadline may be
    # earlier than deadline_ms (moved later in place) but never later.
    heap_seq: int


class CoordinatorTimer(Generic[K]):
    def __init__(self) -> None:
        self._timers: dict[K, _Timer] = {}
        # (deadline, seq, key) of every timer, and of some since cancelled or
        # rescheduled, which are dropped when they come to the top.
        self._deadlines: list[tuple[int, int, K]] = []
        self._seq = 0

    def schedule(self, out: Result, key: K, deadline_ms: int, cb: TimerCallback) -> None:
        """Fire `cb` at `deadline_ms`, replacing whatever `key` was set to."""
        self._seq += 1
        seq = self._seq
        timer = self._timers.get(key)
        if timer is not None and deadline_ms >= timer.deadline_ms:
            # Later than before, as every heartbeat moves its member's session expiry:
            # changed in place, and its heap entry moved only when it comes first. A heap
            # entry per heartbeat was garbage for the collector and a push per request.
            timer.deadline_ms, timer.seq, timer.callback = deadline_ms, seq, cb
        else:
            self._timers[key] = _Timer(deadline_ms, seq, cb, heap_seq=seq)
            deadlines = self._deadlines
            heapq.heappush(deadlines, (deadline_ms, seq, key))
            if len(deadlines) > 2 * len(self._timers) + 64:
                # Timers cancelled or moved earlier left entries behind: drop them.
                self._rebuild_deadlines()
        out.timers.append(ScheduleTimer(key, deadline_ms))

    def cancel(self, out: Result, key: K) -> None:
        if self._timers.pop(key, None) is not None:
            out.timers.append(CancelTimer(key))

    def cancel_all(self, out: Result) -> None:
        """Every timer, in the order they were first scheduled."""
        for key in list(self._timers):
            self.cancel(out, key)

    def is_scheduled(self, key: K) -> bool:
        return key in self._timers

    def scheduled(self) -> dict[K, int]:
        return {key: t.deadline_ms for key, t in self._timers.items()}

    def next_deadline(self) -> int | None:
        """The earliest deadline, None with no timer."""
        first = self._first_timer()
        return None if first is None else first[0]

    def fire(self, key: K, now: Now) -> Result:
        """Run `key`'s callback if it is due at `now`; nothing if it was cancelled or
        moved later since the caller looked."""
        out = Result()
        timer = self._timers.get(key)
        if timer is None or timer.deadline_ms > now.monotonic_ms:
            return out
        del self._timers[key]
        timer.callback(out, now)
        return out

    def poll(self, now: Now) -> Result:
        """Fire every due timer, earliest first (ties in scheduling order); a timer
        scheduled by one that fires fires in the same poll when it is due too."""
        out = Result()
        while (first := self._first_timer()) is not None and first[0] <= now.monotonic_ms:
            heapq.heappop(self._deadlines)
            out.extend(self.fire(first[1], now))
        return out

    def postpone(self, stalled_ms: int) -> Result:
        """Move every deadline on by `stalled_ms`."""
        out = Result()
        for key, timer in self._timers.items():
            timer.deadline_ms += stalled_ms
            out.timers.append(ScheduleTimer(key, timer.deadline_ms))
        self._rebuild_deadlines()
        return out

    def _first_timer(self) -> tuple[int, K] | None:
        """The deadline and key of the timer due first, its heap entry first in the heap.

        Entries of timers cancelled or replaced since are dropped on the way; the entry
        of a timer moved later in place is put where it now belongs, ordered among equal
        deadlines by when the timer was last scheduled.
        """
        deadlines = self._deadlines
        while deadlines:
            deadline_ms, seq, key = deadlines[0]
            timer = self._timers.get(key)
            if timer is None or timer.heap_seq != seq:
                heapq.heappop(deadlines)
            elif timer.seq != seq:
                timer.heap_seq = timer.seq
                heapq.heapreplace(deadlines, (timer.deadline_ms, timer.seq, key))
            else:
                return deadline_ms, key
        return None

    def _rebuild_deadlines(self) -> None:
        """One heap entry per live timer, at its current deadline. In place: poll() may
        be walking this very list."""
        deadlines = self._deadlines
        deadlines[:] = [(t.deadline_ms, t.seq, k) for k, t in self._timers.items()]
        for timer in self._timers.values():
            timer.heap_seq = timer.seq
        heapq.heapify(deadlines)

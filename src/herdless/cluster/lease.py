"""How long this broker's ZooKeeper session is certainly alive: the session lease.

A broker that leads partitions must stop before another broker can be elected in its
place. Another leader is elected only after this broker's session expires (its
/brokers/ids znode goes away and the controller notices). ZooKeeper expires a session no
sooner than the negotiated session timeout after the last request it received from it.
A request that got an answer was received after it was sent, so when a request sent at
time s (read before the request is queued) is answered within the same session, the
session lives at least until s + timeout. The deadline is the latest such s + timeout,
less a safety margin for the broker's own reaction time and the drift between clocks.

It uses the send time, never the answer time: a process paused (SIGSTOP, a long stall, a
suspended VM) between sending and reading an answer finds, when it resumes, a deadline
already behind it, even though the answer looks fresh. The lease is per session: it is
void as soon as the session is lost, and a new session starts with none. It says nothing
of leadership the controller moves while this broker lives (controlled shutdown,
reassignment): the leader epoch and the conditional ISR writes fence those.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sent:
    """When a request was sent, and in which session."""

    at: float
    session: int | None


class SessionLease:
    """Thread-safe: requests are answered on many threads, sessions lost on kazoo's."""

    def __init__(self, margin: float, clock: Callable[[], float]) -> None:
        """margin: the share of the session timeout kept back from the lease; clock: the
        monotonic clock, in seconds."""
        self._margin = margin
        self._clock = clock
        self._lock = threading.Lock()
        self._session: int | None = None
        self._deadline = -math.inf
        self.session_timeout: float | None = None

    def sending(self, session: int | None) -> Sent:
        """Note the time before a request is queued in the given (current) session."""
        return Sent(self._clock(), session)

    def answered(self, sent: Sent, current_session: int | None) -> None:
        """The request was answered (error codes included); current_session is the
        session now, which must still be the one it was sent in."""
        timeout = self.session_timeout
        if sent.session is None or timeout is None or sent.session != current_session:
            return
        deadline = sent.at + timeout * (1 - self._margin)
        with self._lock:
            if self._session != sent.session:
                self._session, self._deadline = sent.session, -math.inf
            self._deadline = max(self._deadline, deadline)

    def lost(self) -> None:
        with self._lock:
            self._session, self._deadline = None, -math.inf

    def deadline(self, current_session: int | None) -> float:
        """Until when current_session is certainly alive, in the clock's time; -inf when
        no answer in it proves anything."""
        with self._lock:
            if self._session is None or self._session != current_session:
                return -math.inf
            return self._deadline

"""Failed SASL logins counted per client address, and an address that fails too often
turned away for a while: connection.failed.authentication.delay.ms slows one connection's
guessing, this slows a client that opens many.

herdless's own settings: `connection.failed.authentication.limit` failures (default 20,
0 for no limit) within `connection.failed.authentication.window.ms` (default 60 s) turn
the address away until that many failures are older than the window.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

DEFAULT_LIMIT = 20
DEFAULT_WINDOW_MS = 60_000
# Addresses tracked at once: a flood of addresses must not grow the table without bound.
MAX_ADDRESSES = 10_000


class FailedLogins:
    def __init__(self, limit: int, window_ms: int, clock_ms: Callable[[], int]) -> None:
        self._limit = limit
        self._window_ms = window_ms
        self._clock_ms = clock_ms
        self._failures: dict[str, deque[int]] = {}

    def failed(self, address: str) -> None:
        if self._limit <= 0:
            return
        now = self._clock_ms()
        failures = self._failures.get(address)
        if failures is None:
            if len(self._failures) >= MAX_ADDRESSES:
                self._forget_quiet(now)
            failures = self._failures[address] = deque(maxlen=self._limit)
        failures.append(now)

    def turned_away(self, address: str) -> bool:
        """Whether the address has failed `limit` times within the window."""
        failures = self._failures.get(address)
        if failures is None or len(failures) < self._limit:
            return False
        return self._clock_ms() - failures[0] < self._window_ms

    def _forget_quiet(self, now: int) -> None:
        for address, failures in list(self._failures.items()):
            if not failures or now - failures[-1] >= self._window_ms:
                del self._failures[address]
        if len(self._failures) >= MAX_ADDRESSES:
            # Every tracked address failed within the window: the oldest goes.
            oldest = min(self._failures, key=lambda a: self._failures[a][-1])
            del self._failures[oldest]

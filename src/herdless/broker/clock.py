"""The broker's two clocks: the broker owns time, the layers below take it as an argument.

- monotonic_ms: every timeout, deadline, interval and lag (sessions, rebalance and
  join timeouts, replica lag, flush.ms, fetch sessions). It never steps, so an NTP
  correction or an operator setting the date changes no such decision; it means
  nothing to another process, so it is never written nor sent.
- wall_ms: every timestamp that is written (record times, LogAppendTime, offsets'
  commit and expiry times, a group's state time, the rebalance history) or compared
  with written ones (retention, cleaning, producer id expiry, offset expiry).

Each caller names the one it means; `now` reads both for the coordinator, which
needs both in one operation (coordinator/now.py).
"""

import time

from herdless.coordinator.now import Now


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def now() -> Now:
    return Now(wall_ms(), monotonic_ms())

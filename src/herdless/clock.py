"""The process's two clocks, read here and nowhere else; each layer is handed them.

- monotonic_ms: every timeout, deadline, interval and lag (sessions, rebalance and
  join timeouts, replica lag, flush.ms, fetch sessions). It never steps, so an NTP
  correction or an operator setting the date changes no such decision; it means
  nothing to another process, so it is never written nor sent.
- wall_ms: every timestamp that is written (record times, LogAppendTime, offsets'
  commit and expiry times, a group's state time, the rebalance history) or compared
  with written ones (retention, cleaning, producer id expiry, offset expiry).

The broker owns time: it reads these and passes them down, as a `now` argument to
each operation or, to a part that keeps time between operations (the logs' flush
bookkeeping), as the reader itself. A test hands such a part a clock of its own.
"""

import time


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000

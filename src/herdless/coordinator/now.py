"""The moment an operation runs, as the broker read it on both of its clocks.

The coordinator needs two kinds of time, and mixing them is how a stepped wall
clock (an NTP correction, an operator's `date -s`) used to expire live members
or keep dead ones for an hour:

- `monotonic_ms` for every deadline and interval: session, rebalance and join
  timeouts, the sync deadline, the retention check's period, the assignment
  interval. It never steps, and it means nothing outside this process: it is
  never written, and never compared with anything that was.
- `wall_ms` for every timestamp that is written, or compared with one that was:
  an offset's commit and expiry times, a group's current_state_timestamp, the
  rebalance history. Another broker reads these after a failover, so they must
  be on the clock every broker shares.

Kafka splits time the same way: its timers run on hiResClockMs (nanoTime), its
commit timestamps on currentTimeMillis. One value carrying both readings,
rather than two arguments, keeps every operation's signature as it was and
makes each use say which clock it means.
"""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Now:
    wall_ms: int
    monotonic_ms: int

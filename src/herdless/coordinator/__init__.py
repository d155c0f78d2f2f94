"""Sans-IO consumer-group coordinator: state machines, offset table, `__consumer_offsets` records.

It never touches sockets, files, threads or the clock. The broker feeds it
requests and `now` (its two clocks' readings: now.py), appends the records it
returns, sends its replies once those records are durable, drives its timers,
and runs the work it offloads (a server assignor) on a thread of its own.
"""

from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.now import Now
from herdless.coordinator.placement import partition_for
from herdless.coordinator.result import (
    CancelTimer,
    OffloadedWork,
    Reply,
    Result,
    ScheduleTimer,
    TimerChange,
    TimerKey,
    TimerKind,
)
from herdless.coordinator.shard import CoordinatorShard
from herdless.coordinator.state import GroupState

__all__ = [
    "CancelTimer",
    "CoordinatorConfig",
    "CoordinatorShard",
    "GroupState",
    "Now",
    "OffloadedWork",
    "Reply",
    "Result",
    "ScheduleTimer",
    "TimerChange",
    "TimerKey",
    "TimerKind",
    "partition_for",
]

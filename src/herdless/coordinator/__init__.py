"""Sans-IO consumer-group coordinator: state machines, offset table, `__consumer_offsets` records.

It never touches sockets, files, threads or the clock. The broker feeds it
requests and `now_ms`, appends the records it returns, sends its replies once
those records are durable, and drives its timers.
"""

from herdless.coordinator.config import CoordinatorConfig
from herdless.coordinator.placement import partition_for
from herdless.coordinator.result import (
    CancelTimer,
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
    "Reply",
    "Result",
    "ScheduleTimer",
    "TimerChange",
    "TimerKey",
    "TimerKind",
    "partition_for",
]

"""The states of a shard over its partition's log, what a request gets from a shard that
does not serve, and the runtime's settings."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from herdless.protocol.errors import ErrorCode


class ShardState(enum.Enum):
    # A follower of the partition: replays what is committed, serves no one.
    STANDBY = "standby"
    # The leader, replaying up to its log end before it serves.
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


# What a request gets from a shard that does not serve.
NOT_SERVING = {
    ShardState.STANDBY: ErrorCode.NOT_COORDINATOR,
    ShardState.LOADING: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ShardState.CLOSED: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    # How long a write may wait to be committed (Kafka's offsets.commit.timeout.ms).
    commit_timeout_ms: int = 5_000
    # How often timers and offloaded work that fell due while leadership was in doubt
    # look again whether it is settled.
    leadership_recheck_ms: int = 100

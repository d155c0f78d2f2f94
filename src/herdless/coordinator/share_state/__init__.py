"""Share groups' durable partition state (KIP-932): what a share partition's leader keeps
in `__share_group_state` through the share coordinator, in Kafka's vocabulary."""

from herdless.coordinator.share_state.config import ShareCoordinatorConfig
from herdless.coordinator.share_state.shard import (
    SHARE_GROUP_STATE_TOPIC,
    ShareCoordinatorShard,
    coordinator_key,
    parse_coordinator_key,
    share_coordinator,
    share_state_partition,
)
from herdless.coordinator.share_state.state import (
    UNINITIALIZED_START_OFFSET,
    PartitionState,
    RecordState,
    SharePartitionKey,
    ShareStateError,
    StateBatch,
)

__all__ = [
    "SHARE_GROUP_STATE_TOPIC",
    "UNINITIALIZED_START_OFFSET",
    "PartitionState",
    "RecordState",
    "ShareCoordinatorConfig",
    "ShareCoordinatorShard",
    "SharePartitionKey",
    "ShareStateError",
    "StateBatch",
    "coordinator_key",
    "parse_coordinator_key",
    "share_coordinator",
    "share_state_partition",
]

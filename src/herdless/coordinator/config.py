"""The coordinator's settings, with Kafka's broker defaults."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from herdless.coordinator.group_config import (
    CONSUMER_ASSIGNMENT_INTERVAL_MS,
    CONSUMER_ASSIGNOR_OFFLOAD_ENABLE,
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    SHARE_HEARTBEAT_INTERVAL_MS,
    SHARE_SESSION_TIMEOUT_MS,
    GroupConfigs,
)

_DAY_MS = 24 * 3600 * 1000


class ConsumerGroupMigrationPolicy(enum.Enum):
    """group.consumer.migration.policy: which online conversions between a classic group and
    a consumer group (KIP-848) the coordinator makes."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"  # classic to consumer, when a member joins with the new protocol
    DOWNGRADE = "downgrade"  # consumer to classic, when the last new-protocol member leaves
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrades(self) -> bool:
        return self in (
            ConsumerGroupMigrationPolicy.UPGRADE,
            ConsumerGroupMigrationPolicy.BIDIRECTIONAL,
        )

    @property
    def downgrades(self) -> bool:
        return self in (
            ConsumerGroupMigrationPolicy.DOWNGRADE,
            ConsumerGroupMigrationPolicy.BIDIRECTIONAL,
        )


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    # Not configurable in Kafka (GroupCoordinatorConfig.CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS).
    new_member_join_timeout_ms: int = 300_000
    max_group_size: int = 2**31 - 1  # group.max.size
    offsets_retention_ms: int = 7 * _DAY_MS  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    rebalance_history_size: int = 16
    # Consumer groups (KIP-848): the session and heartbeat interval are the broker's to set.
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    consumer_max_group_size: int = 2**31 - 1  # group.consumer.max.size
    # group.consumer.assignors: the server assignors members may name; the first is the default.
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_migration_policy: ConsumerGroupMigrationPolicy = (  # group.consumer.migration.policy
        ConsumerGroupMigrationPolicy.BIDIRECTIONAL
    )
    # KIP-1263: a group's next target assignment is computed no sooner than this after the
    # last one finished, so the joins and leaves that arrive together share one computation
    # (group.consumer.assignment.interval.ms; 0 computes one at every change).
    consumer_assignment_interval_ms: int = 1_000
    # ... and by the assignor off the broker's event loop (group.consumer.assignor.offload.enable).
    consumer_assignor_offload_enable: bool = True
    # Share groups (KIP-932): as consumer groups, the broker sets sessions and heartbeats.
    share_session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    share_heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    share_max_group_size: int = 200  # group.share.max.size
    # group.share.assignors: the server assignors of share groups; the first is used.
    share_assignors: tuple[str, ...] = ("simple",)
    # Groups' own settings (KIP-848 group configs), which the broker keeps up to date.
    group_configs: GroupConfigs = field(default_factory=GroupConfigs, compare=False, repr=False)

    def consumer_session_timeout_for(self, group_id: str) -> int:
        override = self.group_configs.override(group_id, CONSUMER_SESSION_TIMEOUT_MS)
        return self.consumer_session_timeout_ms if override is None else override

    def consumer_heartbeat_interval_for(self, group_id: str) -> int:
        override = self.group_configs.override(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS)
        return self.consumer_heartbeat_interval_ms if override is None else override

    def consumer_assignment_interval_for(self, group_id: str) -> int:
        override = self.group_configs.override(group_id, CONSUMER_ASSIGNMENT_INTERVAL_MS)
        return self.consumer_assignment_interval_ms if override is None else override

    def consumer_assignor_offload_for(self, group_id: str) -> bool:
        override = self.group_configs.flag(group_id, CONSUMER_ASSIGNOR_OFFLOAD_ENABLE)
        return self.consumer_assignor_offload_enable if override is None else override

    def share_session_timeout_for(self, group_id: str) -> int:
        override = self.group_configs.override(group_id, SHARE_SESSION_TIMEOUT_MS)
        return self.share_session_timeout_ms if override is None else override

    def share_heartbeat_interval_for(self, group_id: str) -> int:
        override = self.group_configs.override(group_id, SHARE_HEARTBEAT_INTERVAL_MS)
        return self.share_heartbeat_interval_ms if override is None else override

"""A share group's settings: the broker's, under the group's own where they can be read."""

from __future__ import annotations

from herdless.broker.share.share_group_settings import (
    AutoOffsetReset,
    IsolationLevel,
    ShareGroupLimits,
    share_group_settings,
)
from herdless.coordinator.group_config import GroupConfigs


def test_defaults_are_kafkas() -> None:
    settings = share_group_settings(ShareGroupLimits(), None, "g")
    assert settings.auto_offset_reset == AutoOffsetReset.LATEST
    assert settings.isolation_level == IsolationLevel.READ_UNCOMMITTED
    partition = settings.partition
    assert (partition.record_lock_duration_ms, partition.delivery_count_limit) == (30_000, 5)
    assert partition.max_record_locks == 2_000


def test_a_groups_own_values_within_the_brokers_bounds() -> None:
    configs = GroupConfigs()
    configs.put(
        "g",
        {
            "share.auto.offset.reset": "EARLIEST",
            "share.isolation.level": "read_committed",
            "share.record.lock.duration.ms": "20000",
            "share.delivery.count.limit": "3",
            "share.partition.max.record.locks": "500",
        },
    )
    configs.put(
        "bad",
        {
            "share.auto.offset.reset": "by_magic",
            "share.record.lock.duration.ms": "1000",  # below the broker's minimum
            "share.delivery.count.limit": "x",
        },
    )
    limits = ShareGroupLimits()
    settings = share_group_settings(limits, configs, "g")
    assert settings.auto_offset_reset == AutoOffsetReset.EARLIEST
    assert settings.isolation_level == IsolationLevel.READ_COMMITTED
    assert settings.partition.record_lock_duration_ms == 20_000
    assert settings.partition.delivery_count_limit == 3
    assert settings.partition.max_record_locks == 500
    assert share_group_settings(limits, configs, "bad") == share_group_settings(limits, None, "bad")

"""What a broker needs to serve ShareFetch and ShareAcknowledge as the leader of share
partitions: the share partitions it leads, the share sessions of their consumers, and
the broker's group.share.* settings. The broker builds it once, with the Persister of
its choosing (the in-memory one until the share coordinator keeps the state)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from herdless.broker.share.persister import Persister
from herdless.broker.share.share_group_settings import (
    ShareGroupLimits,
    ShareGroupSettings,
    share_group_settings,
)
from herdless.broker.share.share_partition_manager import SharePartitionManager
from herdless.broker.share.share_sessions import ShareSessionCache
from herdless.coordinator.group_config import GroupConfigs


@dataclass(eq=False)
class ShareLeader:
    partitions: SharePartitionManager
    sessions: ShareSessionCache
    limits: ShareGroupLimits
    # The groups' own configs (share.*), where the broker keeps them.
    group_configs: GroupConfigs | None = None

    @classmethod
    def build(
        cls,
        persister: Persister,
        wake: Callable[[str, int], None],
        limits: ShareGroupLimits,
        max_sessions: int,
        group_configs: GroupConfigs | None,
    ) -> ShareLeader:
        manager = SharePartitionManager(persister, wake)
        return cls(manager, ShareSessionCache(max_sessions), limits, group_configs)

    def settings(self, group_id: str) -> ShareGroupSettings:
        return share_group_settings(self.limits, self.group_configs, group_id)

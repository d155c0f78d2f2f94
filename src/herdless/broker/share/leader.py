"""What a broker needs to serve ShareFetch and ShareAcknowledge as the leader of share
partitions: the share partitions it leads, the share sessions of their consumers, and
the broker's group.share.* settings. The broker builds it once, with the Persister of
its choosing (the in-memory one until the share coordinator keeps the state)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from herdless.broker.share.dead_letter_writer import DeadLetterWriter
from herdless.broker.share.persister import Persister
from herdless.broker.share.share_group_settings import (
    ShareGroupLimits,
    ShareGroupSettings,
    share_group_settings,
)
from herdless.broker.share.share_metrics import SharePartitionMetrics
from herdless.broker.share.share_partition_manager import SharePartitionManager
from herdless.broker.share.share_sessions import ShareSessionCache
from herdless.coordinator.group_config import GroupConfigs
from herdless.coordinator.share_state.state import SharePartitionKey


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
        dead_letters: DeadLetterWriter | None = None,
        metrics: SharePartitionMetrics | None = None,
    ) -> ShareLeader:
        manager = SharePartitionManager(persister, wake, dead_letters=dead_letters, metrics=metrics)
        return cls(manager, ShareSessionCache(max_sessions), limits, group_configs)

    def settings(self, group_id: str) -> ShareGroupSettings:
        return share_group_settings(self.limits, self.group_configs, group_id)

    async def end_session(self, group_id: str, member_id: str) -> None:
        """Close the member's share session, if it has one, and release the records it
        holds of the session's partitions: at its last request, or when it leaves the
        share group (what the group coordinator calls once a member is gone)."""
        session = self.sessions.close((group_id, member_id))
        if session is None:
            return
        await self.partitions.release_member(
            [
                SharePartitionKey(group_id, topic_id, index)
                for topic_id, index in session.partitions
            ],
            member_id,
        )

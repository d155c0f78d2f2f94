"""What a broker needs to serve ShareFetch and ShareAcknowledge as the leader of share
partitions: the share partitions it leads, the share sessions of their consumers, and
the broker's group.share.* settings. The broker builds it once, with the Persister of
its choosing (the in-memory one until the share coordinator keeps the state)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from herdless.broker.share.dead_letter_writer import DeadLetterWriter
from herdless.broker.share.persister import Persister
from herdless.broker.share.share_group_settings import (
    ShareGroupLimits,
    ShareGroupSettings,
    share_group_settings,
)
from herdless.broker.share.share_partition_manager import SharePartitionManager
from herdless.broker.share.share_partition_metrics import SharePartitionMetrics
from herdless.broker.share.share_sessions import ShareSession, ShareSessionCache
from herdless.coordinator.group_config import GroupConfigs
from herdless.coordinator.share_state.state import SharePartitionKey

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ShareLeader:
    partitions: SharePartitionManager
    sessions: ShareSessionCache
    limits: ShareGroupLimits
    # The groups' own configs (share.*), where the broker keeps them.
    group_configs: GroupConfigs | None = None
    # Sessions being ended because their connection closed (kept from the collector).
    _ending: set[asyncio.Task[None]] = field(default_factory=set)

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

    def end_with_connection(self, session: ShareSession) -> Callable[[], None]:
        """What the connection `session` was opened on calls once it closes: the session
        ends and what the member holds is released, as Kafka 4.1 does (KAFKA-19015), so
        that a member that died gives its records back now rather than when their locks
        run out. Unless the member opened another session since (on another
        connection): that one is left alone."""

        def closed() -> None:
            if self.sessions.get(session.key) is not session:
                return
            task = asyncio.get_running_loop().create_task(self.end_session(*session.key))
            self._ending.add(task)
            task.add_done_callback(self._ended)

        return closed

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._ending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("cannot end a share session", exc_info=task.exception())

"""What a coordinator on an internal topic of its own does about that topic, the same
for the transaction coordinator (`__transaction_state`) and the share coordinator
(`__share_group_state`): on one broker alone, it leads every partition, the topic
being created by the first FindCoordinator that needs it, as Kafka creates it; in a
cluster, its shards follow the topic's leadership on the broker's one coordinator host,
and the topic is created through the cluster's topic admin."""

from __future__ import annotations

import logging

from herdless.broker.coordinators.coordinator_host import CoordinatorHost
from herdless.broker.replication.cluster_replica_manager import Role
from herdless.broker.topics.topic_admin import NewTopic, TopicAdmin, TopicAdminError
from herdless.coordinator.runtime import ShardState
from herdless.protocol.errors import ErrorCode
from herdless.storage import PartitionLog

log = logging.getLogger(__name__)


class InternalTopicCoordinator:
    # The internal topic, and the setting that sizes it (named when it is ignored).
    topic: str
    num_partitions_setting: str

    def __init__(
        self,
        host: CoordinatorHost,
        num_partitions: int,
        topic_configs: dict[str, str],
        standalone: bool,
    ) -> None:
        self.host = host
        self.num_partitions = num_partitions
        self.topic_configs = topic_configs
        # One broker alone: it creates the topic itself and leads all of it.
        self.standalone = standalone

    def resume(self) -> None:
        """One broker alone, at start: lead the topic if there is one, so that a broker
        nobody used this coordinator on holds none of its partitions."""
        if self.topic in self.host.logs.topics:
            self.start()

    def start(self) -> None:
        """One broker alone: lead every partition of the topic, created here if it is not
        there yet."""
        logs = self.host.logs
        topic = logs.topics.get(self.topic)
        if topic is None:
            topic = logs.create_topic(self.topic, self.num_partitions, self.topic_configs)
        elif topic.partition_count != self.num_partitions:
            # Placement hashes over the partition count; it cannot change under stored keys.
            log.warning(
                "%s has %d partitions; %s=%d is ignored",
                self.topic,
                topic.partition_count,
                self.num_partitions_setting,
                self.num_partitions,
            )
            self.num_partitions = topic.partition_count
        for partition in topic.partitions:
            self.on_leadership(self.topic, partition, Role.LEADER)

    def on_leadership(self, topic: str, partition: int, role: Role | None) -> None:
        if topic == self.topic:
            self.host.on_leadership(topic, partition, role)

    def on_replicated(self, partition_log: PartitionLog) -> None:
        if partition_log.topic == self.topic:
            self.host.on_replicated(partition_log)

    async def create_topic(self, topics: TopicAdmin, replication_factor: int) -> None:
        """The first FindCoordinator that needs the topic creates it, as Kafka does; in a
        cluster, TopicAdminError if it cannot be yet."""
        if self.standalone:
            self.start()
            return
        try:
            await topics.create_topic(
                NewTopic(
                    self.topic, self.num_partitions, replication_factor, configs=self.topic_configs
                )
            )
        except TopicAdminError as exc:
            if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise

    def coordinating(self) -> list[int]:
        """The partitions this broker leads (serving, or loading to)."""
        return [
            tp.partition
            for tp, state in self.host.runtime.partitions().items()
            if tp.topic == self.topic and state in (ShardState.ACTIVE, ShardState.LOADING)
        ]

"""The cluster as ZooKeeper describes it, kept current by watches: the metadata view of a cluster.

Every broker holds one, fed on the event loop from its ZooKeeper watches:
live brokers, the controller, topics' replica assignments and each
partition's state (leader, leader epoch, ISR). Clients are told what it says;
it may lag ZooKeeper by a watch, which is what Kafka's own metadata caches do
too: a client sent to a former leader gets NOT_LEADER_OR_FOLLOWER and asks again.

One thing it says better than Kafka's cache: a broker that cannot prove its own
ZooKeeper session alive (cut from ZooKeeper, or just resumed from a long pause) may
already have been replaced, so the view names it neither leader, nor controller, nor
even among the brokers until it can. Clients then ask another broker instead of being
sent back here to be refused (librdkafka stops using a broker that metadata no longer
lists, which it would do anyway once the session expires): an isolated Kafka broker
goes on naming itself until its session is gone, and its clients lose seconds to it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from herdless.cluster.layout import BrokerRegistration, PartitionState, TopicAssignment, Versioned
from herdless.cluster.metadata import BrokerEndpoint, PartitionMetadata, TopicMetadata

NO_LEADER = -1


class ClusterMetadata:
    def __init__(self, inter_broker_listener: str = "PLAINTEXT") -> None:
        self.cluster_id = ""
        # The listener brokers reach each other on: a broker's host and port here.
        self._inter_broker_listener = inter_broker_listener
        self._controller_id = NO_LEADER
        # This broker, and whether its ZooKeeper session is provably alive now.
        self._self_id = NO_LEADER
        self._self_vouched: Callable[[], bool] = lambda: True
        self._brokers: dict[int, BrokerEndpoint] = {}
        self._topics: dict[str, TopicAssignment] = {}
        self._states: dict[tuple[str, int], Versioned[PartitionState]] = {}
        self._configs: dict[str, dict[str, str]] = {}

    def vouch_for_self(self, node_id: int, session_alive: Callable[[], bool]) -> None:
        """Name `node_id` as a leader or the controller only while `session_alive()`."""
        self._self_id, self._self_vouched = node_id, session_alive

    # -- updates, from ZooKeeper watches ------------------------------------------

    @property
    def controller_id(self) -> int:
        return NO_LEADER if self._unvouched(self._controller_id) else self._controller_id

    @controller_id.setter
    def controller_id(self, node_id: int) -> None:
        self._controller_id = node_id

    def set_brokers(self, registrations: list[BrokerRegistration]) -> None:
        self._brokers = {r.broker_id: self._endpoint(r) for r in registrations}

    def _endpoint(self, registration: BrokerRegistration) -> BrokerEndpoint:
        listeners = registration.listeners()
        host, port = registration.host, registration.port
        for endpoint in listeners:
            if endpoint.listener == self._inter_broker_listener:
                host, port = endpoint.host, endpoint.port
        return BrokerEndpoint(registration.broker_id, host, port, registration.rack, listeners)

    def set_topic(self, name: str, assignment: TopicAssignment | None) -> None:
        if assignment is None:
            self._topics.pop(name, None)
            self._configs.pop(name, None)
            for key in [k for k in self._states if k[0] == name]:
                del self._states[key]
        else:
            self._topics[name] = assignment

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self._configs[name] = configs

    def set_partition_state(
        self, topic: str, partition: int, state: Versioned[PartitionState] | None
    ) -> None:
        if state is None:
            self._states.pop((topic, partition), None)
        else:
            self._states[(topic, partition)] = state

    # -- the view ---------------------------------------------------------------

    def brokers(self) -> list[BrokerEndpoint]:
        """The live brokers, this one included: where replicas may be placed."""
        return [self._brokers[node_id] for node_id in sorted(self._brokers)]

    def advertised_brokers(self) -> list[BrokerEndpoint]:
        """The brokers clients are told of: not this one while it cannot prove its session."""
        return [b for b in self.brokers() if not self._unvouched(b.node_id)]

    def broker(self, node_id: int) -> BrokerEndpoint | None:
        return self._brokers.get(node_id)

    def is_live(self, node_id: int) -> bool:
        return node_id in self._brokers

    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def assignment(self, name: str) -> TopicAssignment | None:
        return self._topics.get(name)

    def topic_id(self, name: str) -> uuid.UUID | None:
        assignment = self._topics.get(name)
        return None if assignment is None else assignment.topic_id

    def topic_configs(self, name: str) -> dict[str, str]:
        """The topic's configs as set in ZooKeeper (overrides of the broker's defaults)."""
        return self._configs.get(name, {})

    def partition_state_versioned(
        self, topic: str, partition: int
    ) -> Versioned[PartitionState] | None:
        return self._states.get((topic, partition))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, a in self._topics.items() if a.topic_id == topic_id), None)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        versioned = self._states.get((topic, partition))
        return None if versioned is None else versioned.value

    def leader(self, topic: str, partition: int) -> BrokerEndpoint | None:
        """The live broker leading the partition, if any."""
        state = self.partition_state(topic, partition)
        return None if state is None else self._brokers.get(self._named(state.leader))

    def _named(self, node_id: int) -> int:
        """`node_id` as the view names it to others: NO_LEADER for a broker that is not
        live, or for this one while it cannot prove its session."""
        if node_id not in self._brokers or self._unvouched(node_id):
            return NO_LEADER
        return node_id

    def _unvouched(self, node_id: int) -> bool:
        return node_id == self._self_id and not self._self_vouched()

    def partition_count(self, name: str) -> int | None:
        assignment = self._topics.get(name)
        return None if assignment is None else len(assignment.replicas)

    def topic(self, name: str) -> TopicMetadata | None:
        assignment = self._topics.get(name)
        if assignment is None:
            return None
        partitions = []
        for index in sorted(assignment.replicas):
            replicas = tuple(assignment.replicas[index])
            state = self.partition_state(name, index)
            offline = tuple(r for r in replicas if r not in self._brokers)
            if state is None:
                partitions.append(PartitionMetadata(index, NO_LEADER, -1, replicas, (), offline))
                continue
            leader = self._named(state.leader)
            partitions.append(
                PartitionMetadata(
                    index, leader, state.leader_epoch, replicas, tuple(state.isr), offline
                )
            )
        return TopicMetadata(name, assignment.topic_id, tuple(partitions))

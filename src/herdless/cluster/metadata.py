"""The broker's view of the cluster: brokers, the controller, and each partition's replicas.

Handlers answer Metadata, FindCoordinator and DescribeCluster from this view
and nothing else, so that one broker and a cluster differ only in where the
view comes from. On one broker it is derived from the local logs: this broker
is the controller, and the only replica and leader of every partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from herdless.security.listeners import Endpoint
from herdless.storage import LogManager

# Clients call OffsetForLeaderEpoch when the epoch rises; one node never changes leader.
SINGLE_NODE_LEADER_EPOCH = 0


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    node_id: int
    # Where the other brokers reach it: its inter-broker listener.
    host: str
    port: int
    rack: str | None = None
    # Every listener it advertises: where the clients of each reach it.
    listeners: tuple[Endpoint, ...] = ()

    def address_for(self, request: Any) -> tuple[str, int] | None:
        """Its address on the listener `request` came in on (a client is told each broker
        on the listener it used, as Kafka does); None if it has no such listener."""
        session = getattr(request, "session", None)
        if session is None or not self.listeners:
            return self.host, self.port
        for endpoint in self.listeners:
            if endpoint.listener == session.listener:
                return endpoint.host, endpoint.port
        return None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    leader: int  # -1 while the partition has no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionMetadata, ...]


class MetadataView(Protocol):
    @property
    def cluster_id(self) -> str: ...

    @property
    def controller_id(self) -> int: ...

    def brokers(self) -> list[BrokerEndpoint]: ...

    def advertised_brokers(self) -> list[BrokerEndpoint]:
        """The brokers Metadata and DescribeCluster name to clients."""
        ...

    def broker(self, node_id: int) -> BrokerEndpoint | None: ...

    def topic_names(self) -> list[str]: ...

    def topic(self, name: str) -> TopicMetadata | None: ...

    def partition_count(self, name: str) -> int | None:
        """How many partitions the topic has (numbered from 0), without describing each."""
        ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...


class LocalMetadata:
    """One broker: every partition hosted here, led by this broker, alone in its ISR."""

    def __init__(
        self,
        node_id: int,
        endpoints: Callable[[], list[Endpoint]],
        logs: LogManager,
        rack: str | None = None,
    ) -> None:
        self._node_id = node_id
        self._endpoints = endpoints
        self._logs = logs
        self._rack = rack
        self.cluster_id = ""

    @property
    def controller_id(self) -> int:
        return self._node_id

    def brokers(self) -> list[BrokerEndpoint]:
        endpoints = self._endpoints()
        first = endpoints[0]
        return [BrokerEndpoint(self._node_id, first.host, first.port, self._rack, tuple(endpoints))]

    def advertised_brokers(self) -> list[BrokerEndpoint]:
        return self.brokers()

    def broker(self, node_id: int) -> BrokerEndpoint | None:
        return self.brokers()[0] if node_id == self._node_id else None

    def topic_names(self) -> list[str]:
        return sorted(self._logs.topics)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self._logs.topic_by_id(topic_id)
        return None if topic is None else topic.name

    def partition_count(self, name: str) -> int | None:
        topic = self._logs.topics.get(name)
        return None if topic is None else topic.partition_count

    def topic(self, name: str) -> TopicMetadata | None:
        topic = self._logs.topics.get(name)
        if topic is None:
            return None
        me = (self._node_id,)
        return TopicMetadata(
            topic.name,
            topic.topic_id,
            tuple(
                PartitionMetadata(index, self._node_id, SINGLE_NODE_LEADER_EPOCH, me, me)
                for index in range(topic.partition_count)
            ),
        )

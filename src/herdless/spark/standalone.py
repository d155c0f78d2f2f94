"""A streaming query that joins no group: it reads every partition its options name.

That is a query with assign, or one that subscribes without kafka.group.id:
Spark's Kafka source reads that way, each query on its own. It answers the
planner as GroupMember does (member.py), so the planner is the same for both.
With assign and kafka.group.id the query commits its offsets to that group
without joining it, as a standalone Kafka consumer does: `herdless groups lag`
shows it, and nothing is rebalanced.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from confluent_kafka import Consumer

from herdless.spark.client import (
    commit,
    committed_offsets,
    query_client_id,
    quiet_consumer,
    readable_partitions,
)
from herdless.spark.offsets import TopicPartition
from herdless.spark.options import ReadOptions


class Standalone:
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.client_id = query_client_id(options.connection)
        self.lookup: Consumer = quiet_consumer(
            options.connection, options.lookup_group, defaults={"client.id": self.client_id}
        )
        self._planned: set[TopicPartition] = set()
        self._committed: dict[TopicPartition, int] = {}

    def assignment(self) -> tuple[frozenset[TopicPartition], set[TopicPartition]]:
        """Every partition read now (topics and partitions may have been added), and the new."""
        owned = frozenset(
            readable_partitions(self.lookup, self.options.connection, self.options.subscription)
        )
        return owned, set(owned - self._planned)

    def planned(self, partitions: set[TopicPartition], in_flight: bool) -> None:
        self._planned |= partitions

    def completed(self, positions: Mapping[TopicPartition, int], batch_done: bool) -> None:
        if self.options.group_id is None:
            return
        advanced = {tp: o for tp, o in positions.items() if o > self._committed.get(tp, -1)}
        if not advanced:
            return
        # Noted even if the commit fails, so that a group with members of its
        # own (whose offsets are not ours to set) is not asked at every trigger.
        self._committed.update(advanced)
        commit(self.lookup, advanced, self.options.group_id)

    def committed(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        if self.options.group_id is None:
            return {}
        return committed_offsets(self.lookup, self.options.connection, partitions)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.lookup.close()

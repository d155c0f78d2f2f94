"""Every group of one shard, by id: the one table classic and consumer groups live in.

Kafka's GroupMetadataManager keeps one `groups` map whatever a group's type, so a
group id names one group at a time: a consumer group takes over an empty or converted
classic group and the other way round (group_conversion.py). herdless keeps the two
types in two maps, for their different state, but in this one object, which every
part of the shard that reads or changes groups is handed; none keeps a map of its own.

Lookups read the maps; changes go through the methods, which say what each means.
"""

from __future__ import annotations

from herdless.coordinator.classic_group import ClassicGroup
from herdless.coordinator.consumer_group import ConsumerGroup


class GroupStore:
    def __init__(self) -> None:
        self.classic: dict[str, ClassicGroup] = {}
        self.consumer: dict[str, ConsumerGroup] = {}

    def group(self, group_id: str) -> ClassicGroup | ConsumerGroup | None:
        """The group of `group_id`, whatever its type."""
        consumer_group = self.consumer.get(group_id)
        return self.classic.get(group_id) if consumer_group is None else consumer_group

    def __contains__(self, group_id: str) -> bool:
        return group_id in self.classic or group_id in self.consumer

    def put_classic(self, group: ClassicGroup) -> None:
        """`group` is the classic group of its id from now on (created, loaded or
        converted)."""
        self.classic[group.group_id] = group

    def remove_classic(self, group_id: str) -> ClassicGroup | None:
        return self.classic.pop(group_id, None)

    def put_consumer(self, group: ConsumerGroup) -> ConsumerGroup:
        """`group` is the consumer group of its id from now on, unless it has one
        already; the one it has."""
        return self.consumer.setdefault(group.group_id, group)

    def remove_consumer(self, group_id: str) -> None:
        del self.consumer[group_id]

    def clear(self) -> None:
        self.classic.clear()
        self.consumer.clear()

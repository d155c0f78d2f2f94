"""Every group of one shard, by id: the one table classic, consumer and share groups live in.

Kafka's GroupMetadataManager keeps one `groups` map whatever a group's type, so a
group id names one group at a time: a consumer group takes over an empty or converted
classic group and the other way round (group_conversion.py); a share group (KIP-932)
never converts, and an id held by a group of another type is refused to it, and its
id to them. herdless keeps the types in maps of their own, for their different state,
but in this one object, which every part of the shard that reads or changes groups is
handed; none keeps a map of its own.

Lookups read the maps; changes go through the methods, which say what each means.
"""

from __future__ import annotations

from herdless.coordinator.classic_group import ClassicGroup
from herdless.coordinator.consumer_group import ConsumerGroup
from herdless.coordinator.share_group import ShareGroup


class GroupStore:
    def __init__(self) -> None:
        self.classic: dict[str, ClassicGroup] = {}
        self.consumer: dict[str, ConsumerGroup] = {}
        self.share: dict[str, ShareGroup] = {}

    def group(self, group_id: str) -> ClassicGroup | ConsumerGroup | ShareGroup | None:
        """The group of `group_id`, whatever its type."""
        consumer_group = self.consumer.get(group_id)
        if consumer_group is not None:
            return consumer_group
        return self.classic.get(group_id) or self.share.get(group_id)

    def __contains__(self, group_id: str) -> bool:
        return group_id in self.classic or group_id in self.consumer or group_id in self.share

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

    def put_share(self, group: ShareGroup) -> ShareGroup:
        """`group` is the share group of its id from now on, unless it has one already; the
        one it has."""
        return self.share.setdefault(group.group_id, group)

    def remove_share(self, group_id: str) -> None:
        del self.share[group_id]

    def clear(self) -> None:
        self.classic.clear()
        self.consumer.clear()
        self.share.clear()

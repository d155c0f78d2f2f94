"""The topics consumer groups are told of: the broker's metadata as a TopicsImage.

Every ConsumerGroupHeartbeat takes the cluster's topics as data (the
coordinator never looks them up). Building them from the metadata view costs
a walk over every partition, so the image is kept and built again at most once
a second, sooner when a heartbeat names a topic it lacks: a topic just created
is seen at once, one given partitions or deleted within a second. A member
subscribed to a topic that does not exist does not have it built again at
every heartbeat: at most every REFRESH_MISSING_S. An image that came out the
same is not replaced, so the coordinator can tell that nothing changed (a
regular expression need not be resolved again).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from weakref import WeakKeyDictionary

from herdless.cluster.metadata import MetadataView
from herdless.coordinator.topic_metadata import TopicMetadata, TopicsImage

REFRESH_S = 1.0
REFRESH_MISSING_S = 0.1


class ConsumerTopics:
    def __init__(self, metadata: MetadataView, clock: Callable[[], float] = time.monotonic) -> None:
        self._metadata = metadata
        self._clock = clock
        self._image = TopicsImage()
        self._topics: dict[str, TopicMetadata] = {}
        self._built_at = float("-inf")

    def image(self, names: Iterable[str] = ()) -> TopicsImage:
        """The topics now, as of at most a second ago, or a tenth of one when one of
        `names` is missing."""
        age = self._clock() - self._built_at
        missing = any(self._image.topic(name) is None for name in names)
        if age >= REFRESH_S or (missing and age >= REFRESH_MISSING_S):
            self._rebuild()
        return self._image

    def _rebuild(self) -> None:
        self._built_at = self._clock()
        racks = {b.node_id: b.rack for b in self._metadata.brokers() if b.rack}
        topics = {}
        for name in self._metadata.topic_names():
            described = self._metadata.topic(name)
            if described is not None:
                partition_racks = ()
                if racks:
                    partition_racks = tuple(
                        frozenset(racks[r] for r in p.replicas if r in racks)
                        for p in described.partitions
                    )
                topics[name] = TopicMetadata(
                    described.topic_id, name, len(described.partitions), partition_racks
                )
        if topics != self._topics:
            self._topics = topics
            self._image = TopicsImage(topics.values(), self._image.version + 1)


# One image source per metadata view, that is per broker (several run in one test process).
_sources: WeakKeyDictionary[MetadataView, ConsumerTopics] = WeakKeyDictionary()


def topics_image(metadata: MetadataView, names: Iterable[str] = ()) -> TopicsImage:
    """The broker's topics for a consumer group operation; see ConsumerTopics.image."""
    source = _sources.get(metadata)
    if source is None:
        source = _sources[metadata] = ConsumerTopics(metadata)
    return source.image(names)

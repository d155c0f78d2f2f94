"""The topics consumer groups are told of: the broker's metadata as a TopicsImage.

Every ConsumerGroupHeartbeat takes the cluster's topics as data (the
coordinator never looks them up). Building them from the metadata view costs
a walk over every partition, so the image is kept and built again at most once
a second, or at once when a heartbeat names a topic it lacks: a topic just
created is seen by the next heartbeat, one given partitions or deleted within
a second. An image that came out the same is not replaced, so the coordinator
can tell that nothing changed (a regular expression need not be resolved again).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from herdless.broker.metadata import MetadataView
from herdless.coordinator.topic_metadata import TopicMetadata, TopicsImage

REFRESH_S = 1.0


class ConsumerTopics:
    def __init__(self, metadata: MetadataView) -> None:
        self._metadata = metadata
        self._image = TopicsImage()
        self._topics: dict[str, TopicMetadata] = {}
        self._built_at = float("-inf")

    def image(self, names: Iterable[str] = ()) -> TopicsImage:
        """The topics now, as of at most a second ago unless one of `names` is missing."""
        stale = time.monotonic() - self._built_at >= REFRESH_S
        if stale or any(self._image.topic(name) is None for name in names):
            self._rebuild()
        return self._image

    def _rebuild(self) -> None:
        self._built_at = time.monotonic()
        topics = {}
        for name in self._metadata.topic_names():
            described = self._metadata.topic(name)
            if described is not None:
                topics[name] = TopicMetadata(described.topic_id, name, len(described.partitions))
        if topics != self._topics:
            self._topics = topics
            self._image = TopicsImage(topics.values(), self._image.version + 1)

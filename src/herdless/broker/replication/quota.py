"""Replication throttles, as Kafka's ReplicationQuotaManager applies them (KIP-73).

Two quotas per broker: the leader's, on the bytes it answers followers with
(`leader.replication.throttled.rate`), and the follower's, on the bytes its fetchers take
in (`follower.replication.throttled.rate`); both bytes per second, unlimited by default.
Only the replicas a topic names are throttled: `leader.replication.throttled.replicas` and
`follower.replication.throttled.replicas` list `partition:broker` pairs, or `*` for all,
and a broker throttles a partition where the list pairs it with its own id.

A throttled partition is left out while the quota is exceeded, but only for a replica
not in the ISR: a replica catching up (a reassignment's new one) is slowed, one in sync
never is, so a throttle cannot stall acks=all produces. The leader answers such a fetch
with no records; the follower leaves the partition out of its next fetch. Every byte of
a throttled partition counts towards the quota, sent or taken.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from herdless.broker.quotas.rate import DEFAULT_SAMPLES, DEFAULT_WINDOW_MS, SampledRate

# Kafka's default for both rates: Long.MaxValue, no throttle.
UNLIMITED = 0x7FFF_FFFF_FFFF_FFFF


@functools.lru_cache(maxsize=1024)
def throttled_partitions(listed: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a throttled-replicas config throttles on `broker_id`; None for all
    (`*`). The config is valid: the topic's config parser checked it."""
    items = [item.strip() for item in listed.split(",") if item.strip()]
    if items == ["*"]:
        return None
    pairs = (item.split(":") for item in items)
    return frozenset(int(partition) for partition, broker in pairs if int(broker) == broker_id)


class ReplicationQuota:
    """One of a broker's two replication quotas (Kafka's ReplicationQuotaManager)."""

    def __init__(
        self,
        broker_id: int,
        rate_bytes_per_s: int,
        monotonic_ms: Callable[[], int],
        samples: int = DEFAULT_SAMPLES,
        window_ms: int = DEFAULT_WINDOW_MS,
    ) -> None:
        self.broker_id = broker_id
        self._clock = monotonic_ms
        self._rate = SampledRate(monotonic_ms(), samples, window_ms)
        self.bound = rate_bytes_per_s

    def set_bound(self, rate_bytes_per_s: int) -> None:
        """A new rate (a dynamic broker config); what was measured so far still counts."""
        self.bound = rate_bytes_per_s

    @property
    def limited(self) -> bool:
        return self.bound < UNLIMITED

    def is_throttled(self, listed: str, partition: int) -> bool:
        """Whether `partition` is throttled here, by its topic's throttled-replicas config."""
        if not self.limited or not listed:
            return False
        chosen = throttled_partitions(listed, self.broker_id)
        return chosen is None or partition in chosen

    def exceeded(self) -> bool:
        return self.limited and self._rate.measure(self._clock()) > self.bound

    def record(self, size: int) -> None:
        if self.limited:
            self._rate.record(size, self._clock())

    def rate(self) -> float:
        """Bytes per second, as measured now."""
        return self._rate.measure(self._clock())

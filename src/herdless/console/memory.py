"""What the console remembers between looks: each group's lag over time and the
rebalances read from `__rebalance_history`, bounded, safe to read from any thread."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Container, Iterable
from typing import Any

from herdless.console.snapshot import Snapshot

# At the default 2 s between looks: the last hour of each group's lag.
LAG_SAMPLES = 1800
# Rebalances kept per group, and across all groups for the rebalances page.
REBALANCES_PER_GROUP = 100
REBALANCES_SHOWN = 200


class LagHistory:
    """Each group's lag per topic over time, oldest first: kept per topic so that a
    viewer is shown the lag of the topics they may describe only."""

    def __init__(self, size: int = LAG_SAMPLES) -> None:
        self._size = size
        self._samples: dict[str, deque[tuple[float, dict[str, int]]]] = {}
        self._lock = threading.Lock()

    def record(self, snapshot: Snapshot) -> None:
        with self._lock:
            for group_id, group in snapshot.groups.items():
                samples = self._samples.get(group_id)
                if samples is None:
                    samples = self._samples[group_id] = deque(maxlen=self._size)
                by_topic: dict[str, int] = {}
                for topic, lag in group.lags():
                    by_topic[topic] = by_topic.get(topic, 0) + lag
                samples.append((snapshot.taken_at, by_topic))
            # A group that is gone (deleted, or its offsets expired) is forgotten.
            if "groups" not in snapshot.problems:
                for group_id in self._samples.keys() - snapshot.groups.keys():
                    del self._samples[group_id]

    def of(self, group_id: str, topics: Container[str] | None = None) -> list[tuple[float, int]]:
        """(time in seconds since the epoch, total lag) of the group, the total over
        `topics` alone when given."""
        with self._lock:
            samples = list(self._samples.get(group_id, ()))
        return [
            (taken_at, sum(lag for t, lag in by_topic.items() if topics is None or t in topics))
            for taken_at, by_topic in samples
        ]


class Rebalances:
    """The entries of `__rebalance_history` as the broker wrote them, oldest first."""

    def __init__(self) -> None:
        self._by_group: dict[str, deque[dict[str, Any]]] = {}
        self._latest: deque[dict[str, Any]] = deque(maxlen=REBALANCES_SHOWN)
        self._lock = threading.Lock()
        # Why there are none to show, when that is not simply that none happened.
        self.problem: str | None = None

    def add(self, entries: Iterable[tuple[bytes | None, dict[str, Any]]]) -> None:
        with self._lock:
            for key, entry in entries:
                group_id = entry.get("group_id") or (key or b"").decode(errors="replace")
                entry = {**entry, "group_id": group_id}
                kept = self._by_group.get(group_id)
                if kept is None:
                    kept = self._by_group[group_id] = deque(maxlen=REBALANCES_PER_GROUP)
                kept.append(entry)
                self._latest.append(entry)

    def of(self, group_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return _by_end(self._by_group.get(group_id, ()))

    def latest(self) -> list[dict[str, Any]]:
        with self._lock:
            return _by_end(self._latest)


def _by_end(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    # Brokers append in the order rebalances end, except across coordinators.
    return sorted(entries, key=lambda e: e.get("ended_ms") or 0)

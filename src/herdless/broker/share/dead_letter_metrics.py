"""Prometheus counters of share groups' dead letters (KIP-1191): written, by group and
reason; lost, when the dead-letter topic is missing and not created; and writes that
failed after their retries (the archive waits for the next try)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class DeadLetterMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # A registry of its own when none is given: counted, never scraped (tests).
        registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        self._written = Counter(
            "herdless_share_dead_letters",
            "Records of a share group written to its dead-letter topic, by group and"
            " reason (rejected, delivery limit reached).",
            ["group", "reason"],
            registry=registry,
        )
        self._lost = Counter(
            "herdless_share_dead_letters_lost",
            "Records of a share group archived without a dead letter because its"
            " dead-letter topic does not exist and auto-creation is off.",
            ["group", "topic"],
            registry=registry,
        )
        self._failed = Counter(
            "herdless_share_dead_letter_write_failures",
            "Dead-letter writes that failed after their retries; their records were"
            " not archived, and are written again on the next try.",
            ["group", "topic"],
            registry=registry,
        )

    def written(self, group: str, reason: str) -> None:
        self._written.labels(group, reason).inc()

    def lost(self, group: str, topic: str, count: int) -> None:
        self._lost.labels(group, topic).inc(count)

    def failed(self, group: str, topic: str) -> None:
        self._failed.labels(group, topic).inc()

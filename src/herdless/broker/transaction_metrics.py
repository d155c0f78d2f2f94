"""Prometheus metrics of transactions: how they end, as they end; what is open, at each
scrape.

Counters and the marker histogram are fed by the transaction coordinator as each
transaction completes here (it takes this as its TransactionEvents). The gauges are
read from the coordinator's shards and the partition logs when Prometheus scrapes,
on the broker's loop as the group figures are (metrics.py): counting states is one
pass over the transactional ids this broker coordinates, and a partition's last
stable offset is the least of its open transactions' first offsets, kept as they
open and close, so a scrape costs no reading of any log.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from herdless.broker.coordinators.transaction_coordinator import TransactionCoordinator
from herdless.coordinator.transactions import TransactionState
from herdless.storage import LogManager

# Markers are written with retries until every leader has them (txn_markers.py): a
# leader moving or down stretches the write to seconds.
MARKER_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_STATES = tuple(state.state_name for state in TransactionState)
# A transaction is open from its first partition until its markers are all written.
_OPEN = frozenset(
    {
        TransactionState.ONGOING,
        TransactionState.PREPARE_COMMIT,
        TransactionState.PREPARE_ABORT,
        TransactionState.PREPARE_EPOCH_FENCE,
    }
)


class TransactionMetrics:
    """The counters, fed as transactions end (the coordinator's TransactionEvents)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._ended = Counter(
            "herdless_transactions_ended",
            "Transactions this broker's coordinator completed (every marker written), by"
            " result: committed or aborted (those aborted by their timeout included).",
            ["result"],
            registry=registry,
        )
        for result in ("committed", "aborted"):
            self._ended.labels(result)
        self._timed_out = Counter(
            "herdless_transactions_timed_out",
            "Transactions the coordinator aborted because they were open longer than their"
            " transaction.timeout.ms.",
            registry=registry,
        )
        self._fenced = Counter(
            "herdless_transaction_producers_fenced",
            "Producers fenced by a new producer with the same transactional id"
            " (InitProducerId); an open transaction of theirs is aborted.",
            registry=registry,
        )
        self._marker_seconds = Histogram(
            "herdless_transaction_marker_write_seconds",
            "Time to write a transaction's COMMIT or ABORT markers on every partition's"
            " leader, retries included.",
            buckets=MARKER_BUCKETS,
            registry=registry,
        )

    def transaction_ended(self, committed: bool, timed_out: bool, marker_seconds: float) -> None:
        self._ended.labels("committed" if committed else "aborted").inc()
        if timed_out:
            self._timed_out.inc()
        self._marker_seconds.observe(marker_seconds)

    def producer_fenced(self) -> None:
        self._fenced.inc()


@dataclass
class TransactionSnapshot:
    # (transaction log partition, state name, transactional ids in that state)
    states: list[tuple[int, str, int]] = field(default_factory=list)
    # Seconds since the oldest open transaction began; None when none is open.
    oldest_open_s: float | None = None
    # (topic, partition, high watermark minus last stable offset)
    stable_lag: list[tuple[str, int, int]] = field(default_factory=list)


def snapshot_transactions(
    coordinator: TransactionCoordinator | None, logs: LogManager, now_ms: int
) -> TransactionSnapshot:
    """Copy what the gauges need; on the loop, between any two state changes."""
    found = TransactionSnapshot()
    oldest_start: int | None = None
    held = coordinator.held() if coordinator is not None else {}
    for partition, transactions in sorted(held.items()):
        if not transactions:
            continue
        counts = Tally(meta.state.state_name for meta in transactions)
        found.states.extend((partition, name, counts.get(name, 0)) for name in _STATES)
        starts = [m.start_timestamp_ms for m in transactions if m.state in _OPEN]
        if starts:
            first = min(starts)
            oldest_start = first if oldest_start is None else min(oldest_start, first)
    if oldest_start is not None:
        found.oldest_open_s = max(now_ms - oldest_start, 0) / 1000
    for name, topic in logs.topics.items():
        for partition_log in topic.partitions.values():
            if partition_log.first_unstable_offset is None:
                continue
            behind = partition_log.high_watermark - partition_log.last_stable_offset
            found.stable_lag.append((name, partition_log.partition, behind))
    return found


def transaction_gauges(found: TransactionSnapshot) -> Iterator[Metric]:
    states = GaugeMetricFamily(
        "herdless_transactions",
        "Transactional ids this broker coordinates, by partition of __transaction_state and"
        " state (Kafka's names); only partitions holding any.",
        labels=["partition", "state"],
    )
    for partition, name, count in found.states:
        states.add_metric([str(partition), name], count)
    yield states
    yield GaugeMetricFamily(
        "herdless_transaction_oldest_open_seconds",
        "Age of the oldest transaction open on this broker's coordinator (0 when none is):"
        " near transaction.timeout.ms means the coordinator is about to abort it.",
        value=found.oldest_open_s or 0.0,
    )
    lag = GaugeMetricFamily(
        "herdless_partition_last_stable_offset_lag",
        "High watermark minus last stable offset, for partitions with an open transaction:"
        " records read_committed consumers cannot read yet.",
        labels=["topic", "partition"],
    )
    for topic, partition, behind in found.stable_lag:
        lag.add_metric([topic, str(partition)], behind)
    yield lag

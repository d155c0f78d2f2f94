"""Prometheus metrics: consumer-group lag and membership, partitions, requests, fetch
sessions, transactions (transaction_metrics.py), share groups and the records in flight
of share partitions (share/share_metrics.py), and the metrics clients push (KIP-714,
telemetry/exporter.py).

Group and partition figures are read from the broker's state when Prometheus
scrapes, so they cost nothing between scrapes and are never stale. The read
is a plain snapshot taken on the event loop that owns the state (no lock);
the text is rendered from it in a worker thread, because rendering is the
slow part: 100,000 committed partitions take over a second to render, which
on the loop would stall every heartbeat. Requests are timed per API as they
are answered. The endpoint is plain HTTP on `metrics.port`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from herdless.broker import clock
from herdless.broker.auth.authorizer_audit import DecisionCounts
from herdless.broker.coordinators.group_coordinator import GroupCoordinator, ShardState
from herdless.broker.coordinators.transaction_coordinator import TransactionCoordinator
from herdless.broker.handlers.fetch_sessions import FetchSessionCache
from herdless.broker.quotas.manager import ClientQuotaManager
from herdless.broker.quotas.metrics import QuotaRates, quota_metrics
from herdless.broker.share.leader import ShareLeader
from herdless.broker.share.share_metrics import ShareSnapshot, share_gauges, snapshot_shares
from herdless.broker.telemetry.exporter import PushedClient, client_metrics, pushed_client
from herdless.broker.telemetry.manager import ClientMetricsManager
from herdless.broker.transaction_metrics import (
    TransactionMetrics,
    TransactionSnapshot,
    snapshot_transactions,
    transaction_gauges,
)
from herdless.coordinator.consumer_group import ConsumerGroupState
from herdless.coordinator.share_group import ShareGroupState
from herdless.coordinator.state import GroupState
from herdless.storage import LogManager

log = logging.getLogger(__name__)

# Longest request head a scrape may send; Prometheus sends a few hundred bytes.
MAX_HEAD_BYTES = 16 * 1024
SCRAPE_READ_TIMEOUT_S = 10.0
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

# herdless_group_state has a series for each state a group of its kind has.
_CLASSIC_STATES = tuple(s.value for s in GroupState)
_CONSUMER_STATES = tuple(s.value for s in ConsumerGroupState)
_SHARE_STATES = tuple(s.value for s in ShareGroupState)


class BrokerMetrics:
    """One broker's metrics: request timings and rebalance counts as they happen,
    groups and partitions as a snapshot at each scrape."""

    def __init__(self, lag_per_partition: bool = True) -> None:
        self._lag_per_partition = lag_per_partition
        # Attached once the broker has built them (they report rebalances here).
        self._groups: GroupCoordinator | None = None
        self._logs: LogManager | None = None
        self._fetch_sessions: FetchSessionCache | None = None
        self._authorizations: DecisionCounts | None = None
        self._transaction_coordinator: TransactionCoordinator | None = None
        self._shares: ShareLeader | None = None
        self._quotas: ClientQuotaManager | None = None
        self._client_metrics: ClientMetricsManager | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        # The transaction coordinator's events (TransactionEvents) are counted here.
        self.transactions = TransactionMetrics(self.registry)
        # process_open_fds beside process_max_fds: connections are what the file limit
        # bounds (file_limit.py); CPU and memory besides.
        ProcessCollector(registry=self.registry)
        # Per API: requests per bucket of LATENCY_BUCKETS (the last one: slower than
        # all), and the sum of their times.
        self._request_times: dict[str, _RequestTimes] = {}
        self._rebalances = Counter(
            "herdless_group_rebalances",
            "Completed rebalances of a group since the broker started, by cause.",
            ["group", "cause"],
            registry=self.registry,
        )
        self._storage_errors = Counter(
            "herdless_storage_errors",
            "Disk operations that failed, by operation (append, flush, checkpoint, retention,"
            " cleaning, index, ...) and errno (ENOSPC: the disk is full).",
            ["operation", "error"],
            registry=self.registry,
        )
        self._offline_log_dirs = Gauge(
            "herdless_offline_log_directories",
            "Data directories that failed and do not take writes yet (Kafka's"
            " OfflineLogDirectoryCount): while 1, this broker's replicas are offline.",
            registry=self.registry,
        )
        self._failed_authentications = Counter(
            "herdless_failed_authentications",
            "Connections that failed to authenticate, by listener and how: tls (a failed"
            " handshake) or sasl (Kafka's failed-authentication-total).",
            ["listener", "mechanism"],
            registry=self.registry,
        )
        self._expired_connections_killed = Counter(
            "herdless_expired_connections_killed",
            "Connections closed because their SASL session ran out before the client"
            " re-authenticated (Kafka's expired-connections-killed-count, KIP-368), by"
            " listener.",
            ["listener"],
            registry=self.registry,
        )
        self._bytes_out = Counter(
            "herdless_bytes_out",
            "Bytes of records sent in answer to consumers' fetches, by topic (Kafka's"
            " BytesOutPerSec; followers' fetches are not counted). A consumer sent to a"
            " follower (replica.selector.class, KIP-392) counts on that follower.",
            ["topic"],
            registry=self.registry,
        )
        self._scrubbed = Counter(
            "herdless_log_scrubbed_bytes",
            "Bytes of sealed segments the scrubber has read and checked.",
            registry=self.registry,
        )

    def attach(
        self, groups: GroupCoordinator, logs: LogManager, fetch_sessions: FetchSessionCache
    ) -> None:
        """What each scrape snapshots."""
        self._groups, self._logs, self._fetch_sessions = groups, logs, fetch_sessions

    def attach_authorizer(self, counts: DecisionCounts) -> None:
        """The authorizer's decisions, counted as they are made (handlers/authorization.py)."""
        self._authorizations = counts

    def attach_transactions(self, coordinator: TransactionCoordinator) -> None:
        """The transaction coordinator whose shards each scrape counts."""
        self._transaction_coordinator = coordinator

    def attach_shares(self, leader: ShareLeader) -> None:
        """The share partitions this broker leads, whose records in flight each scrape counts."""
        self._shares = leader

    def attach_quotas(self, quotas: ClientQuotaManager) -> None:
        """The client quotas whose measured rates each scrape copies."""
        self._quotas = quotas

    def attach_client_metrics(self, manager: ClientMetricsManager) -> None:
        """The client instances whose pushed metrics (KIP-714) each scrape exports."""
        self._client_metrics = manager

    def observe_request(self, api: str, seconds: float) -> None:
        """Count one answered request: a bucket found in C and two additions.

        prometheus_client's Histogram took a lock and walked its buckets in Python on
        every request, 6% of the broker's own work on a heartbeat; these counts are
        copied at a scrape and rendered as the same histogram.
        """
        times = self._request_times.get(api)
        if times is None:
            times = self._request_times[api] = _RequestTimes()
        times.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        times.sum += seconds

    def rebalanced(self, group: str, cause: str) -> None:
        self._rebalances.labels(group, cause).inc()

    def tls_handshake_failed(self, listener: str) -> None:
        self._failed_authentications.labels(listener, "tls").inc()

    def authentication_failed(self, listener: str, mechanism: str) -> None:
        self._failed_authentications.labels(listener, mechanism).inc()

    def expired_connection_killed(self, listener: str) -> None:
        self._expired_connections_killed.labels(listener).inc()

    def bytes_out(self, topic: str, size: int) -> None:
        self._bytes_out.labels(topic).inc(size)

    def scrubbed(self, size: int) -> None:
        """Thread-safe: the scrubber reads in a worker thread."""
        self._scrubbed.inc(size)

    def log_dir_offline(self, offline: bool) -> None:
        self._offline_log_dirs.set(1 if offline else 0)

    def storage_error(self, operation: str, errno_name: str) -> None:
        """Thread-safe: flushes fail in worker threads."""
        self._storage_errors.labels(operation, errno_name).inc()

    async def exposition(self) -> bytes:
        """The text format; call on the broker's loop."""
        assert self._groups is not None and self._logs is not None
        assert self._fetch_sessions is not None
        state = snapshot(self._groups, self._logs, self._fetch_sessions)
        state.transactions = snapshot_transactions(
            self._transaction_coordinator, self._logs, clock.wall_ms()
        )
        state.shares = snapshot_shares(self._groups, self._shares)
        state.requests = [(api, list(t.counts), t.sum) for api, t in self._request_times.items()]
        if self._authorizations is not None:
            state.authorizations = [
                (operation.kafka_name, resource_type.kafka_name, allowed, count)
                for (operation, resource_type, allowed), count in self._authorizations.items()
            ]
        if self._quotas is not None:
            state.client_quotas = self._quotas.rates()
        if self._client_metrics is not None:
            state.pushed_clients = [
                pushed_client(i) for i in self._client_metrics.instances(clock.monotonic_ms())
            ]
        return await asyncio.to_thread(self.render, state)

    def render(self, state: Snapshot) -> bytes:
        """Thread-safe: prometheus_client's metrics lock themselves, the snapshot is a copy."""
        snapshot_registry = CollectorRegistry(auto_describe=False)
        per_partition = self._lag_per_partition
        snapshot_registry.register(_SnapshotCollector(state, per_partition))
        return generate_latest(self.registry) + generate_latest(snapshot_registry)


@dataclass(slots=True)
class _RequestTimes:
    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    sum: float = 0.0


@dataclass
class Snapshot:
    # (group, members, generation or group epoch, state, the states a group of its kind has)
    groups: list[tuple[str, int, int, str, tuple[str, ...]]] = field(default_factory=list)
    # (group, topic, partition, committed offset, high watermark or None)
    offsets: list[tuple[str, str, int, int, int | None]] = field(default_factory=list)
    # (topic, partition, log start offset, log end offset, bytes, damaged offsets)
    partitions: list[tuple[str, int, int, int, int, int]] = field(default_factory=list)
    shards_loading: int = 0
    # (sessions, partitions they hold, sessions evicted since the start)
    fetch_sessions: tuple[int, int, int] = (0, 0, 0)
    # (error name, fetches answered with it since the start)
    fetch_session_errors: list[tuple[str, int]] = field(default_factory=list)
    # (API name, requests per latency bucket, sum of their seconds)
    requests: list[tuple[str, list[int], float]] = field(default_factory=list)
    # (operation, resource type, allowed, decisions since the start)
    authorizations: list[tuple[str, str, bool, int]] = field(default_factory=list)
    transactions: TransactionSnapshot = field(default_factory=TransactionSnapshot)
    shares: ShareSnapshot = field(default_factory=ShareSnapshot)
    client_quotas: QuotaRates = field(default_factory=dict)
    pushed_clients: list[PushedClient] = field(default_factory=list)


def snapshot(
    groups: GroupCoordinator, logs: LogManager, fetch_sessions: FetchSessionCache
) -> Snapshot:
    """Copy what the metrics need; on the loop, between any two state changes."""
    state = Snapshot()
    state.fetch_sessions = (
        len(fetch_sessions),
        fetch_sessions.total_partitions,
        fetch_sessions.evictions,
    )
    state.fetch_session_errors = [(code.name, n) for code, n in fetch_sessions.errors.items()]
    for shard_state, shard in groups.shards():
        if shard_state is ShardState.LOADING:
            state.shards_loading += 1
        if shard_state is not ShardState.ACTIVE:
            continue
        classic = (
            (g.group_id, len(g.members), g.generation, str(g.state), _CLASSIC_STATES)
            for g in shard.groups.values()
        )
        consumer = (
            (g.group_id, len(g.members), g.group_epoch, str(g.state), _CONSUMER_STATES)
            for g in shard.consumer.groups.values()
        )
        share = (
            (g.group_id, len(g.members), g.group_epoch, str(g.state), _SHARE_STATES)
            for g in shard.share.groups.values()
        )
        for group in itertools.chain(classic, consumer, share):
            state.groups.append(group)
            group_id = group[0]
            for topic, partition, offset in shard.offsets.committed_offsets(group_id):
                partition_log = logs.partition(topic, partition)
                high_watermark = None if partition_log is None else partition_log.high_watermark
                state.offsets.append((group_id, topic, partition, offset, high_watermark))
    for name, topic in logs.topics.items():
        for partition_log in topic.partitions.values():
            state.partitions.append(
                (
                    name,
                    partition_log.partition,
                    partition_log.log_start_offset,
                    partition_log.log_end_offset,
                    partition_log.size_bytes,
                    sum(d.end_offset - d.first_offset for d in partition_log.damage),
                )
            )
    return state


class _SnapshotCollector(Collector):
    def __init__(self, state: Snapshot, lag_per_partition: bool) -> None:
        self._state = state
        self._lag_per_partition = lag_per_partition

    def collect(self) -> Iterator[Metric]:
        yield self._request_times()
        yield self._authorizations()
        yield from self._groups()
        yield from self._partitions()
        yield from self._fetch_sessions()
        yield from transaction_gauges(self._state.transactions)
        yield from share_gauges(self._state.shares)
        yield from quota_metrics(self._state.client_quotas)
        yield from client_metrics(self._state.pushed_clients)

    def _request_times(self) -> Metric:
        histogram = HistogramMetricFamily(
            "herdless_request_seconds",
            "Time from a request's arrival to its answer, per API (long polls included).",
            labels=["api"],
        )
        bounds = [*map(floatToGoString, LATENCY_BUCKETS), "+Inf"]
        for api, counts, seconds in self._state.requests:
            buckets = list(zip(bounds, itertools.accumulate(counts), strict=True))
            histogram.add_metric([api], buckets, sum_value=seconds)
        return histogram

    def _authorizations(self) -> Metric:
        decisions = CounterMetricFamily(
            "herdless_authorizer_decisions",
            "The authorizer's decisions since the broker started, by operation, resource"
            " type and result (allowed, denied); a resource a request names counts once per"
            " mention.",
            labels=["operation", "resource_type", "result"],
        )
        for operation, resource_type, allowed, count in self._state.authorizations:
            result = "allowed" if allowed else "denied"
            decisions.add_metric([operation, resource_type, result], count)
        return decisions

    def _groups(self) -> Iterator[Metric]:
        members = GaugeMetricFamily(
            "herdless_group_members", "Members of a consumer group.", labels=["group"]
        )
        generation = GaugeMetricFamily(
            "herdless_group_generation",
            "A group's current generation (a consumer group's group epoch).",
            labels=["group"],
        )
        state = GaugeMetricFamily(
            "herdless_group_state", "1 for a group's current state.", labels=["group", "state"]
        )
        committed = GaugeMetricFamily(
            "herdless_group_committed_offset",
            "The offset a group committed for a partition.",
            labels=["group", "topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "herdless_group_lag",
            "High watermark minus the committed offset: records the group has yet to process.",
            labels=["group", "topic", "partition"],
        )
        total_lag = GaugeMetricFamily(
            "herdless_group_lag_sum",
            "A group's lag summed over the partitions of a topic.",
            labels=["group", "topic"],
        )
        loading = GaugeMetricFamily(
            "herdless_coordinator_shards_loading",
            "__consumer_offsets partitions still being replayed.",
        )
        loading.add_metric([], self._state.shards_loading)
        for group_id, count, gen, current, states in self._state.groups:
            members.add_metric([group_id], count)
            generation.add_metric([group_id], gen)
            for s in states:
                state.add_metric([group_id, s], 1.0 if current == s else 0.0)
        sums: dict[tuple[str, str], int] = {}
        per_partition = self._lag_per_partition
        for group_id, topic, partition, offset, high_watermark in self._state.offsets:
            labels = [group_id, topic, str(partition)]
            if per_partition:
                committed.add_metric(labels, offset)
            if high_watermark is None or offset < 0:
                continue
            behind = max(high_watermark - offset, 0)
            if per_partition:
                lag.add_metric(labels, behind)
            sums[group_id, topic] = sums.get((group_id, topic), 0) + behind
        for (group_id, topic), behind in sums.items():
            total_lag.add_metric([group_id, topic], behind)
        yield from (members, generation, state, committed, lag, total_lag, loading)

    def _partitions(self) -> Iterator[Metric]:
        end = GaugeMetricFamily(
            "herdless_partition_log_end_offset",
            "The offset the next record appended to a partition gets.",
            labels=["topic", "partition"],
        )
        start = GaugeMetricFamily(
            "herdless_partition_log_start_offset",
            "The first offset still in a partition.",
            labels=["topic", "partition"],
        )
        size = GaugeMetricFamily(
            "herdless_partition_size_bytes",
            "Bytes of a partition's segments on disk.",
            labels=["topic", "partition"],
        )
        damaged = GaugeMetricFamily(
            "herdless_partition_damaged_offsets",
            "Offsets a partition's files should hold soundly and do not (missing, failing"
            " their CRC, unreadable): they are not served. Only partitions with damage.",
            labels=["topic", "partition"],
        )
        for name, partition, log_start, log_end, size_bytes, bad in self._state.partitions:
            labels = [name, str(partition)]
            end.add_metric(labels, log_end)
            start.add_metric(labels, log_start)
            size.add_metric(labels, size_bytes)
            if bad:
                damaged.add_metric(labels, bad)
        yield from (end, start, size, damaged)

    def _fetch_sessions(self) -> Iterator[Metric]:
        # Kafka's NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached and
        # IncrementalFetchSessionEvictionsPerSec (here a count; rate() makes it per second).
        sessions, partitions, evictions = self._state.fetch_sessions
        yield GaugeMetricFamily(
            "herdless_fetch_sessions",
            "Incremental fetch sessions (KIP-227) the broker holds, consumers' and followers'.",
            value=sessions,
        )
        yield GaugeMetricFamily(
            "herdless_fetch_session_partitions",
            "Partitions held in all incremental fetch sessions.",
            value=partitions,
        )
        yield CounterMetricFamily(
            "herdless_fetch_session_evictions",
            "Fetch sessions evicted to make room for another, since the broker started.",
            value=evictions,
        )
        errors = CounterMetricFamily(
            "herdless_fetch_session_errors",
            "Fetches answered with a session error (FETCH_SESSION_ID_NOT_FOUND,"
            " INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR); the client's next"
            " fetch is a full one.",
            labels=["error"],
        )
        for name, count in self._state.fetch_session_errors:
            errors.add_metric([name], count)
        yield errors


async def serve_metrics(metrics: BrokerMetrics, host: str, port: int) -> asyncio.Server:
    """GET /metrics over plain HTTP/1.1, one answer per connection."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(SCRAPE_READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                status, body, kind = "405 Method Not Allowed", b"only GET\n", "text/plain"
            elif path in ("/metrics", "/"):
                status, body, kind = "200 OK", await metrics.exposition(), CONTENT_TYPE_LATEST
            else:
                status, body, kind = "404 Not Found", b"try /metrics\n", "text/plain"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + (b"" if method == "HEAD" else body)
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # not HTTP, too long, or too slow: just close
        except ConnectionError:
            pass
        except Exception:
            log.exception("metrics scrape failed")
        finally:
            writer.close()

    return await asyncio.start_server(answer, host, port, limit=MAX_HEAD_BYTES)

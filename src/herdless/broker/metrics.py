"""Prometheus metrics: consumer-group lag and membership, partitions, requests.

Group and partition figures are read from the broker's state when Prometheus
scrapes, so they cost nothing between scrapes and are never stale. Requests
are timed per API as they are answered. The endpoint is served on the broker's
own event loop, as plain HTTP on `metrics.port`: scrapes read the same state
the loop mutates, with no lock and no thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from herdless.broker.group_coordinator import ShardState
from herdless.coordinator.state import GroupState

if TYPE_CHECKING:
    from herdless.broker.broker import Broker

log = logging.getLogger(__name__)

# Longest request head a scrape may send; Prometheus sends a few hundred bytes.
MAX_HEAD_BYTES = 16 * 1024
SCRAPE_READ_TIMEOUT_S = 10.0
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class BrokerMetrics:
    """One broker's registry: request timings, rebalance counts, and state read at scrape."""

    def __init__(self, broker: Broker) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._requests = Histogram(
            "herdless_request_seconds",
            "Time from a request's arrival to its answer, per API (long polls included).",
            ["api"],
            registry=self.registry,
            buckets=LATENCY_BUCKETS,
        )
        self._rebalances = Counter(
            "herdless_group_rebalances",
            "Completed rebalances of a group since the broker started, by cause.",
            ["group", "cause"],
            registry=self.registry,
        )
        self._observers: dict[str, Callable[[float], None]] = {}
        self.registry.register(_StateCollector(broker))

    def observe_request(self, api: str, seconds: float) -> None:
        observe = self._observers.get(api)
        if observe is None:
            observe = self._observers[api] = self._requests.labels(api).observe
        observe(seconds)

    def rebalanced(self, group: str, cause: str) -> None:
        self._rebalances.labels(group, cause).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        yield from self._groups()
        yield from self._partitions()

    def _groups(self) -> Iterator[Metric]:
        members = GaugeMetricFamily(
            "herdless_group_members", "Members of a consumer group.", labels=["group"]
        )
        generation = GaugeMetricFamily(
            "herdless_group_generation", "A group's current generation.", labels=["group"]
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
        logs = self._broker.logs
        shards = self._broker.groups.shards.values()
        loading.add_metric([], sum(1 for s in shards if s.state is ShardState.LOADING))
        for runtime in shards:
            if runtime.state is not ShardState.ACTIVE:
                continue
            shard = runtime.shard
            for group_id, group in shard.groups.items():
                members.add_metric([group_id], len(group.members))
                generation.add_metric([group_id], group.generation)
                for s in GroupState:
                    state.add_metric([group_id, s.value], 1.0 if group.state is s else 0.0)
                sums: dict[str, int] = {}
                for topic, partition, offset in shard.offsets.entries(group_id):
                    labels = [group_id, topic, str(partition)]
                    committed.add_metric(labels, offset.offset)
                    partition_log = logs.partition(topic, partition)
                    if partition_log is None or offset.offset < 0:
                        continue
                    behind = max(partition_log.high_watermark - offset.offset, 0)
                    lag.add_metric(labels, behind)
                    sums[topic] = sums.get(topic, 0) + behind
                for topic, behind in sums.items():
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
        for name, topic in self._broker.logs.topics.items():
            for partition_log in topic.partitions:
                labels = [name, str(partition_log.partition)]
                end.add_metric(labels, partition_log.log_end_offset)
                start.add_metric(labels, partition_log.log_start_offset)
                size.add_metric(labels, partition_log.size_bytes)
        yield from (end, start, size)


async def serve_metrics(metrics: BrokerMetrics, host: str, port: int) -> asyncio.Server:
    """GET /metrics over plain HTTP/1.1, one answer per connection."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(
                reader.readuntil(b"\r\n\r\n"), timeout=SCRAPE_READ_TIMEOUT_S
            )
            method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                status, body, kind = "405 Method Not Allowed", b"only GET\n", "text/plain"
            elif path in ("/metrics", "/"):
                status, body, kind = "200 OK", metrics.exposition(), CONTENT_TYPE_LATEST
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

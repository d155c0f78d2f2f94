"""The broker process: owns the event loop, the sockets, the clock and the logs."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from herdless.broker.appends import AppendNotifier
from herdless.broker.clock import now_ms
from herdless.broker.config import BrokerConfig
from herdless.broker.connection import Connection
from herdless.broker.durability import GroupCommit
from herdless.broker.group_coordinator import GroupCoordinator
from herdless.broker.metrics import BrokerMetrics, serve_metrics
from herdless.broker.producer_ids import ProducerIdManager
from herdless.storage import LogManager, PartitionLog

log = logging.getLogger(__name__)

# How long shutdown waits for requests in flight before closing their connections.
SHUTDOWN_GRACE_S = 10.0


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.logs = LogManager(config.data_dir, config.log_config())
        self.appends = AppendNotifier()
        self.cluster_id = ""
        self.groups = GroupCoordinator(
            self,
            config.coordinator_config(),
            config.offsets_topic_num_partitions,
            config.offsets_topic_segment_bytes,
        )
        self.stopping = False
        self._group_commits: dict[int, GroupCommit] = {}
        self._producer_ids: ProducerIdManager | None = None
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._background: list[asyncio.Task[None]] = []
        self._cleaning: asyncio.Future[int] | None = None
        self.bound_port = config.port
        self.metrics = BrokerMetrics(self)
        self._metrics_server: asyncio.Server | None = None

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        data_dir = Path(self.config.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = _load_cluster_id(data_dir, self.node_id)
        self._producer_ids = ProducerIdManager(data_dir / "producer-id-block")
        started = time.monotonic()
        self.logs.open(now_ms())
        log.info(
            "opened %d topics from %s in %.2fs",
            len(self.logs.topics),
            data_dir,
            time.monotonic() - started,
        )
        self.groups.start()
        # A deep accept queue: thousands of clients reconnecting at once (after a
        # restart, or a group of 10k members) overflowed asyncio's default of 100.
        self._server = await asyncio.start_server(
            self._accept, self.config.host, self.config.port, reuse_address=True, backlog=4096
        )
        self.bound_port = self._server.sockets[0].getsockname()[1]
        if self.config.advertised_port is None and self.config.port == 0:
            self.config.advertised_port = self.bound_port
        loop = asyncio.get_running_loop()
        self._background = [
            loop.create_task(self._every(self.config.retention_check_interval_ms, self._retain)),
            loop.create_task(self._every(self.config.flush_scheduler_interval_ms, self._flush_due)),
        ]
        if self.config.cleaner_enable:
            self._background.append(
                loop.create_task(self._every(self.config.cleaner_backoff_ms, self._clean))
            )
        log.info("herdless listening on %s:%d", self.config.host, self.bound_port)
        if self.config.metrics_port is not None:
            self._metrics_server = await serve_metrics(
                self.metrics, self.config.host, self.config.metrics_port
            )
            port = self._metrics_server.sockets[0].getsockname()[1]
            log.info("metrics at http://%s:%d/metrics", self.config.host, port)

    async def stop(self) -> None:
        """Stop accepting, answer requests in flight, then flush and close every log."""
        self.stopping = True
        if self._server is not None:
            self._server.close()
        if self._metrics_server is not None:
            self._metrics_server.close()
        for task in self._background:
            task.cancel()
        self.appends.notify_all()
        for task, connection in list(self._connections.items()):
            if connection.idle:
                task.cancel()
        busy = list(self._connections)
        if busy:
            _, pending = await asyncio.wait(busy, timeout=SHUTDOWN_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._cleaning is not None:
            await asyncio.gather(self._cleaning, return_exceptions=True)
        self.groups.close()
        self.logs.close()
        log.info("herdless stopped; logs flushed and closed")

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(self, reader, writer)
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = connection
        try:
            await connection.serve()
        finally:
            del self._connections[task]

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:
                log.exception("background job %s failed", getattr(job, "__name__", job))

    async def _retain(self) -> None:
        self.logs.apply_retention(now_ms())

    async def _clean(self) -> None:
        # Compaction rewrites whole segments: off the event loop, as fsync is. Shielded,
        # and awaited by stop(), so logs are never closed under a running clean.
        self._cleaning = asyncio.ensure_future(asyncio.to_thread(self.logs.clean, now_ms()))
        cleaned = await asyncio.shield(self._cleaning)
        if cleaned:
            log.debug("compacted %d logs", cleaned)

    async def _flush_due(self) -> None:
        now = now_ms()
        for topic in list(self.logs.topics.values()):
            flush_ms = topic.config.flush_ms
            if flush_ms is None:
                continue
            for partition_log in topic.partitions.values():
                if (
                    partition_log.unflushed_messages
                    and now - partition_log.last_flush_ms >= flush_ms
                ):
                    await self.flush(partition_log)

    # -- services for handlers ---------------------------------------------

    def next_producer_id(self) -> int:
        assert self._producer_ids is not None
        return self._producer_ids.next_id()

    async def flush(self, partition_log: PartitionLog) -> None:
        group_commit = self._group_commits.get(id(partition_log))
        if group_commit is None:
            group_commit = self._group_commits[id(partition_log)] = GroupCommit(partition_log)
        await group_commit.flush()

    def forget_log(self, partition_log: PartitionLog) -> None:
        self._group_commits.pop(id(partition_log), None)


def _load_cluster_id(data_dir: Path, node_id: int) -> str:
    """Keep a cluster id in meta.properties, as Kafka does, so it survives restarts."""
    meta = data_dir / "meta.properties"
    if meta.exists():
        for line in meta.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "cluster.id":
                return value.strip()
    cluster_id = _kafka_uuid()
    tmp = meta.with_suffix(".tmp")
    tmp.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    with contextlib.suppress(OSError):
        tmp.replace(meta)
    return cluster_id


def _kafka_uuid() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

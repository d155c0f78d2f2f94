"""The broker process: owns the event loop, the sockets, the clock and the logs."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from herdless.broker.auth.acl_store import AclStore, LocalAcls, ZooKeeperAcls
from herdless.broker.auth.credential_store import LocalCredentials, ZooKeeperCredentials
from herdless.broker.auth.delegation_tokens import DelegationTokenManager
from herdless.broker.auth.token_store import LocalTokens, ZooKeeperTokens
from herdless.broker.clock import monotonic_ms, wall_ms
from herdless.broker.cluster_node import ClusterNode
from herdless.broker.config import BrokerConfig
from herdless.broker.coordinators.coordinator_host import CoordinatorHost
from herdless.broker.coordinators.group_config_store import (
    GroupConfigStore,
    LocalGroupConfigs,
    ZooKeeperGroupConfigs,
)
from herdless.broker.coordinators.group_coordinator import REBALANCES_TOPIC, GroupCoordinator
from herdless.broker.coordinators.history_forwarder import HistoryForwarder
from herdless.broker.coordinators.share_coordinator import ShareCoordinator
from herdless.broker.coordinators.transaction_coordinator import TransactionCoordinator
from herdless.broker.coordinators.txn_markers import MarkerWriter
from herdless.broker.dynamic_config.layers import DynamicBrokerConfig
from herdless.broker.dynamic_config.reconfigurables import (
    HandlerSettings,
    ListenerTls,
    LogDefaults,
    ProducerExpiration,
    ReplicationThrottles,
)
from herdless.broker.dynamic_config.store import LocalBrokerConfigs, ZooKeeperBrokerConfigs
from herdless.broker.file_limit import DescriptorWatch, segment_file_budget
from herdless.broker.handlers.context import BrokerContext
from herdless.broker.handlers.fetch_sessions import FetchSessionCache
from herdless.broker.limited_warnings import WINDOW_S, LimitedWarnings
from herdless.broker.logs.log_dir_failure import LogDirFailureHandler
from herdless.broker.logs.scrubber import Scrubber
from herdless.broker.logs.storage_errors import StorageErrors
from herdless.broker.metrics import BrokerMetrics, serve_metrics
from herdless.broker.network.connection import Connection, RequestReader, start_server
from herdless.broker.network.failed_logins import DEFAULT_LIMIT, DEFAULT_WINDOW_MS, FailedLogins
from herdless.broker.network.inter_broker import inter_broker_security
from herdless.broker.network.listeners import (
    Listener,
    build_listeners,
    config_int,
)
from herdless.broker.network.tls_handshakes import quiet_server_name_errors
from herdless.broker.producer_ids import LocalBlocks, PrefetchedProducerIds, ProducerIds
from herdless.broker.quotas.manager import ClientQuotaManager
from herdless.broker.quotas.store import LocalQuotas, ZooKeeperQuotas
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.replica_manager import ReplicaManager
from herdless.broker.share.coordinator_persister import CoordinatorPersister
from herdless.broker.share.dead_letter_metrics import DeadLetterMetrics
from herdless.broker.share.dead_letter_writer import DeadLetterWriter
from herdless.broker.share.leader import ShareLeader
from herdless.broker.share.share_partition_metrics import SharePartitionMetrics
from herdless.broker.stalls import StallDetector
from herdless.broker.telemetry.manager import ClientMetricsManager
from herdless.broker.telemetry.store import LocalClientMetrics, ZooKeeperClientMetrics
from herdless.broker.topics.partition_limits import PartitionLimits
from herdless.broker.topics.topic_admin import LocalTopics, TopicAdmin, ZooKeeperTopics
from herdless.cluster.metadata import LocalMetadata
from herdless.cluster.metadata_cache import ClusterMetadata
from herdless.security.delegation_tokens import TokenLifetimes
from herdless.security.scram import verify_plain
from herdless.storage import LogManager, StorageIOError

log = logging.getLogger(__name__)

# How long shutdown waits for requests in flight before closing their connections.
SHUTDOWN_GRACE_S = 10.0


class Broker:
    """Builds the broker's parts, owns their lifecycle, accepts connections."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.metrics = BrokerMetrics(config.metrics_lag_per_partition)
        self.storage_errors = StorageErrors(self.metrics.storage_error)
        open_files, self._file_limit_note = segment_file_budget()
        self._descriptors = DescriptorWatch()
        # In a cluster a failed data directory takes the broker's replicas offline.
        self.log_dir_failures: LogDirFailureHandler | None = None
        # In a cluster the replica manager moves each log's high watermark; alone, every
        # appended record is committed at once.
        self.logs = LogManager(
            config.data_dir,
            config.log_config(),
            producer_id_expiration_ms=config.producer_id_expiration_ms,
            high_watermark_follows_log_end=not config.clustered,
            on_io_error=self._storage_failed,
            open_files=open_files,
            clock=wall_ms,
            monotonic_clock=monotonic_ms,
        )
        # flush.ms is an interval: on the monotonic clock.
        self.durability = Durability(monotonic_ms)
        self.node: ClusterNode | None = None
        self.history: HistoryForwarder | None = None
        self.metadata: LocalMetadata | ClusterMetadata
        self.replicas: ReplicaManager
        self.topics: TopicAdmin
        limits = PartitionLimits(config.max_partitions_per_request, config.max_broker_partitions)
        if config.clustered:
            self.metadata = ClusterMetadata(config.inter_broker_listener())
            # The clock the logs are given: record times and segment ages, the wall's.
            peer_security = inter_broker_security(config)
            self.node = ClusterNode(
                config,
                self.logs,
                self.durability,
                self.metadata,
                wall_ms,
                monotonic_ms,
                peer_security,
            )
            self.replicas = self.node.replicas
            self.log_dir_failures = LogDirFailureHandler(
                self.logs,
                wall_ms,  # reopening recovers segments, whose ages are on the wall clock
                self.node.log_dir_failed,
                self._log_dir_writes_again,
                self.node.resume_replicas,
                self.metrics.log_dir_offline,
            )
            self.history = HistoryForwarder(
                config.node_id, REBALANCES_TOPIC, self.metadata.leader, peer_security
            )
            self.topics = ZooKeeperTopics(
                self.node.connected_store,
                self.metadata,
                lambda: self.logs.default_config,
                config.num_partitions,
                config.default_replication_factor,
                limits,
            )
        else:
            self.metadata = LocalMetadata(
                config.node_id,
                lambda: config.advertised_endpoints(self._bound_ports),
                self.logs,
                config.rack,
            )
            self.replicas = ReplicaManager(self.logs, self.durability, wall_ms)
            self.topics = LocalTopics(self.logs, config.node_id, config.num_partitions, limits)
        self.stalls = StallDetector()
        coordinator_config = config.coordinator_config()
        self.group_configs: GroupConfigStore
        if self.node is not None:
            self.group_configs = ZooKeeperGroupConfigs(
                self.node.connected_store, coordinator_config.group_configs
            )
        else:
            self.group_configs = LocalGroupConfigs(
                Path(config.data_dir), coordinator_config.group_configs
            )
        self.credentials: LocalCredentials | ZooKeeperCredentials
        if self.node is not None:
            self.credentials = ZooKeeperCredentials(self.node.connected_store)
        else:
            self.credentials = LocalCredentials(Path(config.data_dir))
        self.delegation_tokens = self._delegation_token_manager()
        samples, window_ms = config.quota_window()
        self.quotas = ClientQuotaManager(samples, window_ms, monotonic_ms)
        self.metrics.attach_quotas(self.quotas)
        self.quota_store: LocalQuotas | ZooKeeperQuotas
        if isinstance(self.credentials, ZooKeeperCredentials):
            self.quota_store = ZooKeeperQuotas(self.credentials, self.quotas)
        else:
            self.quota_store = LocalQuotas(Path(config.data_dir), self.quotas)
        # Client telemetry (KIP-714): subscriptions kept where the quotas are.
        self.client_metrics = ClientMetricsManager(config.telemetry_max_bytes)
        self.metrics.attach_client_metrics(self.client_metrics)
        self.client_metrics_store: LocalClientMetrics | ZooKeeperClientMetrics
        if isinstance(self.credentials, ZooKeeperCredentials):
            assert self.node is not None
            self.client_metrics_store = ZooKeeperClientMetrics(
                self.credentials, self.node.connected_store, self.client_metrics
            )
        else:
            self.client_metrics_store = LocalClientMetrics(
                Path(config.data_dir), self.client_metrics
            )
        # The settings with dynamic broker configs over them, kept as quotas are.
        self.dynamic_config = DynamicBrokerConfig(config)
        self.broker_configs: LocalBrokerConfigs | ZooKeeperBrokerConfigs
        if self.node is not None and isinstance(self.credentials, ZooKeeperCredentials):
            self.broker_configs = ZooKeeperBrokerConfigs(
                self.credentials, self.node.connected_store, self.dynamic_config
            )
            self.dynamic_config.add_reconfigurable(
                ReplicationThrottles(self.node.leader_quota, self.node.follower_quota)
            )
        else:
            self.broker_configs = LocalBrokerConfigs(Path(config.data_dir), self.dynamic_config)
        self.dynamic_config.add_reconfigurable(
            LogDefaults(self.logs, lambda: self.logs.apply_retention(wall_ms()))
        )
        self.dynamic_config.add_reconfigurable(ProducerExpiration(self.logs))
        # One coordinator runtime, hosting the shards of every coordinator.
        self.coordinators = CoordinatorHost(self.logs, self.replicas, self.stalls)
        self.groups = GroupCoordinator(
            self.logs,
            self.replicas,
            coordinator_config,
            config.offsets_topic_num_partitions,
            config.offsets_topic_segment_bytes,
            on_rebalance=self.metrics.rebalanced,
            standby=config.group_coordinator_standby_enable,
            forward_history=None if self.history is None else self.history.send,
            stalls=self.stalls,
            host=self.coordinators,
        )
        # The transaction coordinator's producer ids, from blocks reserved at start().
        self.transaction_ids: PrefetchedProducerIds | None = None
        self.transactions: TransactionCoordinator | None = None
        self.share_coordinator: ShareCoordinator | None = None
        # How share partitions led here keep their state: through the share coordinator.
        self.share_persister: CoordinatorPersister | None = None
        # The share partitions this broker leads and their members' share sessions.
        self.share_partitions: ShareLeader | None = None
        # Where share partitions led here write their groups' dead letters (KIP-1191).
        self.dead_letters: DeadLetterWriter | None = None
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        self.acls: AclStore | None = None
        authorizer = config.authorizer()
        if authorizer is not None and self.node is not None:
            self.acls = ZooKeeperAcls(authorizer, self.node.connected_store)
        elif authorizer is not None:
            self.acls = LocalAcls(authorizer, Path(config.data_dir))
        self.metrics.attach(self.groups, self.logs, self.fetch_sessions)
        self.scrubber: Scrubber | None = None
        if config.scrubber_enable:
            self.scrubber = Scrubber(
                self.logs,
                config.scrubber_bytes_per_second,
                config.scrubber_backoff_ms,
                self.metrics.scrubbed,
            )
        self.context: BrokerContext | None = None
        self.listeners = build_listeners(
            config,
            self.credentials,
            functools.partial(verify_plain, self.credentials),
            self._handshake_failed,
            self.delegation_tokens,
        )
        tls = [(listener.name, listener.tls) for listener in self.listeners if listener.tls]
        if tls:
            self.dynamic_config.add_reconfigurable(ListenerTls(tls))
        self.failed_logins = FailedLogins(
            config_int(config, "connection.failed.authentication.limit", DEFAULT_LIMIT),
            config_int(config, "connection.failed.authentication.window.ms", DEFAULT_WINDOW_MS),
            monotonic_ms,
        )
        self._servers: list[asyncio.Server] = []
        # The port each listener bound, by listener name (a listener may ask for port 0).
        self._bound_ports: dict[str, int] = {}
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._background: list[asyncio.Task[None]] = []
        self._cleaning: asyncio.Future[int] | None = None
        self._metrics_server: asyncio.Server | None = None
        # A member of a cluster that has joined it and serves: it shuts down controlled.
        self._joined = False
        # Shared by all connections: limits are per peer host, across its connections.
        self.limited_warnings = LimitedWarnings(
            logging.getLogger("herdless.broker.network.connection")
        )

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        data_dir = Path(self.config.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        producer_ids: ProducerIds
        if self.node is not None:
            cluster_id = await self.node.connect()
            assert isinstance(self.group_configs, ZooKeeperGroupConfigs)
            await self.group_configs.start()
            assert isinstance(self.client_metrics_store, ZooKeeperClientMetrics)
            await self.client_metrics_store.start()  # before the notifications are followed
            assert isinstance(self.broker_configs, ZooKeeperBrokerConfigs)
            await self.broker_configs.start()
            assert isinstance(self.credentials, ZooKeeperCredentials)
            await self.credentials.start()
            if self.delegation_tokens is not None:
                await self.delegation_tokens.start()
            _check_cluster_id(data_dir, cluster_id, self.config.node_id)
            self.metadata.cluster_id = cluster_id
            producer_ids = self.node.producer_ids
        else:
            self.metadata.cluster_id = _load_cluster_id(data_dir, self.config.node_id)
            producer_ids = ProducerIds(LocalBlocks(data_dir / "producer-id-block").reserve)
            assert isinstance(self.group_configs, LocalGroupConfigs)
            self.group_configs.load()
            assert isinstance(self.credentials, LocalCredentials)
            self.credentials.load()
            if self.delegation_tokens is not None:
                await self.delegation_tokens.start()
            assert isinstance(self.quota_store, LocalQuotas)
            self.quota_store.load()
            assert isinstance(self.client_metrics_store, LocalClientMetrics)
            self.client_metrics_store.load()
            assert isinstance(self.broker_configs, LocalBrokerConfigs)
            self.broker_configs.load()
        started = time.monotonic()
        self.logs.open(wall_ms())
        # Said once the data directory is ours: a start that fails there says only why.
        log.info("%s", self._file_limit_note)
        log.info(
            "opened %d topics from %s in %.2fs",
            len(self.logs.topics),
            data_dir,
            time.monotonic() - started,
        )
        if self.acls is not None:
            await self.acls.start()  # decisions need every ACL before the first request
        if self.log_dir_failures is not None:
            self.log_dir_failures.start()
        self.transactions = self._transaction_coordinator(producer_ids)
        self.metrics.attach_transactions(self.transactions)
        self.share_coordinator = self._share_coordinator()
        self.share_persister = self._share_persister(self.share_coordinator)
        self.dead_letters = self._dead_letter_writer()
        self.share_partitions = ShareLeader.build(
            self.share_persister,
            self.replicas.appends.notify,
            self.config.share_group_limits(),
            self.config.group_share_max_share_sessions,
            self.group_configs.configs,
            self.dead_letters,
            SharePartitionMetrics(self.metrics.registry),
        )
        self.metrics.attach_shares(self.share_partitions)
        if self.node is None:
            self.groups.start()
            self.transactions.resume()
            self.share_coordinator.resume()
        else:
            # Shards follow leadership of the internal topics' partitions.
            self.node.leadership_listeners.append(self.coordinators.on_leadership)
            self.node.replication_listeners.append(self.coordinators.on_replicated)
            self.transactions.start_sweeping()
        context = self.context = BrokerContext(
            self.dynamic_config.current,
            self.logs,
            self.replicas,
            self.metadata,
            self.topics,
            self.groups,
            producer_ids,
            self.fetch_sessions,
            acls=self.acls,
            group_configs=self.group_configs,
            credentials=self.credentials,
            delegation_tokens=self.delegation_tokens,
            quotas=self.quotas,
            quota_store=self.quota_store,
            client_metrics=self.client_metrics,
            client_metrics_store=self.client_metrics_store,
            transactions=self.transactions,
            share_coordinator=self.share_coordinator,
            share_persister=self.share_persister,
            share_partitions=self.share_partitions,
            bytes_out=self.metrics.bytes_out,
            dynamic_config=self.dynamic_config,
            broker_config_store=self.broker_configs,
        )
        self.dynamic_config.add_reconfigurable(HandlerSettings(context))
        if self.node is not None:
            membership = self.node.membership
            context.controller = lambda: (
                membership.controller
                if membership.controller is not None and membership.controller.active
                else None
            )
        self.metrics.attach_authorizer(context.authorizer_audit.counts)
        # A deep accept queue: thousands of clients reconnecting at once (after a
        # restart, or a group of 10k members) overflowed asyncio's default of 100.
        # A member of a cluster binds its port now (its registration names the port) but
        # listens only once it has joined and read the cluster's state, as a Kafka broker
        # processes requests only at the end of its startup: before, it would answer
        # Metadata with no brokers and no topics, and librdkafka (2.10 on) forgets every
        # broker a Metadata answer leaves out. Connections are refused until then.
        if any(listener.ssl_context is not None for listener in self.listeners):
            quiet_server_name_errors(
                lambda problem: self.limited_warnings.warn("TLS server names", problem)
            )
        for listener in self.listeners:
            server = await start_server(
                functools.partial(self._accept, listener),
                listener.endpoint.host or None,
                listener.endpoint.port,
                ssl=listener.ssl_context,
                reuse_address=True,
                backlog=4096,
                start_serving=self.node is None,
            )
            self._servers.append(server)
            self._bound_ports[listener.name] = server.sockets[0].getsockname()[1]
        context.bound_port = self._bound_ports[self.listeners[0].name]
        context.bound_ports = self._bound_ports
        loop = asyncio.get_running_loop()
        self.stalls.start()
        self._background = [
            loop.create_task(self._every(self.config.retention_check_interval_ms, self._retain)),
            loop.create_task(self._every(self.config.flush_scheduler_interval_ms, self._flush_due)),
            loop.create_task(
                self._every(
                    self.config.producer_id_expiration_check_interval_ms, self._expire_producers
                )
            ),
            loop.create_task(self._every(int(WINDOW_S * 1000), self._summarise_warnings)),
        ]
        if self.config.cleaner_enable:
            self._background.append(
                loop.create_task(self._every(self.config.cleaner_backoff_ms, self._clean))
            )
        if self.scrubber is not None:
            self._background.append(loop.create_task(self.scrubber.run()))
        if self.delegation_tokens is not None:
            interval_ms = self.config.delegation_token_expiry_check_interval_ms
            self._background.append(loop.create_task(self._every(interval_ms, self._expire_tokens)))
        if self.node is not None:
            await self.node.join(self.config.advertised_endpoints(self._bound_ports))
            timeout_s = self.config.zookeeper_session_timeout_ms / 1000
            if not await self.node.wait_caught_up(timeout_s):
                log.warning(
                    "the cluster's state was not all read within %.0fs of joining;"
                    " serving all the same",
                    timeout_s,
                )
            for server in self._servers:
                await server.start_serving()
            self._joined = True
        for listener in self.listeners:
            log.info(
                "herdless listening on %s://%s:%d",
                listener.name,
                listener.endpoint.host or "0.0.0.0",
                self._bound_ports[listener.name],
            )
        if self.config.metrics_port is not None:
            host = self.config.metrics_host
            self._metrics_server = await serve_metrics(self.metrics, host, self.config.metrics_port)
            port = self._metrics_server.sockets[0].getsockname()[1]
            shown = f"[{host}]" if ":" in host else host
            log.info("metrics at http://%s:%d/metrics", shown, port)

    async def stop(self) -> None:
        """Stop accepting, answer requests in flight, then flush and close every log.

        A member of a cluster first has its leaderships moved to other brokers, while it
        still answers (controlled.shutdown.enable): clients find the new leaders from the
        NOT_LEADER_OR_FOLLOWER answers instead of waiting for this broker's session to
        end."""
        if self.node is not None and self._joined and self.config.controlled_shutdown_enable:
            await self.node.controlled_shutdown()
        if self.context is not None:
            self.context.stopping = True
        for server in self._servers:
            server.close()
        if self._metrics_server is not None:
            self._metrics_server.close()
        for task in self._background:
            task.cancel()
        self.stalls.stop()
        self.replicas.appends.notify_all()
        if self.share_partitions is not None:
            self.share_partitions.partitions.close()
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
        if self.scrubber is not None:
            await self.scrubber.stop()
        if self.acls is not None:
            await self.acls.stop()
        if self.log_dir_failures is not None:
            await self.log_dir_failures.stop()
        if isinstance(self.credentials, ZooKeeperCredentials):
            await self.credentials.stop()
        if self.delegation_tokens is not None:
            await self.delegation_tokens.stop()
        if self.node is not None:
            await self.node.stop()
        if self.history is not None:
            await self.history.stop()
        if self.transactions is not None:
            await self.transactions.close()
            self.transactions.markers.close()
        if self.transaction_ids is not None:
            await self.transaction_ids.close()
        if self.share_persister is not None:
            self.share_persister.close()
        if self.dead_letters is not None:
            self.dead_letters.close()
        self.groups.close()
        self.coordinators.close()
        self.logs.close()
        if self.context is not None:  # not after a start that failed
            log.info("herdless stopped; logs flushed and closed")

    def _transaction_coordinator(self, producer_ids: ProducerIds) -> TransactionCoordinator:
        config = self.config
        self.transaction_ids = PrefetchedProducerIds(
            producer_ids.reserve,
            lambda exc: log.warning("cannot reserve producer ids for transactions: %s", exc),
        )
        # Reserved now, so that the first InitProducerId finds ids at hand.
        self.transaction_ids.prefetch()
        metadata = self.metadata
        markers = MarkerWriter(
            config.node_id,
            self.replicas,
            self.groups,
            metadata.leader if isinstance(metadata, ClusterMetadata) else lambda t, p: None,
            lambda topic: metadata.topic(topic) is not None,
            inter_broker_security(config) if self.node is not None else None,
        )
        # One broker alone has one replica of each partition of the transaction log.
        replicas = config.transaction_state_log_replication_factor if self.node else 1
        return TransactionCoordinator(
            self.coordinators,
            config.transaction_config(),
            self.transaction_ids,
            config.transaction_state_log_num_partitions,
            markers,
            min(config.transaction_state_log_min_isr, replicas),
            config.transaction_state_log_segment_bytes,
            events=self.metrics.transactions,
            standalone=self.node is None,
        )

    def _share_coordinator(self) -> ShareCoordinator:
        config = self.config
        # One broker alone has one replica of each partition of the share state topic.
        replicas = config.share_coordinator_state_topic_replication_factor if self.node else 1
        return ShareCoordinator(
            self.coordinators,
            config.share_coordinator_config(),
            min(config.share_coordinator_state_topic_min_isr, replicas),
            config.share_coordinator_state_topic_segment_bytes,
            standalone=self.node is None,
        )

    def _share_persister(self, shares: ShareCoordinator) -> CoordinatorPersister:
        config, metadata = self.config, self.metadata
        return CoordinatorPersister(
            shares,
            config.node_id,
            metadata.leader if isinstance(metadata, ClusterMetadata) else lambda t, p: None,
            lambda topic: metadata.topic(topic) is not None,
            self.topics,
            config.share_coordinator_state_topic_replication_factor,
            inter_broker_security(config) if self.node is not None else None,
        )

    def _dead_letter_writer(self) -> DeadLetterWriter:
        config, metadata = self.config, self.metadata
        return DeadLetterWriter(
            config.node_id,
            self.replicas,
            self.topics,
            metadata.partition_count,
            metadata.leader if isinstance(metadata, ClusterMetadata) else None,
            DeadLetterMetrics(self.metrics.registry),
            auto_create=config.errors_deadletterqueue_auto_create_topics_enable,
            prefix=config.errors_deadletterqueue_topic_name_prefix,
            security=inter_broker_security(config) if self.node is not None else None,
        )

    async def _accept(
        self, listener: Listener, reader: RequestReader, writer: asyncio.StreamWriter
    ) -> None:
        assert self.context is not None
        if listener.sasl is not None:
            peer = writer.get_extra_info("peername")
            address = peer[0] if peer else ""
            if self.failed_logins.turned_away(address):
                self.limited_warnings.warn(
                    f"connections from {address}",
                    f"turning away a connection from {address}: too many failed logins"
                    " (connection.failed.authentication.limit)",
                )
                writer.close()
                return
        connection = Connection(
            self.context,
            self.metrics,
            reader,
            writer,
            self.limited_warnings,
            listener,
            self.failed_logins,
        )
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = connection
        warning = self._descriptors.connection_accepted(len(self._connections))
        if warning is not None:
            self.limited_warnings.warn("the file limit", warning)
        try:
            await connection.serve()
        finally:
            del self._connections[task]

    def _handshake_failed(self, listener: str, error: ssl.SSLError) -> None:
        self.metrics.tls_handshake_failed(listener)
        reason = error.reason or str(error)
        # Limited per reason: a flood of one failure does not hide another.
        self.limited_warnings.warn(
            f"TLS handshakes on listener {listener} failing with {reason}",
            f"a TLS handshake on listener {listener} failed: {reason}",
        )

    def _storage_failed(self, operation: str, subject: str, error: StorageIOError) -> None:
        """A disk operation failed; from any thread (flushes fail in worker threads)."""
        self.storage_errors.report(operation, subject, error)
        if self.log_dir_failures is not None:
            self.log_dir_failures.report(operation, subject, error)

    async def _log_dir_writes_again(self) -> None:
        assert self.node is not None
        await self.node.log_dir_writes_again(self.config.zookeeper_session_timeout_ms / 1000)

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:
                log.exception("background job %s failed", getattr(job, "__name__", job))

    def _delegation_token_manager(self) -> DelegationTokenManager | None:
        """Delegation tokens, when delegation.token.secret.key is set (Kafka's
        tokenAuthEnabled: an empty key is none), kept where the credentials are."""
        config = self.config
        if not config.delegation_token_secret_key:
            return None
        store: LocalTokens | ZooKeeperTokens
        if self.node is not None:
            store = ZooKeeperTokens(self.node.connected_store)
        else:
            store = LocalTokens(Path(config.data_dir))
        lifetimes = TokenLifetimes(
            config.delegation_token_max_lifetime_ms, config.delegation_token_expiry_time_ms
        )
        return DelegationTokenManager(config.delegation_token_secret_key, lifetimes, store, wall_ms)

    async def _expire_tokens(self) -> None:
        # Token times are the wall clock's, as clients and other brokers read them.
        assert self.delegation_tokens is not None
        await self.delegation_tokens.expire_tokens()

    async def _retain(self) -> None:
        # Retention and cleaning compare with record times: the wall clock.
        self.logs.apply_retention(wall_ms())

    async def _expire_producers(self) -> None:
        # Against the producers' record times, as retention: the wall clock.
        expired = self.logs.remove_expired_producers(wall_ms())
        if expired:
            log.debug("forgot %d idle producers (producer.id.expiration.ms)", expired)

    async def _clean(self) -> None:
        # Compaction rewrites whole segments: off the event loop, as fsync is. Shielded,
        # and awaited by stop(), so logs are never closed under a running clean.
        self._cleaning = asyncio.ensure_future(asyncio.to_thread(self.logs.clean, wall_ms()))
        cleaned = await asyncio.shield(self._cleaning)
        if cleaned:
            log.debug("compacted %d logs", cleaned)

    async def _summarise_warnings(self) -> None:
        self.limited_warnings.sweep()
        self.storage_errors.sweep()
        if self.context is not None:
            self.context.authorizer_audit.sweep()

    async def _flush_due(self) -> None:
        await self.durability.flush_due(self.logs.logs())


class ClusterIdMismatch(Exception):
    """This data directory belongs to another cluster than the one in ZooKeeper."""


def _check_cluster_id(data_dir: Path, cluster_id: str, node_id: int) -> None:
    """As Kafka: a broker refuses to join a cluster other than the one its data came from."""
    stored = _read_meta(data_dir).get("cluster.id")
    if stored is not None and stored != cluster_id:
        raise ClusterIdMismatch(
            f"{data_dir} holds data of cluster {stored}, but ZooKeeper holds cluster"
            f" {cluster_id}: use another data directory, or the ZooKeeper it came from"
        )
    if stored is None:
        _write_meta(data_dir, cluster_id, node_id)


def _read_meta(data_dir: Path) -> dict[str, str]:
    meta = data_dir / "meta.properties"
    if not meta.exists():
        return {}
    values = {}
    for line in meta.read_text().splitlines():
        key, _, value = line.partition("=")
        values[key.strip()] = value.strip()
    return values


def _write_meta(data_dir: Path, cluster_id: str, node_id: int) -> None:
    meta = data_dir / "meta.properties"
    tmp = meta.with_suffix(".tmp")
    tmp.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    with contextlib.suppress(OSError):
        tmp.replace(meta)


def _load_cluster_id(data_dir: Path, node_id: int) -> str:
    """Keep a cluster id in meta.properties, as Kafka does, so it survives restarts."""
    stored = _read_meta(data_dir).get("cluster.id")
    if stored is not None:
        return stored
    cluster_id = _kafka_uuid()
    _write_meta(data_dir, cluster_id, node_id)
    return cluster_id


def _kafka_uuid() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

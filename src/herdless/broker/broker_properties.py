"""Kafka's broker properties as herdless reads them: each name with the BrokerConfig
field and type it sets, the range it must fall in, the broker-wide topic defaults
under their log.* names, and the durations Kafka takes in several units."""

from __future__ import annotations

from herdless.storage import LogConfig

# Kafka broker property -> (BrokerConfig field, parser). Topic defaults use their log.* names.
BROKER_PROPERTIES: dict[str, tuple[str, type]] = {
    "node.id": ("node_id", int),
    "broker.id": ("node_id", int),
    # A cluster: where its metadata lives in ZooKeeper (host:port[,host:port][/chroot]).
    "zookeeper.connect": ("zookeeper_connect", str),
    "zookeeper.session.timeout.ms": ("zookeeper_session_timeout_ms", int),
    "zookeeper.connection.timeout.ms": ("zookeeper_connection_timeout_ms", int),
    "broker.rack": ("rack", str),
    "default.replication.factor": ("default_replication_factor", int),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", int),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", int),
    # Which replica consumers read from (KIP-392); unset: the leader, as in Kafka.
    "replica.selector.class": ("replica_selector_class", str),
    # Replication throttles (KIP-73), bytes per second over the replicas the topics'
    # *.replication.throttled.replicas name; dynamic broker configs too
    # (broker/dynamic_config/), changed while the broker runs.
    "leader.replication.throttled.rate": ("leader_replication_throttled_rate", int),
    "follower.replication.throttled.rate": ("follower_replication_throttled_rate", int),
    "replication.quota.window.num": ("replication_quota_window_num", int),
    "replication.quota.window.size.seconds": ("replication_quota_window_size_seconds", int),
    # Leader balance (the controller's): hand partitions back to their preferred leaders
    # where a broker's share led by others is over the percentage, at every interval.
    "auto.leader.rebalance.enable": ("auto_leader_rebalance_enable", bool),
    "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_seconds", int),
    "leader.imbalance.per.broker.percentage": ("leader_imbalance_per_broker_percentage", int),
    # At SIGTERM, ask the controller to move this broker's leaderships first.
    "controlled.shutdown.enable": ("controlled_shutdown_enable", bool),
    "controlled.shutdown.max.retries": ("controlled_shutdown_max_retries", int),
    "controlled.shutdown.retry.backoff.ms": ("controlled_shutdown_retry_backoff_ms", int),
    # Fetch sessions (KIP-227) kept at once; 0 serves every fetch without a session.
    "max.incremental.fetch.session.cache.slots": ("max_incremental_fetch_session_cache_slots", int),
    "auto.create.topics.enable": ("auto_create_topics", bool),
    # The most partitions one DescribeTopicPartitions answer names (KIP-966); a client
    # asking for fewer gets fewer, and a cursor to the rest.
    "max.request.partition.size.limit": ("max_request_partition_size_limit", int),
    "num.partitions": ("num_partitions", int),
    "socket.request.max.bytes": ("max_request_bytes", int),
    "connections.max.idle.ms": ("connections_max_idle_ms", int),
    # Client quotas are measured over this many samples of this many seconds each.
    "quota.window.num": ("quota_window_num", int),
    "quota.window.size.seconds": ("quota_window_size_seconds", int),
    # The largest PushTelemetry a client may send (KIP-714).
    "telemetry.max.bytes": ("telemetry_max_bytes", int),
    # herdless's own: how long a frame that has begun to arrive may take to arrive whole.
    "request.read.timeout.ms": ("request_read_timeout_ms", int),
    # Partitions (replicas) one broker may host, as KIP-578 names it; lowered at start
    # to what the process's file limit allows.
    "max.broker.partitions": ("max_broker_partitions", int),
    # herdless's own: partitions one CreateTopics or CreatePartitions request may add.
    "max.partitions.per.request": ("max_partitions_per_request", int),
    "log.retention.check.interval.ms": ("retention_check_interval_ms", int),
    "log.flush.scheduler.interval.ms": ("flush_scheduler_interval_ms", int),
    "delete.topic.enable": ("delete_topic_enable", bool),
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", int),
    "offsets.topic.segment.bytes": ("offsets_topic_segment_bytes", int),
    "log.cleaner.enable": ("cleaner_enable", bool),
    "log.cleaner.backoff.ms": ("cleaner_backoff_ms", int),
    # herdless's own: a background reading of sealed segments that finds batches no
    # longer matching their CRCs, at a bounded rate, with a pause between two passes.
    "log.scrubber.enable": ("scrubber_enable", bool),
    "log.scrubber.bytes.per.second": ("scrubber_bytes_per_second", int),
    "log.scrubber.backoff.ms": ("scrubber_backoff_ms", int),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", int),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", int),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", int),
    "group.max.size": ("group_max_size", int),
    # Consumer groups (KIP-848): the broker sets their sessions and heartbeats.
    "group.consumer.session.timeout.ms": ("group_consumer_session_timeout_ms", int),
    "group.consumer.min.session.timeout.ms": ("group_consumer_min_session_timeout_ms", int),
    "group.consumer.max.session.timeout.ms": ("group_consumer_max_session_timeout_ms", int),
    "group.consumer.heartbeat.interval.ms": ("group_consumer_heartbeat_interval_ms", int),
    "group.consumer.min.heartbeat.interval.ms": ("group_consumer_min_heartbeat_interval_ms", int),
    "group.consumer.max.heartbeat.interval.ms": ("group_consumer_max_heartbeat_interval_ms", int),
    "group.consumer.max.size": ("group_consumer_max_size", int),
    # KIP-1263: the least time between two target assignments of a group, and whether the
    # assignor runs off the event loop.
    "group.consumer.assignment.interval.ms": ("group_consumer_assignment_interval_ms", int),
    "group.consumer.min.assignment.interval.ms": (
        "group_consumer_min_assignment_interval_ms",
        int,
    ),
    "group.consumer.max.assignment.interval.ms": (
        "group_consumer_max_assignment_interval_ms",
        int,
    ),
    "group.consumer.assignor.offload.enable": ("group_consumer_assignor_offload_enable", bool),
    # Server assignors by name (uniform, range), or by Kafka's class names; the first is the
    # default.
    "group.consumer.assignors": ("group_consumer_assignors", str),
    # Online conversion of a group between the classic and the consumer protocol:
    # bidirectional, upgrade, downgrade or disabled.
    "group.consumer.migration.policy": ("group_consumer_migration_policy", str),
    # Share groups (KIP-932): whether they are served (Kafka 4.2 gates them on its
    # share.version feature, on by default), and their sessions, heartbeats and size.
    "group.share.enable": ("group_share_enable", bool),
    "group.share.session.timeout.ms": ("group_share_session_timeout_ms", int),
    "group.share.min.session.timeout.ms": ("group_share_min_session_timeout_ms", int),
    "group.share.max.session.timeout.ms": ("group_share_max_session_timeout_ms", int),
    "group.share.heartbeat.interval.ms": ("group_share_heartbeat_interval_ms", int),
    "group.share.min.heartbeat.interval.ms": ("group_share_min_heartbeat_interval_ms", int),
    "group.share.max.heartbeat.interval.ms": ("group_share_max_heartbeat_interval_ms", int),
    "group.share.max.size": ("group_share_max_size", int),
    # Share assignors by name (simple), or by Kafka's class name; the first is used.
    "group.share.assignors": ("group_share_assignors", str),
    # herdless's own: in a cluster, followers of a __consumer_offsets partition keep its
    # groups replayed (a warm standby), so a new leader serves without loading.
    "group.coordinator.standby.enable": ("group_coordinator_standby_enable", bool),
    "offsets.retention.minutes": ("offsets_retention_minutes", int),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", int),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", int),
    # The transaction coordinator and its log, by Kafka's names and defaults.
    "transaction.state.log.num.partitions": ("transaction_state_log_num_partitions", int),
    "transaction.state.log.replication.factor": (
        "transaction_state_log_replication_factor",
        int,
    ),
    "transaction.state.log.min.isr": ("transaction_state_log_min_isr", int),
    "transaction.state.log.segment.bytes": ("transaction_state_log_segment_bytes", int),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", int),
    "transactional.id.expiration.ms": ("transactional_id_expiration_ms", int),
    # The share coordinator and its log (KIP-932), by Kafka's names and defaults.
    "share.coordinator.state.topic.num.partitions": (
        "share_coordinator_state_topic_num_partitions",
        int,
    ),
    "share.coordinator.state.topic.replication.factor": (
        "share_coordinator_state_topic_replication_factor",
        int,
    ),
    "share.coordinator.state.topic.min.isr": ("share_coordinator_state_topic_min_isr", int),
    "share.coordinator.state.topic.segment.bytes": (
        "share_coordinator_state_topic_segment_bytes",
        int,
    ),
    "share.coordinator.snapshot.update.records.per.snapshot": (
        "share_coordinator_snapshot_update_records_per_snapshot",
        int,
    ),
    # A partition leader forgets an idle producer's id and sequences after this, unless
    # it has a transaction open; checked every producer.id.expiration.check.interval.ms.
    "producer.id.expiration.ms": ("producer_id_expiration_ms", int),
    "producer.id.expiration.check.interval.ms": ("producer_id_expiration_check_interval_ms", int),
    # Delegation tokens (KIP-48): the secret key (master.key is its old name) enables them.
    "delegation.token.secret.key": ("delegation_token_secret_key", str),
    "delegation.token.master.key": ("delegation_token_secret_key", str),
    "delegation.token.max.lifetime.ms": ("delegation_token_max_lifetime_ms", int),
    "delegation.token.expiry.time.ms": ("delegation_token_expiry_time_ms", int),
    "delegation.token.expiry.check.interval.ms": (
        "delegation_token_expiry_check_interval_ms",
        int,
    ),
    # KIP-890: a partition leader asks the coordinator whether a transactional batch's
    # partition is in its producer's transaction before appending it.
    "transaction.partition.verification.enable": (
        "transaction_partition_verification_enable",
        bool,
    ),
    # Share groups (KIP-932): record locks, deliveries and share sessions, Kafka's names.
    "group.share.record.lock.duration.ms": ("group_share_record_lock_duration_ms", int),
    "group.share.min.record.lock.duration.ms": ("group_share_min_record_lock_duration_ms", int),
    "group.share.max.record.lock.duration.ms": ("group_share_max_record_lock_duration_ms", int),
    "group.share.delivery.count.limit": ("group_share_delivery_count_limit", int),
    "group.share.partition.max.record.locks": ("group_share_partition_max_record_locks", int),
    "group.share.max.share.sessions": ("group_share_max_share_sessions", int),
    # Share groups' dead-letter topics (KIP-1191): whether the broker creates one a group
    # names that does not exist, and what every such name must start with.
    "errors.deadletterqueue.auto.create.topics.enable": (
        "errors_deadletterqueue_auto_create_topics_enable",
        bool,
    ),
    "errors.deadletterqueue.topic.name.prefix": ("errors_deadletterqueue_topic_name_prefix", str),
    # herdless's own: where Prometheus scrapes /metrics; unset, no endpoint.
    "metrics.port": ("metrics_port", int),
    # herdless's own: the address /metrics listens on; this machine only unless told,
    # whatever address the listeners take (metrics name every group and topic).
    "metrics.host": ("metrics_host", str),
    # false: lag per group and topic only, not per partition (fewer series).
    "metrics.lag.per.partition": ("metrics_lag_per_partition", bool),
}

# The range each numeric setting above must fall in, checked by BrokerConfig.validate:
# (smallest, largest), None for no bound. Intervals start at 1 because a background
# job every 0 ms would never yield the event loop.
PORT_RANGE = (0, 65_535)
PROPERTY_RANGES: dict[str, tuple[int | None, int | None]] = {
    "delegation.token.max.lifetime.ms": (1, None),
    "delegation.token.expiry.time.ms": (1, None),
    "delegation.token.expiry.check.interval.ms": (1, None),
    "node.id": (0, None),
    "max.request.partition.size.limit": (1, None),
    # A rate of at least 0 and windows of at least a second, as Kafka; two windows at
    # least, where Kafka allows one (a rate over one window forgets all at each turn).
    "leader.replication.throttled.rate": (0, None),
    "follower.replication.throttled.rate": (0, None),
    "replication.quota.window.num": (2, None),
    "replication.quota.window.size.seconds": (1, None),
    "num.partitions": (1, None),
    "socket.request.max.bytes": (1, None),
    "connections.max.idle.ms": (1, None),
    "telemetry.max.bytes": (1, None),
    "request.read.timeout.ms": (1, None),
    "max.broker.partitions": (1, None),
    "max.partitions.per.request": (1, None),
    "log.retention.check.interval.ms": (1, None),
    "log.flush.scheduler.interval.ms": (1, None),
    "offsets.topic.num.partitions": (1, None),
    "offsets.topic.segment.bytes": (1, None),
    "log.cleaner.backoff.ms": (1, None),
    "log.scrubber.bytes.per.second": (1, None),
    "log.scrubber.backoff.ms": (1, None),
    "group.min.session.timeout.ms": (0, None),
    "group.max.session.timeout.ms": (1, None),
    "group.initial.rebalance.delay.ms": (0, None),
    "group.max.size": (1, None),
    "group.consumer.session.timeout.ms": (1, None),
    "group.consumer.min.session.timeout.ms": (1, None),
    "group.consumer.max.session.timeout.ms": (1, None),
    "group.consumer.heartbeat.interval.ms": (1, None),
    "group.consumer.min.heartbeat.interval.ms": (1, None),
    "group.consumer.max.heartbeat.interval.ms": (1, None),
    "group.consumer.max.size": (1, None),
    "group.consumer.assignment.interval.ms": (0, None),
    "group.consumer.min.assignment.interval.ms": (0, None),
    "group.consumer.max.assignment.interval.ms": (0, None),
    "group.share.session.timeout.ms": (1, None),
    "group.share.min.session.timeout.ms": (1, None),
    "group.share.max.session.timeout.ms": (1, None),
    "group.share.heartbeat.interval.ms": (1, None),
    "group.share.min.heartbeat.interval.ms": (1, None),
    "group.share.max.heartbeat.interval.ms": (1, None),
    "group.share.max.size": (1, 1000),
    "offsets.retention.minutes": (1, None),
    "offsets.retention.check.interval.ms": (1, None),
    "offset.metadata.max.bytes": (0, None),
    "transaction.state.log.num.partitions": (1, None),
    "transaction.state.log.replication.factor": (1, None),
    "transaction.state.log.min.isr": (1, None),
    "transaction.state.log.segment.bytes": (1, None),
    "transaction.max.timeout.ms": (1, None),
    "transactional.id.expiration.ms": (1, None),
    "share.coordinator.state.topic.num.partitions": (1, None),
    "share.coordinator.state.topic.replication.factor": (1, None),
    "share.coordinator.state.topic.min.isr": (1, None),
    "share.coordinator.state.topic.segment.bytes": (1, None),
    "share.coordinator.snapshot.update.records.per.snapshot": (0, 500),
    "producer.id.expiration.ms": (1, None),
    "producer.id.expiration.check.interval.ms": (1, None),
    "metrics.port": PORT_RANGE,
    # Kafka's bounds.
    "group.share.record.lock.duration.ms": (1_000, 3_600_000),
    "group.share.min.record.lock.duration.ms": (1_000, 30_000),
    "group.share.max.record.lock.duration.ms": (30_000, 3_600_000),
    "group.share.delivery.count.limit": (2, 10),
    "group.share.partition.max.record.locks": (100, 10_000),
    "group.share.max.share.sessions": (1, None),
    "zookeeper.session.timeout.ms": (1, None),
    "leader.imbalance.check.interval.seconds": (1, None),
    "leader.imbalance.per.broker.percentage": (0, 100),
    "controlled.shutdown.max.retries": (1, None),
    "controlled.shutdown.retry.backoff.ms": (0, None),
    "zookeeper.connection.timeout.ms": (1, None),
    "default.replication.factor": (1, None),
    "offsets.topic.replication.factor": (1, None),
    "replica.lag.time.max.ms": (1, None),
    "max.incremental.fetch.session.cache.slots": (0, None),
}

# Broker-wide topic defaults: Kafka's log.* name -> topic config name.
TOPIC_DEFAULTS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.cleanup.policy": "cleanup.policy",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
    "log.message.downconversion.enable": "message.downconversion.enable",
    "log.message.format.version": "message.format.version",
    "log.preallocate": "preallocate",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "log.local.retention.ms": "local.retention.ms",
    "log.local.retention.bytes": "local.retention.bytes",
}

# Durations Kafka takes in several units: the finest one given wins, whatever the order
# they come in (KafkaConfig.logRetentionTimeMillis, logRollTimeMillis).
DURATIONS: dict[str, tuple[tuple[str, int], ...]] = {
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
}
DURATION_KEYS = {key for units in DURATIONS.values() for key, _ in units}


# The broker-wide topic defaults by every broker name they may be given under.
TOPIC_DEFAULT_PROPERTIES = frozenset([*TOPIC_DEFAULTS, *DURATION_KEYS])


def topic_config_of(key: str) -> str | None:
    """The topic config a broker-wide default sets (log.retention.hours: retention.ms)."""
    if key in TOPIC_DEFAULTS:
        return TOPIC_DEFAULTS[key]
    for topic_config, units in DURATIONS.items():
        if any(key == name for name, _ in units):
            return topic_config
    return None


def duration_synonyms(key: str) -> tuple[str, ...]:
    """The names of one duration finest first (log.retention.ms, .minutes, .hours), for
    any of them; (key,) for any other setting."""
    for units in DURATIONS.values():
        names = tuple(name for name, _ in units)
        if key in names:
            return names
    return (key,)


def property_kind(key: str) -> type | None:
    """The type a broker property is parsed as (int, bool, str); None if not one of the
    properties herdless keeps in a field."""
    found = BROKER_PROPERTIES.get(key)
    return None if found is None else found[1]


def broker_topic_defaults(config: LogConfig) -> dict[str, str]:
    """The broker-wide topic defaults under their broker names (log.retention.ms, ...)."""
    topic_configs = config.to_topic_configs()
    defaults = {broker: topic_configs[topic] for broker, topic in TOPIC_DEFAULTS.items()}
    for topic_config, units in DURATIONS.items():
        defaults[units[0][0]] = topic_configs[topic_config]
    return defaults

"""Broker settings, named after Kafka's broker configs so a properties file reads the same."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from herdless.broker.broker_properties import (
    BROKER_PROPERTIES,
    DURATION_KEYS,
    DURATIONS,
    PORT_RANGE,
    PROPERTY_RANGES,
    TOPIC_DEFAULTS,
    broker_topic_defaults,
)
from herdless.broker.replication.replica_selector import ReplicaSelector, replica_selector
from herdless.broker.share.share_group_settings import ShareGroupLimits
from herdless.broker.share.share_sessions import DEFAULT_MAX_SHARE_SESSIONS
from herdless.cluster.controller import LeaderBalance
from herdless.cluster.zookeeper.login import read_zookeeper_security
from herdless.coordinator import CoordinatorConfig
from herdless.coordinator.assignors import ASSIGNORS
from herdless.coordinator.config import ConsumerGroupMigrationPolicy
from herdless.coordinator.dead_letter_config import DEFAULT_DEAD_LETTER_TOPIC_PREFIX
from herdless.coordinator.group_config import GroupConfigLimits
from herdless.coordinator.share_assignor import SHARE_ASSIGNORS, SIMPLE_ASSIGNOR
from herdless.coordinator.share_partitions.config import (
    DEFAULT_DELIVERY_COUNT_LIMIT,
    DEFAULT_MAX_RECORD_LOCKS,
    DEFAULT_RECORD_LOCK_DURATION_MS,
)
from herdless.coordinator.share_state import ShareCoordinatorConfig
from herdless.coordinator.transactions import TransactionConfig
from herdless.protocol.config_values import InvalidConfigValue, format_boolean, parse_boolean
from herdless.security.authorizer import AuthorizerSettings, authorizer_settings
from herdless.security.delegation_tokens import (
    DEFAULT_EXPIRY_CHECK_INTERVAL_MS,
    DEFAULT_EXPIRY_TIME_MS,
    DEFAULT_MAX_LIFETIME_MS,
)
from herdless.security.listeners import (
    DEFAULT_PROTOCOL_MAP,
    Endpoint,
    ListenerError,
    SecurityProtocol,
    inter_broker_listener,
    parse_listeners,
    parse_protocol_map,
)
from herdless.security.settings import SecuritySettings, is_security_setting
from herdless.security.zookeeper import ZooKeeperSecurity
from herdless.storage import LogConfig

# group.consumer.assignors may name assignors as Kafka does, by class.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
_SHARE_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.SimpleAssignor": SIMPLE_ASSIGNOR,
}


_WILDCARD_HOSTS = ("0.0.0.0", "::", "")


class ConfigError(ValueError):
    """A broker setting that cannot be used; the message names it."""


@dataclass
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    data_dir: Path = Path("herdless-data")
    node_id: int = 0
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    metrics_lag_per_partition: bool = True
    auto_create_topics: bool = True
    max_request_partition_size_limit: int = 2000
    num_partitions: int = 1
    max_request_bytes: int = 104_857_600
    connections_max_idle_ms: int = 600_000
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    telemetry_max_bytes: int = 1_048_576
    request_read_timeout_ms: int = 30_000
    max_broker_partitions: int = 2**31 - 1
    max_partitions_per_request: int = 1_000
    retention_check_interval_ms: int = 300_000
    flush_scheduler_interval_ms: int = 1_000
    delete_topic_enable: bool = True
    topic_defaults: dict[str, str] = field(default_factory=dict)
    # log.retention.ms/minutes/hours and log.roll.ms/hours as given, by key.
    durations: dict[str, str] = field(default_factory=dict)
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 104_857_600
    cleaner_enable: bool = True
    cleaner_backoff_ms: int = 15_000
    scrubber_enable: bool = True
    # 4 MiB/s: a terabyte is read in three days, a few percent of a disk's bandwidth.
    scrubber_bytes_per_second: int = 4 * 1024 * 1024
    scrubber_backoff_ms: int = 300_000
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_min_session_timeout_ms: int = 45_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_assignment_interval_ms: int = 1_000
    group_consumer_min_assignment_interval_ms: int = 0
    group_consumer_max_assignment_interval_ms: int = 15_000
    group_consumer_assignor_offload_enable: bool = True
    group_consumer_assignors: str = "uniform,range"
    group_consumer_migration_policy: str = "bidirectional"
    group_share_enable: bool = True
    group_share_session_timeout_ms: int = 45_000
    group_share_min_session_timeout_ms: int = 45_000
    group_share_max_session_timeout_ms: int = 60_000
    group_share_heartbeat_interval_ms: int = 5_000
    group_share_min_heartbeat_interval_ms: int = 5_000
    group_share_max_heartbeat_interval_ms: int = 15_000
    group_share_max_size: int = 200
    group_share_assignors: str = SIMPLE_ASSIGNOR
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 104_857_600
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000
    transaction_partition_verification_enable: bool = True
    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_state_topic_replication_factor: int = 3
    share_coordinator_state_topic_min_isr: int = 2
    share_coordinator_state_topic_segment_bytes: int = 104_857_600
    share_coordinator_snapshot_update_records_per_snapshot: int = 500
    # Cluster mode, with Kafka's defaults; unset zookeeper_connect: one broker alone.
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int = 18_000
    zookeeper_connection_timeout_ms: int = 18_000
    rack: str | None = None
    default_replication_factor: int = 1
    offsets_topic_replication_factor: int = 3
    group_coordinator_standby_enable: bool = True
    replica_lag_time_max_ms: int = 30_000
    replica_selector_class: str | None = None
    leader_replication_throttled_rate: int = 0x7FFF_FFFF_FFFF_FFFF  # Long.MaxValue: none
    follower_replication_throttled_rate: int = 0x7FFF_FFFF_FFFF_FFFF
    replication_quota_window_num: int = 11
    replication_quota_window_size_seconds: int = 1
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5_000
    max_incremental_fetch_session_cache_slots: int = 1_000
    group_share_record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS
    group_share_min_record_lock_duration_ms: int = 15_000
    group_share_max_record_lock_duration_ms: int = 60_000
    group_share_delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    group_share_partition_max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS
    group_share_max_share_sessions: int = DEFAULT_MAX_SHARE_SESSIONS
    errors_deadletterqueue_auto_create_topics_enable: bool = False
    errors_deadletterqueue_topic_name_prefix: str = DEFAULT_DEAD_LETTER_TOPIC_PREFIX
    # Delegation tokens (KIP-48), Kafka's defaults; the same key on every broker.
    delegation_token_secret_key: str | None = field(default=None, repr=False)
    delegation_token_max_lifetime_ms: int = DEFAULT_MAX_LIFETIME_MS
    delegation_token_expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS
    delegation_token_expiry_check_interval_ms: int = DEFAULT_EXPIRY_CHECK_INTERVAL_MS
    # listeners, ssl.*, sasl.*, the authorizer's: as given, read by herdless.security.
    security: SecuritySettings = field(default_factory=SecuritySettings)
    # Every property applied (file, --set, dynamic configs), as given: what DescribeConfigs
    # reports as set rather than Kafka's default.
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def clustered(self) -> bool:
        return self.zookeeper_connect is not None

    def protocol_map(self) -> dict[str, SecurityProtocol]:
        value = self.security.get("listener.security.protocol.map")
        return dict(DEFAULT_PROTOCOL_MAP) if value is None else parse_protocol_map(value)

    def listener_endpoints(self) -> list[Endpoint]:
        """The listeners to bind: `listeners`, else one PLAINTEXT listener on --host and
        --port (the first listener's host and port are also where --host and --port
        point, for the metrics endpoint and the console)."""
        value = self.security.get("listeners")
        if value is None:
            return [Endpoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, self.host, self.port)]
        try:
            return parse_listeners(value, self.protocol_map())
        except ListenerError as exc:
            raise ConfigError(str(exc)) from None

    def advertised_endpoints(self, bound: dict[str, int] | None = None) -> list[Endpoint]:
        """What clients and other brokers are told, listener by listener, in the order of
        `listeners`: `advertised.listeners` where it names the listener, else the
        listener itself with a wildcard host made 127.0.0.1 (and --advertised-host and
        --advertised-port for the first). `bound`: the ports bound, for listeners on
        port 0."""
        bound = bound or {}
        listeners = self.listener_endpoints()
        advertised: dict[str, Endpoint] = {}
        value = self.security.get("advertised.listeners")
        if value is not None:
            try:
                entries = parse_listeners(value, self.protocol_map(), "advertised.listeners")
            except ListenerError as exc:
                raise ConfigError(str(exc)) from None
            names = {e.listener for e in listeners}
            for entry in entries:
                if entry.listener not in names:
                    raise ConfigError(
                        f"advertised.listeners names {entry.listener}, which is not among"
                        f" the listeners ({', '.join(sorted(names))})"
                    )
                if entry.host in _WILDCARD_HOSTS:
                    raise ConfigError(
                        f"advertised.listeners cannot advertise {entry}: clients cannot"
                        " connect to a wildcard address"
                    )
                advertised[entry.listener] = entry
        endpoints = []
        for index, listener in enumerate(listeners):
            endpoint = advertised.get(listener.listener)
            if endpoint is None:
                host, port = listener.host, listener.port
                if index == 0:
                    host = self.advertised_host or host
                    port = self.advertised_port or port
                if host in _WILDCARD_HOSTS:
                    host = "127.0.0.1"
                endpoint = Endpoint(listener.listener, listener.security_protocol, host, port)
            if endpoint.port == 0:
                endpoint = Endpoint(
                    endpoint.listener,
                    endpoint.security_protocol,
                    endpoint.host,
                    bound.get(listener.listener, 0),
                )
            endpoints.append(endpoint)
        return endpoints

    def inter_broker_listener(self) -> str:
        """The listener name brokers reach each other on."""
        try:
            return inter_broker_listener(
                self.listener_endpoints(),
                self.security.get("inter.broker.listener.name"),
                self.security.get("security.inter.broker.protocol"),
            )
        except ListenerError as exc:
            raise ConfigError(str(exc)) from None

    def authorizer(self) -> AuthorizerSettings | None:
        """authorizer.class.name, super.users, allow.everyone.if.no.acl.found; None: no
        authorizer, everything allowed."""
        try:
            return authorizer_settings(self.security)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def zookeeper_security(self) -> ZooKeeperSecurity:
        """How this broker logs in to ZooKeeper and whether its znodes get ACLs:
        java.security.auth.login.config, zookeeper.sasl.*, zookeeper.set.acl, and
        KAFKA_OPTS's -D options (herdless.cluster.zookeeper.login)."""
        try:
            return read_zookeeper_security(self.security.raw)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def coordinator_config(self) -> CoordinatorConfig:
        return CoordinatorConfig(
            min_session_timeout_ms=self.group_min_session_timeout_ms,
            max_session_timeout_ms=self.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            max_group_size=self.group_max_size,
            offsets_retention_ms=self.offsets_retention_minutes * 60_000,
            offsets_retention_check_interval_ms=self.offsets_retention_check_interval_ms,
            offset_metadata_max_bytes=self.offset_metadata_max_bytes,
            consumer_session_timeout_ms=self.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=self.group_consumer_heartbeat_interval_ms,
            consumer_max_group_size=self.group_consumer_max_size,
            consumer_assignors=self.consumer_assignors(),
            consumer_migration_policy=self.consumer_migration_policy(),
            consumer_assignment_interval_ms=self.group_consumer_assignment_interval_ms,
            consumer_assignor_offload_enable=self.group_consumer_assignor_offload_enable,
            share_session_timeout_ms=self.group_share_session_timeout_ms,
            share_heartbeat_interval_ms=self.group_share_heartbeat_interval_ms,
            share_max_group_size=self.group_share_max_size,
            share_assignors=self.share_assignors(),
        )

    def transaction_config(self) -> TransactionConfig:
        return TransactionConfig(
            max_timeout_ms=self.transaction_max_timeout_ms,
            transactional_id_expiration_ms=self.transactional_id_expiration_ms,
            offsets_topic_num_partitions=self.offsets_topic_num_partitions,
        )

    def share_coordinator_config(self) -> ShareCoordinatorConfig:
        return ShareCoordinatorConfig(
            num_partitions=self.share_coordinator_state_topic_num_partitions,
            snapshot_update_records_per_snapshot=(
                self.share_coordinator_snapshot_update_records_per_snapshot
            ),
        )

    def quota_window(self) -> tuple[int, int]:
        """(quota.window.num, quota.window.size.seconds in ms); ConfigError if unusable."""
        if self.quota_window_num < 2:
            raise ConfigError(f"quota.window.num must be at least 2, not {self.quota_window_num}")
        if self.quota_window_size_seconds < 1:
            raise ConfigError(
                "quota.window.size.seconds must be at least 1, not"
                f" {self.quota_window_size_seconds}"
            )
        return self.quota_window_num, self.quota_window_size_seconds * 1000

    def consumer_migration_policy(self) -> ConsumerGroupMigrationPolicy:
        """group.consumer.migration.policy, any case as Kafka reads it."""
        value = self.group_consumer_migration_policy.strip().lower()
        try:
            return ConsumerGroupMigrationPolicy(value)
        except ValueError:
            known = ", ".join(p.value for p in ConsumerGroupMigrationPolicy)
            raise ConfigError(
                f"group.consumer.migration.policy must be one of {known}, not {value!r}"
            ) from None

    def group_config_limits(self) -> GroupConfigLimits:
        return GroupConfigLimits(
            session_timeout_ms=self.group_consumer_session_timeout_ms,
            min_session_timeout_ms=self.group_consumer_min_session_timeout_ms,
            max_session_timeout_ms=self.group_consumer_max_session_timeout_ms,
            heartbeat_interval_ms=self.group_consumer_heartbeat_interval_ms,
            min_heartbeat_interval_ms=self.group_consumer_min_heartbeat_interval_ms,
            max_heartbeat_interval_ms=self.group_consumer_max_heartbeat_interval_ms,
            assignment_interval_ms=self.group_consumer_assignment_interval_ms,
            min_assignment_interval_ms=self.group_consumer_min_assignment_interval_ms,
            max_assignment_interval_ms=self.group_consumer_max_assignment_interval_ms,
            assignor_offload_enable=self.group_consumer_assignor_offload_enable,
            share_session_timeout_ms=self.group_share_session_timeout_ms,
            min_share_session_timeout_ms=self.group_share_min_session_timeout_ms,
            max_share_session_timeout_ms=self.group_share_max_session_timeout_ms,
            share_heartbeat_interval_ms=self.group_share_heartbeat_interval_ms,
            min_share_heartbeat_interval_ms=self.group_share_min_heartbeat_interval_ms,
            max_share_heartbeat_interval_ms=self.group_share_max_heartbeat_interval_ms,
            share_record_lock_duration_ms=self.group_share_record_lock_duration_ms,
            min_share_record_lock_duration_ms=self.group_share_min_record_lock_duration_ms,
            max_share_record_lock_duration_ms=self.group_share_max_record_lock_duration_ms,
            share_delivery_count_limit=self.group_share_delivery_count_limit,
            share_partition_max_record_locks=self.group_share_partition_max_record_locks,
            dead_letter_topic_prefix=self.errors_deadletterqueue_topic_name_prefix,
        )

    def share_group_limits(self) -> ShareGroupLimits:
        return ShareGroupLimits(
            record_lock_duration_ms=self.group_share_record_lock_duration_ms,
            min_record_lock_duration_ms=self.group_share_min_record_lock_duration_ms,
            max_record_lock_duration_ms=self.group_share_max_record_lock_duration_ms,
            delivery_count_limit=self.group_share_delivery_count_limit,
            partition_max_record_locks=self.group_share_partition_max_record_locks,
        )

    def consumer_assignors(self) -> tuple[str, ...]:
        """group.consumer.assignors as assignor names; ConfigError for one herdless lacks."""
        names = []
        for entry in self.group_consumer_assignors.split(","):
            name = _ASSIGNOR_CLASSES.get(entry.strip(), entry.strip())
            if name not in ASSIGNORS:
                raise ConfigError(
                    f"group.consumer.assignors: no assignor {entry.strip()!r};"
                    f" known: {', '.join(ASSIGNORS)}"
                )
            names.append(name)
        if not names:
            raise ConfigError("group.consumer.assignors must name at least one assignor")
        return tuple(names)

    def share_assignors(self) -> tuple[str, ...]:
        """group.share.assignors as assignor names; ConfigError for one herdless lacks."""
        names = []
        for entry in self.group_share_assignors.split(","):
            name = _SHARE_ASSIGNOR_CLASSES.get(entry.strip(), entry.strip())
            if name not in SHARE_ASSIGNORS:
                raise ConfigError(
                    f"group.share.assignors: no assignor {entry.strip()!r};"
                    f" known: {', '.join(SHARE_ASSIGNORS)}"
                )
            names.append(name)
        return tuple(names)

    def replica_selector(self) -> ReplicaSelector | None:
        """replica.selector.class as a selector; ConfigError for a class herdless lacks."""
        try:
            return replica_selector(self.replica_selector_class)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def leader_balance(self) -> LeaderBalance:
        return LeaderBalance(
            self.auto_leader_rebalance_enable,
            self.leader_imbalance_check_interval_seconds,
            self.leader_imbalance_per_broker_percentage,
        )

    def log_config(self) -> LogConfig:
        return LogConfig.from_topic_configs(self.topic_defaults)

    def apply_properties(self, properties: dict[str, str]) -> None:
        """Apply Kafka-style broker properties; unknown or bad ones raise ConfigError."""
        for key, raw in properties.items():
            value = raw.strip()
            if key in BROKER_PROPERTIES:
                name, kind = BROKER_PROPERTIES[key]
                setattr(self, name, _parse(key, value, kind))
            elif key in TOPIC_DEFAULTS:
                self.topic_defaults[TOPIC_DEFAULTS[key]] = value
            elif key in DURATION_KEYS:
                _parse(key, value, int)
                self.durations[key] = value
            elif is_security_setting(key):
                self.security = self.security.with_settings(**{key: value})
            elif key == "log.dirs" or key == "log.dir":
                self.data_dir = Path(value.split(",")[0])
            else:
                known = sorted([*BROKER_PROPERTIES, *TOPIC_DEFAULTS, *DURATION_KEYS])
                raise ConfigError(
                    f"unknown broker setting {key!r}; known: {', '.join(known)}, the"
                    " listener, ssl.*, sasl.* and authorizer settings (docs/security.md)"
                )
            self.properties[key] = value
        if "listeners" in properties:
            # --host and --port name the first listener from now on (once the protocol
            # map, which may come after it, is in).
            first = self.listener_endpoints()[0]
            self.host, self.port = first.host or "0.0.0.0", first.port
        self._resolve_durations()
        self._check_topic_defaults()

    def _resolve_durations(self) -> None:
        for topic_config, units in DURATIONS.items():
            for key, millis_per_unit in units:
                if key in self.durations:
                    millis = int(self.durations[key]) * millis_per_unit
                    if topic_config == "retention.ms" and millis < 0:
                        millis = -1  # any negative retention is Kafka's "forever"
                    self.topic_defaults[topic_config] = str(millis)
                    break

    def validate(self) -> None:
        """Check the settings as a whole, however they were set (file, --set, options):
        a ConfigError names the first that is out of range, before anything starts."""
        _check_range("port", self.port, *PORT_RANGE)
        if self.advertised_port is not None:
            _check_range("advertised port", self.advertised_port, *PORT_RANGE)
        for key, (smallest, largest) in PROPERTY_RANGES.items():
            value = getattr(self, BROKER_PROPERTIES[key][0])
            if value is not None:
                _check_range(key, value, smallest, largest)
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ConfigError(
                f"group.min.session.timeout.ms ({self.group_min_session_timeout_ms}) must not"
                f" exceed group.max.session.timeout.ms ({self.group_max_session_timeout_ms})"
            )
        self._check_group_timeouts("consumer", ("session", "heartbeat", "assignment"))
        self._check_group_timeouts("share", ("session", "heartbeat"))
        self._check_share_lock_durations()
        try:
            self.protocol_map()
        except ListenerError as exc:
            raise ConfigError(str(exc)) from None
        self.advertised_endpoints()
        self.inter_broker_listener()
        self.authorizer()
        if self.clustered:
            self.zookeeper_security()
        self.consumer_assignors()
        self.consumer_migration_policy()
        self.share_assignors()
        self.replica_selector()
        self._check_topic_defaults()

    def _check_group_timeouts(self, kind: str, names: tuple[str, ...]) -> None:
        """Kafka's rules for group.consumer.* and group.share.*: each within its bounds, a
        heartbeat more often than a session ends."""
        prefix = f"group.{kind}."
        for name in names:
            what = f"{name}.{'timeout' if name == 'session' else 'interval'}.ms"
            field = what.replace(".", "_")
            value = getattr(self, f"group_{kind}_{field}")
            low = getattr(self, f"group_{kind}_min_{field}")
            high = getattr(self, f"group_{kind}_max_{field}")
            if low > high:
                raise ConfigError(
                    f"{prefix}max.{what} ({high}) must be at least {prefix}min.{what} ({low})"
                )
            if not low <= value <= high:
                raise ConfigError(
                    f"{prefix}{what} ({value}) must be between {prefix}min.{what} ({low})"
                    f" and {prefix}max.{what} ({high})"
                )
        heartbeat = getattr(self, f"group_{kind}_heartbeat_interval_ms")
        session = getattr(self, f"group_{kind}_session_timeout_ms")
        if heartbeat >= session:
            raise ConfigError(
                f"{prefix}heartbeat.interval.ms ({heartbeat})"
                f" must be less than {prefix}session.timeout.ms ({session})"
            )

    def _check_share_lock_durations(self) -> None:
        """Kafka's rule: the lock duration between its minimum and maximum."""
        low = self.group_share_min_record_lock_duration_ms
        value = self.group_share_record_lock_duration_ms
        high = self.group_share_max_record_lock_duration_ms
        if not low <= value <= high:
            raise ConfigError(
                f"group.share.record.lock.duration.ms ({value}) must be between"
                f" group.share.min.record.lock.duration.ms ({low}) and"
                f" group.share.max.record.lock.duration.ms ({high})"
            )

    def _check_topic_defaults(self) -> None:
        try:
            self.log_config()
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc


def _check_range(name: str, value: int, smallest: int | None, largest: int | None) -> None:
    if smallest is not None and largest is not None and not smallest <= value <= largest:
        raise ConfigError(f"{name} must be between {smallest} and {largest}, not {value}")
    if smallest is not None and value < smallest:
        raise ConfigError(f"{name} must be at least {smallest}, not {value}")
    if largest is not None and value > largest:
        raise ConfigError(f"{name} must be at most {largest}, not {value}")


def broker_property_values(config: BrokerConfig) -> dict[str, str | None]:
    """The value in force of every broker property herdless reads by name (the security
    settings aside), as Kafka writes it; None for one unset."""
    values: dict[str, str | None] = {}
    for key, (name, kind) in BROKER_PROPERTIES.items():
        value = getattr(config, name)
        if value is None:
            values[key] = None
        else:
            values[key] = format_boolean(value) if kind is bool else str(value)
    values.update(broker_topic_defaults(config.log_config()))
    # Every unit of a duration: as given, the finest (ms) as in force, and Kafka's
    # default of 168 hours where none is given.
    for units in DURATIONS.values():
        given = [name for name, _ in units if name in config.durations]
        for name, _ in units[1:]:
            values[name] = config.durations.get(name)
        if not given:
            values[units[-1][0]] = "168"
    return values


def _parse(key: str, value: str, kind: type) -> object:
    if kind is bool:
        try:
            return parse_boolean(key, value)
        except InvalidConfigValue as exc:
            raise ConfigError(str(exc)) from None
    try:
        return kind(value)
    except ValueError:
        raise ConfigError(f"{key} must be an integer, not {value!r}") from None


def read_properties(path: Path) -> dict[str, str]:
    """Read a Java-style properties file: key=value lines, # and ! comments, and a
    line ending in a backslash continued on the next (as client settings files write
    a long sasl.jaas.config)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    properties: dict[str, str] = {}
    for number, stripped in _logical_lines(text):
        if not stripped or stripped[0] in "#!":
            continue
        key, sep, value = stripped.partition("=")
        if not sep:
            key, sep, value = stripped.partition(":")
        if not sep:
            raise ConfigError(f"{path}:{number}: expected key=value, got {stripped!r}")
        properties[key.strip()] = value.strip()
    return properties


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Each logical line, stripped, with the number of the line it starts on."""
    lines: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if pending is not None:
            number, stripped = pending[0], pending[1] + stripped
            pending = None
        elif stripped[:1] in ("#", "!"):
            lines.append((number, stripped))  # a comment never continues
            continue
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2:
            pending = (number, stripped[:-1])
            continue
        lines.append((number, stripped))
    if pending is not None:
        lines.append(pending)
    return lines

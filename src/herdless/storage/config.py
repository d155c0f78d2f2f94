"""Per-topic log configuration under Kafka's topic-config names, with Kafka's defaults."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

from herdless.protocol.config_values import InvalidConfigValue, format_boolean, parse_boolean
from herdless.protocol.records import Compression
from herdless.storage.errors import InvalidConfigError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

CLEANUP_POLICIES = frozenset({"delete", "compact"})
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


class ConfigSource(IntEnum):
    """DescribeConfigs' config_source values (Kafka's DescribeConfigsResponse.ConfigSource)
    of topic and broker configs."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000
    retention_bytes: int = -1
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    # None is Kafka's Long.MAX_VALUE: leave flushing to the OS and to replication.
    flush_messages: int | None = None
    flush_ms: int | None = None
    cleanup_policy: str = "delete"
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    delete_retention_ms: int = 86400000
    # The log cleaner's: clean once this share of a compacted log is dirty...
    min_cleanable_dirty_ratio: float = 0.5
    # ...and leave records younger than this as they are.
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    # A segment rolls after segment.ms less a random jitter of up to this, drawn per segment.
    segment_jitter_ms: int = 0
    # None is Long.MAX_VALUE: no record waits longer than this to be compacted.
    max_compaction_lag_ms: int | None = None
    # Producer timestamps further in the past / future than these are refused (CreateTime).
    message_timestamp_before_max_ms: int | None = None
    message_timestamp_after_max_ms: int | None = None
    message_timestamp_difference_max_ms: int | None = None  # deprecated: both of the above
    # Accepted and reported as Kafka does, with nothing to act on in one local broker:
    # files are unlinked at once (open readers keep theirs), segments are not
    # preallocated, there is one replica and no remote tier.
    file_delete_delay_ms: int = 60000
    preallocate: bool = False
    unclean_leader_election_enable: bool = False
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    message_downconversion_enable: bool = True
    message_format_version: str = "3.0-IV1"
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    # KIP-1191 (Kafka 4.4): whether share groups may name this topic their dead-letter
    # topic; the topic's owner opts in.
    errors_deadletterqueue_group_enable: bool = False
    # Kafka names given explicitly for this topic; DescribeConfigs reports them as topic configs.
    overrides: frozenset[str] = frozenset()
    # Derived once: every append asks (compacts, timestamp_bounds, target_compression,
    # max_segment_ms).
    _derived: _Derived = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        policies = self.cleanup_policy.split(",")
        log_append_time = self.message_timestamp_type == "LogAppendTime"
        if log_append_time:
            bounds: tuple[int | None, int | None] = (None, None)
        else:
            # As in Kafka 3.9: message.timestamp.difference.max.ms stands in for either
            # bound left at its default.
            fallback = self.message_timestamp_difference_max_ms
            before = self.message_timestamp_before_max_ms
            after = self.message_timestamp_after_max_ms
            bounds = (fallback if before is None else before, fallback if after is None else after)
        target = None
        if self.compression_type != "producer":
            codec = _CODECS[self.compression_type]
            level = {
                Compression.GZIP: self.compression_gzip_level,
                Compression.LZ4: self.compression_lz4_level,
                Compression.ZSTD: self.compression_zstd_level,
            }.get(codec)
            target = (codec, level)
        derived = _Derived(
            "delete" in policies,
            "compact" in policies,
            log_append_time,
            bounds,
            target,
            target is None and not log_append_time and bounds == (None, None),
            min(self.segment_ms, self.max_compaction_lag_ms)
            if "compact" in policies and self.max_compaction_lag_ms is not None
            else self.segment_ms,
        )
        object.__setattr__(self, "_derived", derived)

    @classmethod
    def from_topic_configs(
        cls, configs: Mapping[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Apply Kafka topic configs over `base` (Kafka's defaults when None).

        Only the keys given here count as overrides: `base` usually carries the
        broker's defaults, which DescribeConfigs must not report as topic configs.
        """
        changes: dict[str, Any] = {}
        for name, raw in configs.items():
            spec = _SPECS.get(name)
            if spec is None:
                raise InvalidConfigError(f"unknown topic config {name!r}")
            if not isinstance(raw, str):
                raise InvalidConfigError(f"topic config {name!r} must be a string, got {raw!r}")
            changes[spec.field] = spec.parse(name, raw.strip())
        start = base if base is not None else cls()
        config = dataclasses.replace(start, overrides=frozenset(configs), **changes)
        config._check_combination()
        return config

    def _check_combination(self) -> None:
        """Kafka's cross-config checks (LogConfig.validate)."""
        max_lag = INT64_MAX if self.max_compaction_lag_ms is None else self.max_compaction_lag_ms
        if self.min_compaction_lag_ms > max_lag:
            raise InvalidConfigError(
                f"conflict topic config setting min.compaction.lag.ms"
                f" ({self.min_compaction_lag_ms}) > max.compaction.lag.ms ({max_lag})"
            )
        if self.remote_storage_enable:
            raise InvalidConfigError(
                "remote.storage.enable=true: tiered storage is not available in herdless;"
                " topics are kept on local disk"
            )

    def to_topic_configs(self) -> dict[str, str]:
        return {name: spec.render(getattr(self, spec.field)) for name, spec in _SPECS.items()}

    def explicit_topic_configs(self) -> dict[str, str]:
        """The overrides only, rendered canonically: what to persist for the topic."""
        rendered = self.to_topic_configs()
        return {name: rendered[name] for name in sorted(self.overrides)}

    def config_source(self, name: str) -> ConfigSource:
        if name not in _SPECS:
            raise InvalidConfigError(f"unknown topic config {name!r}")
        if name in self.overrides:
            return ConfigSource.TOPIC_CONFIG
        field = _SPECS[name].field
        if getattr(self, field) != getattr(_KAFKA_DEFAULTS, field):
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    def is_default(self, name: str) -> bool:
        return self.config_source(name) == ConfigSource.DEFAULT_CONFIG

    @property
    def deletes(self) -> bool:
        return self._derived.deletes

    @property
    def compacts(self) -> bool:
        return self._derived.compacts

    @property
    def log_append_time(self) -> bool:
        return self._derived.log_append_time

    @property
    def timestamp_bounds(self) -> tuple[int | None, int | None]:
        """How far before and after the broker's clock a CreateTime timestamp may be."""
        return self._derived.timestamp_bounds

    @property
    def stores_batches_as_given(self) -> bool:
        """Whether a batch is stored with only its offsets and leader epoch rewritten: no
        recompression, no LogAppendTime stamp, no timestamp bounds to check it against."""
        return self._derived.stores_batches_as_given

    @property
    def max_segment_ms(self) -> int:
        """How long a segment may stay active; when compacting, max.compaction.lag.ms too."""
        return self._derived.max_segment_ms

    @property
    def target_compression(self) -> tuple[Compression, int | None] | None:
        """The codec and level the topic stores batches in, or None to keep the producer's."""
        return self._derived.target_compression


class _Derived(NamedTuple):
    deletes: bool
    compacts: bool
    log_append_time: bool
    timestamp_bounds: tuple[int | None, int | None]
    target_compression: tuple[Compression, int | None] | None
    stores_batches_as_given: bool
    max_segment_ms: int


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _integer(name: str, raw: str, low: int, high: int) -> int:
    if not _INTEGER.fullmatch(raw):
        raise InvalidConfigError(f"topic config {name!r}: {raw!r} is not an integer")
    value = int(raw)
    if not low <= value <= high:
        raise InvalidConfigError(f"topic config {name!r}: {value} is outside [{low}, {high}]")
    return value


def _int(low: int) -> Callable[[str, str], int]:
    return lambda name, raw: _integer(name, raw, low, INT32_MAX)


def _long(low: int) -> Callable[[str, str], int]:
    return lambda name, raw: _integer(name, raw, low, INT64_MAX)


def _long_or_never(low: int) -> Callable[[str, str], int | None]:
    def parse(name: str, raw: str) -> int | None:
        value = _integer(name, raw, low, INT64_MAX)
        return None if value == INT64_MAX else value

    return parse


# What Java's Double.parseDouble reads: decimal or hexadecimal, NaN, Infinity, a type suffix.
_JAVA_DOUBLE = re.compile(
    r"(?P<sign>[+-]?)(?:(?P<special>NaN|Infinity)"
    r"|(?P<hex>0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)"
    r"|(?P<decimal>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?))[fFdD]?"
)


def _java_double(name: str, raw: str) -> float:
    found = _JAVA_DOUBLE.fullmatch(raw)
    if found is None:
        raise InvalidConfigError(f"topic config {name!r}: {raw!r} is not a number")
    sign = -1.0 if found["sign"] == "-" else 1.0
    if found["special"] is not None:
        return sign * float(found["special"].replace("Infinity", "inf"))
    if found["hex"] is not None:
        return sign * float.fromhex(found["hex"])
    return sign * float(found["decimal"])


def _ratio(name: str, raw: str) -> float:
    value = _java_double(name, raw)
    # Kafka's range check, which NaN passes (it then never cleans, as here).
    if value < 0.0 or value > 1.0:
        raise InvalidConfigError(f"topic config {name!r}: {value} is outside [0, 1]")
    return value


def _cleanup_policy(name: str, raw: str) -> str:
    # Kafka 3.9 takes an empty list too: neither deleted nor compacted, kept for ever.
    policies = [item.strip() for item in raw.split(",")] if raw else []
    if any(p not in CLEANUP_POLICIES for p in policies):
        raise InvalidConfigError(
            f"topic config {name!r}: {raw!r} is not a list of {sorted(CLEANUP_POLICIES)}"
        )
    return ",".join(dict.fromkeys(policies))


def _timestamp_type(name: str, raw: str) -> str:
    if raw not in TIMESTAMP_TYPES:
        raise InvalidConfigError(f"topic config {name!r}: {raw!r} is not one of {TIMESTAMP_TYPES}")
    return raw


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_CODECS = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


def _compression_type(name: str, raw: str) -> str:
    return _one_of(name, raw.lower(), COMPRESSION_TYPES)


def _one_of(name: str, raw: str, allowed: tuple[str, ...]) -> str:
    if raw not in allowed:
        raise InvalidConfigError(f"topic config {name!r}: {raw!r} is not one of {list(allowed)}")
    return raw


def _gzip_level(name: str, raw: str) -> int:
    value = _integer(name, raw, -1, 9)
    if value == 0:
        raise InvalidConfigError(f"topic config {name!r}: must be between 1 and 9 or equal to -1")
    return value


def _range(low: int, high: int) -> Callable[[str, str], int]:
    return lambda name, raw: _integer(name, raw, low, high)


def _boolean(name: str, raw: str) -> bool:
    try:
        return parse_boolean(name, raw)
    except InvalidConfigValue as exc:
        raise InvalidConfigError(str(exc)) from None


_THROTTLED_REPLICA = re.compile(r"[0-9]+:[0-9]+")


def _throttled_replicas(name: str, raw: str) -> str:
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if items == ["*"] or all(_THROTTLED_REPLICA.fullmatch(item) for item in items):
        return ",".join(items)
    raise InvalidConfigError(
        f"topic config {name!r}: {raw!r} must be the literal '*' or a list of replicas"
        " in the form partitionId:brokerId"
    )


# Kafka 3.9's metadata versions (MetadataVersion): release and internal version, the
# last two not yet production ones.
_METADATA_VERSIONS = (
    *(("0.8.0", ""), ("0.8.1", ""), ("0.8.2", ""), ("0.9.0", "")),
    *(
        (release, f"IV{n}")
        for release, count in (("0.10.0", 2), ("0.10.1", 3))
        for n in range(count)
    ),
    *(("0.10.2", "IV0"), *(("0.11.0", f"IV{n}") for n in range(3)), ("1.0", "IV0"), ("1.1", "IV0")),
    *(("2.0", "IV0"), ("2.0", "IV1"), *(("2.1", f"IV{n}") for n in range(3))),
    *(
        ("2.2", "IV0"),
        ("2.2", "IV1"),
        ("2.3", "IV0"),
        ("2.3", "IV1"),
        ("2.4", "IV0"),
        ("2.4", "IV1"),
    ),
    *(("2.5", "IV0"), ("2.6", "IV0"), *(("2.7", f"IV{n}") for n in range(3))),
    *(
        ("2.8", "IV0"),
        ("2.8", "IV1"),
        ("3.0", "IV0"),
        ("3.0", "IV1"),
        ("3.1", "IV0"),
        ("3.2", "IV0"),
    ),
    *(("3.3", f"IV{n}") for n in range(4)),
    *(
        ("3.4", "IV0"),
        *(("3.5", f"IV{n}") for n in range(3)),
        *(("3.6", f"IV{n}") for n in range(3)),
    ),
    *(("3.7", f"IV{n}") for n in range(5)),
    *(("3.8", "IV0"), ("3.9", "IV0"), ("4.0", "IV0"), ("4.0", "IV1")),
)
_UNRELEASED = frozenset({"4.0"})
# What Kafka's MetadataVersion.fromVersionString knows: every "release-IVn", and each
# release alone (its latest internal version) once it is out.
_KNOWN_VERSIONS = frozenset(
    {f"{release}-{iv}" if iv else release for release, iv in _METADATA_VERSIONS}
    | {release for release, _ in _METADATA_VERSIONS if release not in _UNRELEASED}
)


def _format_version(name: str, raw: str) -> str:
    """message.format.version as Kafka 3.9 validates it (MetadataVersionValidator): any
    version it knows, a patch release ("2.8.2", "0.10.0.1") counting as its release.
    Ignored since Kafka 3.0 (always message format v2): only accepted and reported."""
    # Java's split, which drops trailing empty strings.
    segments = raw.split(".")
    while segments and segments[-1] == "":
        segments.pop()
    wanted = 3 if raw.startswith("0.") else 2
    key = raw if wanted >= len(segments) else ".".join(segments[:wanted])
    if key not in _KNOWN_VERSIONS:
        raise InvalidConfigError(f"topic config {name!r}: version {raw} is not a valid version")
    return raw


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return format_boolean(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("-" if value < 0 else "") + "Infinity"
    return str(INT64_MAX) if value is None else str(value)


@dataclass(frozen=True, slots=True)
class _Spec:
    field: str
    parse: Callable[[str, str], Any]
    kind: str  # Kafka's ConfigDef.Type: BOOLEAN, STRING, INT, LONG, DOUBLE or LIST
    render: Callable[[Any], str] = _render


# Lower bounds are Kafka's validators (LogConfig.java / TopicConfig).
_SPECS: dict[str, _Spec] = {
    "cleanup.policy": _Spec("cleanup_policy", _cleanup_policy, "LIST"),
    "compression.type": _Spec("compression_type", _compression_type, "STRING"),
    "delete.retention.ms": _Spec("delete_retention_ms", _long(0), "LONG"),
    "flush.messages": _Spec("flush_messages", _long_or_never(1), "LONG"),
    "flush.ms": _Spec("flush_ms", _long_or_never(0), "LONG"),
    "index.interval.bytes": _Spec("index_interval_bytes", _int(0), "INT"),
    "max.message.bytes": _Spec("max_message_bytes", _int(0), "INT"),
    "message.timestamp.type": _Spec("message_timestamp_type", _timestamp_type, "STRING"),
    "min.cleanable.dirty.ratio": _Spec("min_cleanable_dirty_ratio", _ratio, "DOUBLE"),
    "min.compaction.lag.ms": _Spec("min_compaction_lag_ms", _long(0), "LONG"),
    "min.insync.replicas": _Spec("min_insync_replicas", _int(1), "INT"),
    # No bound in Kafka: every negative value means no limit.
    "retention.bytes": _Spec("retention_bytes", _long(INT64_MIN), "LONG"),
    "retention.ms": _Spec("retention_ms", _long(-1), "LONG"),
    "segment.bytes": _Spec("segment_bytes", _int(14), "INT"),
    "segment.index.bytes": _Spec("segment_index_bytes", _int(4), "INT"),
    "segment.ms": _Spec("segment_ms", _long(1), "LONG"),
    "compression.gzip.level": _Spec("compression_gzip_level", _gzip_level, "INT"),
    "compression.lz4.level": _Spec("compression_lz4_level", _range(1, 17), "INT"),
    "compression.zstd.level": _Spec("compression_zstd_level", _range(-131072, 22), "INT"),
    "segment.jitter.ms": _Spec("segment_jitter_ms", _long(0), "LONG"),
    "max.compaction.lag.ms": _Spec("max_compaction_lag_ms", _long_or_never(1), "LONG"),
    "message.timestamp.before.max.ms": _Spec(
        "message_timestamp_before_max_ms", _long_or_never(0), "LONG"
    ),
    "message.timestamp.after.max.ms": _Spec(
        "message_timestamp_after_max_ms", _long_or_never(0), "LONG"
    ),
    "message.timestamp.difference.max.ms": _Spec(
        "message_timestamp_difference_max_ms", _long_or_never(0), "LONG"
    ),
    "file.delete.delay.ms": _Spec("file_delete_delay_ms", _long(0), "LONG"),
    "preallocate": _Spec("preallocate", _boolean, "BOOLEAN"),
    "unclean.leader.election.enable": _Spec("unclean_leader_election_enable", _boolean, "BOOLEAN"),
    "leader.replication.throttled.replicas": _Spec(
        "leader_replication_throttled_replicas", _throttled_replicas, "LIST"
    ),
    "follower.replication.throttled.replicas": _Spec(
        "follower_replication_throttled_replicas", _throttled_replicas, "LIST"
    ),
    "message.downconversion.enable": _Spec("message_downconversion_enable", _boolean, "BOOLEAN"),
    "message.format.version": _Spec("message_format_version", _format_version, "STRING"),
    "remote.storage.enable": _Spec("remote_storage_enable", _boolean, "BOOLEAN"),
    "local.retention.ms": _Spec("local_retention_ms", _long(-2), "LONG"),
    "local.retention.bytes": _Spec("local_retention_bytes", _long(-2), "LONG"),
    "remote.log.copy.disable": _Spec("remote_log_copy_disable", _boolean, "BOOLEAN"),
    "remote.log.delete.on.disable": _Spec("remote_log_delete_on_disable", _boolean, "BOOLEAN"),
    "errors.deadletterqueue.group.enable": _Spec(
        "errors_deadletterqueue_group_enable", _boolean, "BOOLEAN"
    ),
}

# Kafka's type of each topic config, as DescribeConfigs reports it (ConfigDef.Type).
TOPIC_CONFIG_TYPES: dict[str, str] = {name: spec.kind for name, spec in _SPECS.items()}

# Configs whose value is a comma-separated list: IncrementalAlterConfigs may
# append to them and subtract from them.
LIST_TOPIC_CONFIGS = frozenset(name for name, kind in TOPIC_CONFIG_TYPES.items() if kind == "LIST")

TOPIC_CONFIG_NAMES = tuple(_SPECS)
_KAFKA_DEFAULTS = LogConfig()


def altered_topic_configs(
    explicit: Mapping[str, str], changes: Mapping[str, str | None], *, replace: bool
) -> dict[str, str]:
    """A topic's explicit configs after a change: a value sets a config and None reverts
    it to the default (IncrementalAlterConfigs); with `replace` the changes are the
    whole new set (the legacy AlterConfigs). Unknown names raise ValueError."""
    result = {} if replace else dict(explicit)
    for key, value in changes.items():
        if value is None:
            LogConfig().config_source(key)  # refuses unknown names
            result.pop(key, None)
        else:
            result[key] = value
    return result

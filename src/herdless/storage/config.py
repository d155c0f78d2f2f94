"""Per-topic log configuration under Kafka's topic-config names, with Kafka's defaults."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from herdless.storage.errors import InvalidConfigError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

CLEANUP_POLICIES = frozenset({"delete", "compact"})
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


class ConfigSource(IntEnum):
    """The subset of DescribeConfigs' config_source values a topic config can have."""

    TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


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
    # Kafka names given explicitly for this topic; DescribeConfigs reports them as topic configs.
    overrides: frozenset[str] = frozenset()

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
        return dataclasses.replace(start, overrides=frozenset(configs), **changes)

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
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compacts(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"


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


def _ratio(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise InvalidConfigError(f"topic config {name!r}: {raw!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise InvalidConfigError(f"topic config {name!r}: {value} is outside [0, 1]")
    return value


def _cleanup_policy(name: str, raw: str) -> str:
    policies = [item.strip() for item in raw.split(",")]
    if not raw or any(p not in CLEANUP_POLICIES for p in policies):
        raise InvalidConfigError(
            f"topic config {name!r}: {raw!r} is not a list of {sorted(CLEANUP_POLICIES)}"
        )
    return ",".join(dict.fromkeys(policies))


def _timestamp_type(name: str, raw: str) -> str:
    if raw not in TIMESTAMP_TYPES:
        raise InvalidConfigError(f"topic config {name!r}: {raw!r} is not one of {TIMESTAMP_TYPES}")
    return raw


def _compression_type(name: str, raw: str) -> str:
    # Batches are stored exactly as producers compressed them (the broker never
    # recompresses), which is Kafka's "producer"; tools commonly set it explicitly.
    if raw != "producer":
        raise InvalidConfigError(
            f"topic config {name!r}: only 'producer' is supported (batches are stored as"
            f" producers compressed them); set the codec on the producer instead of {raw!r}"
        )
    return raw


def _render(value: Any) -> str:
    return str(INT64_MAX) if value is None else str(value)


@dataclass(frozen=True, slots=True)
class _Spec:
    field: str
    parse: Callable[[str, str], Any]
    render: Callable[[Any], str] = _render


# Lower bounds are Kafka's validators (LogConfig.java / TopicConfig).
_SPECS: dict[str, _Spec] = {
    "cleanup.policy": _Spec("cleanup_policy", _cleanup_policy),
    "compression.type": _Spec("compression_type", _compression_type),
    "delete.retention.ms": _Spec("delete_retention_ms", _long(0)),
    "flush.messages": _Spec("flush_messages", _long_or_never(1)),
    "flush.ms": _Spec("flush_ms", _long_or_never(0)),
    "index.interval.bytes": _Spec("index_interval_bytes", _int(0)),
    "max.message.bytes": _Spec("max_message_bytes", _int(0)),
    "message.timestamp.type": _Spec("message_timestamp_type", _timestamp_type),
    "min.cleanable.dirty.ratio": _Spec("min_cleanable_dirty_ratio", _ratio),
    "min.compaction.lag.ms": _Spec("min_compaction_lag_ms", _long(0)),
    "min.insync.replicas": _Spec("min_insync_replicas", _int(1)),
    "retention.bytes": _Spec("retention_bytes", _long(-1)),
    "retention.ms": _Spec("retention_ms", _long(-1)),
    "segment.bytes": _Spec("segment_bytes", _int(14)),
    "segment.index.bytes": _Spec("segment_index_bytes", _int(4)),
    "segment.ms": _Spec("segment_ms", _long(1)),
}

TOPIC_CONFIG_NAMES = tuple(_SPECS)
_KAFKA_DEFAULTS = LogConfig()

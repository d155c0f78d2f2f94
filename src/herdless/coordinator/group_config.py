"""Per-group configs (KIP-848, as Kafka 4.3 has them): a consumer group's own session
timeout, heartbeat interval, assignment interval and assignor offload (KIP-1263),
and a share group's (KIP-932, as Kafka 4.2 has them) session timeout and heartbeat
interval, which the coordinator reads, and the record lock duration, delivery count
limit, in-flight record cap, where a new share partition starts (share.auto.offset.reset)
and the isolation level, which the share partitions read, each overriding the broker's;
and a share group's dead-letter topic (KIP-1191, coordinator/dead_letter_config.py).

Set with IncrementalAlterConfigs on resource type GROUP and kept where the
broker keeps topic configs; the coordinator reads them at every heartbeat, so
a change reaches each member at its next one: the interval in the answer, the
session timer restarted with the new timeout. The coordinator never looks them
up: the broker holds them here, in memory, as data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from herdless.coordinator.dead_letter_config import (
    DEAD_LETTER_COPY_RECORD_ENABLE,
    DEAD_LETTER_TOPIC_NAME,
    DEFAULT_DEAD_LETTER_TOPIC_PREFIX,
    InvalidDeadLetterTopic,
    check_dead_letter_topic,
)
from herdless.protocol.config_values import InvalidConfigValue, format_boolean, parse_boolean

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
CONSUMER_ASSIGNMENT_INTERVAL_MS = "consumer.assignment.interval.ms"
CONSUMER_ASSIGNOR_OFFLOAD_ENABLE = "consumer.assignor.offload.enable"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
SHARE_PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
GROUP_CONFIG_NAMES = (
    CONSUMER_ASSIGNMENT_INTERVAL_MS,
    CONSUMER_ASSIGNOR_OFFLOAD_ENABLE,
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_DELIVERY_COUNT_LIMIT,
    SHARE_HEARTBEAT_INTERVAL_MS,
    SHARE_ISOLATION_LEVEL,
    SHARE_PARTITION_MAX_RECORD_LOCKS,
    SHARE_RECORD_LOCK_DURATION_MS,
    SHARE_SESSION_TIMEOUT_MS,
    DEAD_LETTER_COPY_RECORD_ENABLE,
    DEAD_LETTER_TOPIC_NAME,
)
_BOOLEAN_CONFIGS = (CONSUMER_ASSIGNOR_OFFLOAD_ENABLE, DEAD_LETTER_COPY_RECORD_ENABLE)
_STRING_CONFIGS = (SHARE_AUTO_OFFSET_RESET, SHARE_ISOLATION_LEVEL, DEAD_LETTER_TOPIC_NAME)
# Each config's type as DescribeConfigs names it (Kafka's ConfigDef types).
GROUP_CONFIG_TYPES = {
    name: "BOOLEAN" if name in _BOOLEAN_CONFIGS else "STRING" if name in _STRING_CONFIGS else "INT"
    for name in GROUP_CONFIG_NAMES
}
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
# share.auto.offset.reset's by_duration:<ISO 8601 duration, PnDTnHnMn.nS>, as Java's
# Duration.parse reads it; a negative one is refused.
_BY_DURATION = "by_duration:"
_ISO_DURATION = re.compile(
    r"[-+]?P(?:[-+]?\d+D)?(?:T(?:[-+]?\d+H)?(?:[-+]?\d+M)?(?:[-+]?\d+(?:[.,]\d{0,9})?S)?)?",
    re.IGNORECASE,
)


class InvalidGroupConfig(ValueError):
    """Kafka's INVALID_CONFIG, in Kafka's words."""


@dataclass(frozen=True, slots=True)
class GroupConfigLimits:
    """The broker's defaults and bounds (group.consumer.*, group.share.*) a group's configs
    live within."""

    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    assignment_interval_ms: int = 1_000
    min_assignment_interval_ms: int = 0
    max_assignment_interval_ms: int = 15_000
    assignor_offload_enable: bool = True
    share_session_timeout_ms: int = 45_000
    min_share_session_timeout_ms: int = 45_000
    max_share_session_timeout_ms: int = 60_000
    share_heartbeat_interval_ms: int = 5_000
    min_share_heartbeat_interval_ms: int = 5_000
    max_share_heartbeat_interval_ms: int = 15_000
    share_record_lock_duration_ms: int = 30_000
    min_share_record_lock_duration_ms: int = 15_000
    max_share_record_lock_duration_ms: int = 60_000
    share_delivery_count_limit: int = 5
    min_share_delivery_count_limit: int = 2
    max_share_delivery_count_limit: int = 10
    share_partition_max_record_locks: int = 2_000
    min_share_partition_max_record_locks: int = 100
    max_share_partition_max_record_locks: int = 10_000
    # errors.deadletterqueue.topic.name.prefix: what a dead-letter topic's name starts with.
    dead_letter_topic_prefix: str = DEFAULT_DEAD_LETTER_TOPIC_PREFIX

    def defaults(self) -> dict[str, str]:
        return {
            CONSUMER_ASSIGNMENT_INTERVAL_MS: str(self.assignment_interval_ms),
            CONSUMER_ASSIGNOR_OFFLOAD_ENABLE: format_boolean(self.assignor_offload_enable),
            CONSUMER_HEARTBEAT_INTERVAL_MS: str(self.heartbeat_interval_ms),
            CONSUMER_SESSION_TIMEOUT_MS: str(self.session_timeout_ms),
            SHARE_AUTO_OFFSET_RESET: "latest",
            SHARE_DELIVERY_COUNT_LIMIT: str(self.share_delivery_count_limit),
            SHARE_HEARTBEAT_INTERVAL_MS: str(self.share_heartbeat_interval_ms),
            SHARE_ISOLATION_LEVEL: "read_uncommitted",
            SHARE_PARTITION_MAX_RECORD_LOCKS: str(self.share_partition_max_record_locks),
            SHARE_RECORD_LOCK_DURATION_MS: str(self.share_record_lock_duration_ms),
            SHARE_SESSION_TIMEOUT_MS: str(self.share_session_timeout_ms),
            DEAD_LETTER_COPY_RECORD_ENABLE: "false",
            DEAD_LETTER_TOPIC_NAME: "",
        }

    def validate(self, explicit: Mapping[str, str]) -> dict[str, int]:
        """The group's effective values with `explicit` set; InvalidGroupConfig if a name is
        unknown or a value is not an integer within the broker's bounds (Kafka's checks)."""
        for name in explicit:
            if name not in GROUP_CONFIG_NAMES:
                raise InvalidGroupConfig(f"Unknown group config name: {name}")
        values = {}
        for name, default in self.defaults().items():
            text = explicit.get(name, default)
            if name == DEAD_LETTER_TOPIC_NAME:
                try:
                    check_dead_letter_topic(text, self.dead_letter_topic_prefix)
                except InvalidDeadLetterTopic as exc:
                    raise InvalidGroupConfig(str(exc)) from None
                continue
            if name in _BOOLEAN_CONFIGS:
                try:
                    parse_boolean(name, text)
                except InvalidConfigValue as exc:
                    raise InvalidGroupConfig(str(exc)) from None
                continue
            if name in _STRING_CONFIGS:
                _check_string(name, text)
                continue
            try:
                values[name] = int(text)
            except ValueError:
                raise InvalidGroupConfig(
                    f"Invalid value {text} for configuration {name}: Not a number of type INT"
                ) from None
        bounds = (
            (CONSUMER_HEARTBEAT_INTERVAL_MS, "group.consumer.{}.heartbeat.interval.ms",
             self.min_heartbeat_interval_ms, self.max_heartbeat_interval_ms),
            (CONSUMER_SESSION_TIMEOUT_MS, "group.consumer.{}.session.timeout.ms",
             self.min_session_timeout_ms, self.max_session_timeout_ms),
            (CONSUMER_ASSIGNMENT_INTERVAL_MS, "group.consumer.{}.assignment.interval.ms",
             self.min_assignment_interval_ms, self.max_assignment_interval_ms),
            (SHARE_HEARTBEAT_INTERVAL_MS, "group.share.{}.heartbeat.interval.ms",
             self.min_share_heartbeat_interval_ms, self.max_share_heartbeat_interval_ms),
            (SHARE_SESSION_TIMEOUT_MS, "group.share.{}.session.timeout.ms",
             self.min_share_session_timeout_ms, self.max_share_session_timeout_ms),
            (SHARE_RECORD_LOCK_DURATION_MS, "group.share.{}.record.lock.duration.ms",
             self.min_share_record_lock_duration_ms, self.max_share_record_lock_duration_ms),
            (SHARE_DELIVERY_COUNT_LIMIT, "group.share.{}.delivery.count.limit",
             self.min_share_delivery_count_limit, self.max_share_delivery_count_limit),
            (SHARE_PARTITION_MAX_RECORD_LOCKS, "group.share.{}.partition.max.record.locks",
             self.min_share_partition_max_record_locks,
             self.max_share_partition_max_record_locks),
        )  # fmt: skip
        for name, broker_name, low, high in bounds:
            if values[name] < low:
                raise InvalidGroupConfig(
                    f"{name} must be greater than or equal to {broker_name.format('min')}"
                )
            if values[name] > high:
                raise InvalidGroupConfig(
                    f"{name} must be less than or equal to {broker_name.format('max')}"
                )
        for session, heartbeat in (
            (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
            (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
        ):
            if values[session] <= values[heartbeat]:
                raise InvalidGroupConfig(f"{session} must be greater than {heartbeat}")
        return values


def _check_string(name: str, text: str) -> None:
    """Kafka's validators of share.auto.offset.reset and share.isolation.level."""
    if name == SHARE_ISOLATION_LEVEL:
        if text not in ISOLATION_LEVELS:
            raise InvalidGroupConfig(
                f"Invalid value {text} for configuration {name}: String must be one of:"
                f" {', '.join(ISOLATION_LEVELS)}"
            )
        return
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        return
    if lowered.startswith(_BY_DURATION):
        duration = text[len(_BY_DURATION) :]
        negative = "-" in duration
        if (
            _ISO_DURATION.fullmatch(duration)
            and any(c.isdigit() for c in duration)
            and not negative
        ):
            return
    raise InvalidGroupConfig(
        f"Invalid value {text} for configuration {name}: the value must be either 'earliest',"
        " 'latest', or of the format 'by_duration:<PnDTnHnMn.nS.>'."
    )


class GroupConfigs:
    """Every group's explicit configs, as the broker last knew them (validated before)."""

    def __init__(self) -> None:
        self._explicit: dict[str, dict[str, str]] = {}

    def explicit(self, group_id: str) -> dict[str, str]:
        return dict(self._explicit.get(group_id, {}))

    def put(self, group_id: str, explicit: Mapping[str, str]) -> None:
        """The group's explicit configs are now `explicit` (none: the broker's defaults)."""
        if explicit:
            self._explicit[group_id] = dict(explicit)
        else:
            self._explicit.pop(group_id, None)

    def replace_all(self, by_group: Mapping[str, Mapping[str, str]]) -> None:
        self._explicit = {g: dict(c) for g, c in by_group.items() if c}

    def all(self) -> dict[str, dict[str, str]]:
        return {g: dict(c) for g, c in self._explicit.items()}

    def override(self, group_id: str, name: str) -> int | None:
        """The group's own value of `name`, or None for the broker's."""
        text = self._explicit.get(group_id, {}).get(name)
        return int(text) if text is not None and text.isdigit() else None

    def flag(self, group_id: str, name: str) -> bool | None:
        """The group's own value of the boolean `name`, or None for the broker's."""
        text = self._explicit.get(group_id, {}).get(name)
        if text is None:
            return None
        try:
            return parse_boolean(name, text)
        except InvalidConfigValue:
            # Read from the store, which another writer may have filled: an unreadable
            # value leaves the broker's, as override() does for a number.
            return None


def altered(current: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    """`current` with `changes` applied: a value sets, None goes back to the default."""
    explicit = dict(current)
    for name, value in changes.items():
        if value is None:
            explicit.pop(name, None)
        else:
            explicit[name] = value
    return explicit

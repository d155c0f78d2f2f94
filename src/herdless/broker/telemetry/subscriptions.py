"""Client-metrics subscriptions as Kafka configures them (KIP-714's CLIENT_METRICS
config resource, Kafka's ClientMetricsConfigs), and which of them a client matches.

A subscription is a named config of three settings: `metrics`, the metric-name prefixes
to push ("*" for all); `interval.ms`, how often; `match`, selectors of the clients it is
for (`client_id=app.*`), each a Java regular expression the attribute must match whole.
A client matching several subscriptions pushes the union of their metrics at the
shortest of their intervals; one matching none pushes nothing, as in Kafka.

Pure: no clock, no I/O; the subscription id is a function of what is subscribed.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import crc32c

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
CONFIG_NAMES = (INTERVAL_MS, MATCH, METRICS)
# DescribeConfigs' config types (LIST, INT) of each.
CONFIG_TYPES = {METRICS: "LIST", INTERVAL_MS: "INT", MATCH: "LIST"}

# The client attributes a `match` selector may name (Kafka's ALLOWED_MATCH_PARAMS).
CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"
MATCH_ATTRIBUTES = frozenset(
    {
        CLIENT_INSTANCE_ID,
        CLIENT_ID,
        CLIENT_SOFTWARE_NAME,
        CLIENT_SOFTWARE_VERSION,
        CLIENT_SOURCE_ADDRESS,
        CLIENT_SOURCE_PORT,
    }
)

ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 60 * 60 * 1000
DEFAULTS = {METRICS: "", INTERVAL_MS: str(DEFAULT_INTERVAL_MS), MATCH: ""}


class InvalidSubscription(ValueError):
    """A subscription Kafka refuses; `config` is True for a value the config itself
    cannot hold (INVALID_CONFIG), False for a request that is wrong (INVALID_REQUEST)."""

    def __init__(self, message: str, *, config: bool = False) -> None:
        super().__init__(message)
        self.config = config


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: frozenset[str]
    interval_ms: int
    # Attribute -> the pattern its value must match whole; empty matches every client.
    match: Mapping[str, re.Pattern[str]] = field(default_factory=dict)

    def matches(self, client: Mapping[str, str | None]) -> bool:
        for attribute, pattern in self.match.items():
            value = client.get(attribute)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def _list(value: str | None) -> list[str]:
    """A LIST config as Kafka's ConfigDef parses one: comma-separated, trimmed."""
    if not value or not value.strip():
        return []
    return [item.strip() for item in value.split(",")]


def parse_match(selectors: Iterable[str]) -> dict[str, re.Pattern[str]]:
    """`name=regex` selectors by attribute; InvalidSubscription(config) for one Kafka
    calls an illegal client matching pattern."""
    patterns: dict[str, re.Pattern[str]] = {}
    for selector in selectors:
        parts = selector.split("=")
        name = parts[0].strip()
        if len(parts) != 2 or name not in MATCH_ATTRIBUTES:
            raise InvalidSubscription(
                f"Illegal client matching pattern: {selector} (name=regex, name one of"
                f" {', '.join(sorted(MATCH_ATTRIBUTES))})",
                config=True,
            )
        try:
            patterns[name] = re.compile(parts[1].strip())
        except re.error as exc:
            raise InvalidSubscription(
                f"Illegal client matching pattern: {selector} ({exc})", config=True
            ) from None
    return patterns


def subscription(name: str, config: Mapping[str, str]) -> Subscription:
    """The subscription a config describes, checked as Kafka checks it."""
    if not name:
        raise InvalidSubscription("Subscription name can't be empty")
    for key in config:
        if key not in CONFIG_NAMES:
            raise InvalidSubscription(f"Unknown client metrics configuration: {key}")
    interval_ms = DEFAULT_INTERVAL_MS
    if INTERVAL_MS in config:
        try:
            interval_ms = int(config[INTERVAL_MS].strip())
        except ValueError:
            raise InvalidSubscription(
                f"Invalid value {config[INTERVAL_MS]} for {INTERVAL_MS}: not an integer",
                config=True,
            ) from None
        if not MIN_INTERVAL_MS <= interval_ms <= MAX_INTERVAL_MS:
            raise InvalidSubscription(
                f"Invalid value {interval_ms} for {INTERVAL_MS}, interval must be between"
                f" {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)"
            )
    return Subscription(
        name,
        frozenset(_list(config.get(METRICS))),
        interval_ms,
        parse_match(_list(config.get(MATCH))),
    )


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a client instance is subscribed to."""

    subscription_id: int
    # Prefixes, sorted; ("*",) for all; () for none.
    metrics: tuple[str, ...]
    interval_ms: int


def resolve(
    subscriptions: Iterable[Subscription], client: Mapping[str, str | None], instance: uuid.UUID
) -> Resolved:
    """The union of the matching subscriptions' metrics at the shortest of their
    intervals (Kafka's default, 5 minutes, when none matches). Kafka takes the shortest
    of the default and theirs, so a subscription asking for an hour gets 5 minutes; here
    it gets the hour it asked for."""
    metrics: set[str] = set()
    intervals = []
    for found in subscriptions:
        if found.matches(client):
            metrics |= found.metrics
            intervals.append(found.interval_ms)
    interval_ms = min(intervals, default=DEFAULT_INTERVAL_MS)
    chosen = (ALL_METRICS,) if ALL_METRICS in metrics else tuple(sorted(metrics))
    return Resolved(subscription_id(chosen, interval_ms, instance), chosen, interval_ms)


def subscription_id(metrics: Iterable[str], interval_ms: int, instance: uuid.UUID) -> int:
    """Kafka's computeSubscriptionId: a CRC32C of the metrics and the interval, XORed with
    the instance id's hash, so two instances with the same subscriptions get different
    ids and any change of either gives a new one. (Kafka hashes a HashSet's text, whose
    order is the set's; the metrics are sorted here, so the id is the same on every
    broker.)"""
    text = "[" + ", ".join(metrics) + "]" + str(interval_ms)
    crc = crc32c.crc32c(text.encode())
    return _int32(crc ^ _uuid_hash(instance))


def _uuid_hash(value: uuid.UUID) -> int:
    """Java's Uuid.hashCode: the two 64-bit halves XORed, then its two 32-bit halves."""
    both = (value.int >> 64) ^ (value.int & (1 << 64) - 1)
    return ((both >> 32) ^ both) & 0xFFFFFFFF


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value

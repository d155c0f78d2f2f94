"""Client-metrics subscriptions (KIP-714) as config resources: DescribeConfigs and
IncrementalAlterConfigs of resource type CLIENT_METRICS (16), each checked as Kafka
checks it (telemetry/subscriptions.py). Like Kafka, both config APIs need the cluster's
DESCRIBE_CONFIGS / ALTER_CONFIGS (configs.py checks). ListConfigResources lists them
(config_resources.py).

A subscription is its config: setting one creates it, deleting its last setting
removes it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from herdless.broker.telemetry import subscriptions as subs
from herdless.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

RESOURCE_CLIENT_METRICS = 16
# DescribeConfigs' config_source of a subscription's setting (Kafka's
# ConfigSource.CLIENT_METRICS_CONFIG), and of one left at its default.
CLIENT_METRICS_CONFIG_SOURCE = 7
DEFAULT_CONFIG_SOURCE = 5

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_LISTS = frozenset(k for k, t in subs.CONFIG_TYPES.items() if t == "LIST")


@dataclass(frozen=True, slots=True)
class ClientMetricsConfigEntry:
    name: str
    value: str
    source: int
    config_type: str


class ClientMetricsConfigError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def _check_name(name: str) -> None:
    if not name:
        raise ClientMetricsConfigError(
            ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"
        )
    if "/" in name or name in (".", ".."):
        # ZooKeeper names the subscription's znode after it.
        raise ClientMetricsConfigError(
            ErrorCode.INVALID_REQUEST, f"Subscription name {name!r} cannot name a config"
        )


def describe_client_metrics_configs(
    context: BrokerContext, name: str, keys: Sequence[str] | None
) -> list[ClientMetricsConfigEntry]:
    """Every setting of the subscription, its own or the default; a subscription never
    set has only defaults, as in Kafka."""
    _check_name(name)
    manager = context.client_metrics
    explicit = (manager.config(name) if manager is not None else None) or {}
    return [
        ClientMetricsConfigEntry(
            key,
            explicit.get(key, default),
            CLIENT_METRICS_CONFIG_SOURCE if key in explicit else DEFAULT_CONFIG_SOURCE,
            subs.CONFIG_TYPES[key],
        )
        for key, default in sorted(subs.DEFAULTS.items())
        if keys is None or key in keys
    ]


def _changed(current: dict[str, str], configs: Sequence[Any]) -> dict[str, str]:
    """The subscription's config after IncrementalAlterConfigs' operations."""
    config = dict(current)
    seen: set[str] = set()
    for c in configs:
        if c.name in seen:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST, f"config {c.name!r} appears more than once"
            )
        seen.add(c.name)
        if c.name not in subs.CONFIG_NAMES:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {c.name}"
            )
        if c.config_operation == OP_SET:
            if c.value is None:
                raise ClientMetricsConfigError(
                    ErrorCode.INVALID_REQUEST, f"config {c.name!r} is set to null"
                )
            config[c.name] = c.value
        elif c.config_operation == OP_DELETE:
            config.pop(c.name, None)
        elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
            if c.name not in _LISTS:
                raise ClientMetricsConfigError(
                    ErrorCode.INVALID_CONFIG,
                    f"config {c.name!r} is not a list: append and subtract are only for lists",
                )
            items = [i.strip() for i in config.get(c.name, "").split(",") if i.strip()]
            given = [i.strip() for i in (c.value or "").split(",") if i.strip()]
            if c.config_operation == OP_APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            config[c.name] = ",".join(items)
        else:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST, f"unknown config operation {c.config_operation}"
            )
    return config


def _checked(name: str, config: dict[str, str]) -> dict[str, str]:
    try:
        subs.subscription(name, config)
    except subs.InvalidSubscription as exc:
        code = ErrorCode.INVALID_CONFIG if exc.config else ErrorCode.INVALID_REQUEST
        raise ClientMetricsConfigError(code, str(exc)) from None
    return config


async def alter_client_metrics_configs(
    context: BrokerContext, name: str, configs: Sequence[Any], validate_only: bool
) -> None:
    """IncrementalAlterConfigs' operations on the subscription; ClientMetricsConfigError
    if refused (then nothing changes)."""
    _check_name(name)
    manager, store = context.client_metrics, context.client_metrics_store
    if manager is None or store is None:
        raise ClientMetricsConfigError(
            ErrorCode.INVALID_REQUEST, "this broker keeps no client metrics subscriptions"
        )
    if validate_only:
        _checked(name, _changed(manager.config(name) or {}, configs))
        return
    await store.alter(name, lambda current: _checked(name, _changed(current, configs)))
    log.info("client metrics subscription %s changed: %s", name, manager.config(name) or "removed")

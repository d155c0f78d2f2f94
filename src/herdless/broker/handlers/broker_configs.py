"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs of BROKER resources (this
broker's id, or "" for the cluster-wide defaults) and BROKER_LOGGER resources (this
broker's id), as Kafka's ConfigHelper, ConfigAdminManager and ZkAdminManager answer
them: which configs may change and at which level is dynamic_config/rules.py; where they
are stored, dynamic_config/store.py.

As in Kafka with ZooKeeper, a broker answers for itself alone: a resource naming
another broker's id is refused (clients send it to that broker).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from herdless.broker.broker_properties import property_kind, topic_config_of
from herdless.broker.config import BrokerConfig, ConfigError, broker_property_values
from herdless.broker.dynamic_config import loggers
from herdless.broker.dynamic_config.rules import (
    PASSWORD_ENCODER_SECRET,
    STATIC_PASSWORD_CONFIGS,
    DynamicConfigError,
    check_change,
    incremental_layer,
    is_dynamic,
    is_sensitive,
    synonyms,
)
from herdless.cluster.errors import ClusterUnavailable, StateVersionConflict
from herdless.protocol.errors import ErrorCode
from herdless.security.settings import is_security_setting
from herdless.storage import ConfigSource, StorageError
from herdless.storage.config import TOPIC_CONFIG_TYPES

if TYPE_CHECKING:
    from herdless.broker.dynamic_config.layers import DynamicBrokerConfig
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

# An operation of IncrementalAlterConfigs: (name, operation, value).
Operation = tuple[str, int, str | None]
Synonym = tuple[str, str | None, ConfigSource]

_KIND_TYPES = {int: "INT", bool: "BOOLEAN", str: "STRING"}
# Defaults of what herdless reads, to tell a value set from Kafka's default.
_DEFAULTS = broker_property_values(BrokerConfig())


@dataclass(frozen=True, slots=True)
class BrokerConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    synonyms: tuple[Synonym, ...]
    # DescribeConfigs' type name (INT, BOOLEAN, STRING, LIST, PASSWORD, ...).
    config_type: str


def _dynamic(context: BrokerContext) -> DynamicBrokerConfig:
    if context.dynamic_config is None:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "this broker keeps no dynamic configs")
    return context.dynamic_config


def _this_broker(context: BrokerContext, name: str) -> None:
    """Kafka's validateResourceNameIsCurrentNodeId."""
    try:
        broker = int(name)
    except ValueError:
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
        ) from None
    if broker != context.node_id:
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {context.node_id}, but received {name}",
        )


# -- BROKER ------------------------------------------------------------------------------


def describe_broker_configs(
    context: BrokerContext, name: str, keys: Sequence[str] | None, include_synonyms: bool
) -> list[BrokerConfigEntry]:
    """This broker's configs in force (its id), or the cluster-wide dynamic defaults
    alone (""), as Kafka's ConfigHelper describes them."""
    dynamic = _dynamic(context)
    per_broker = name != ""
    if per_broker:
        _this_broker(context, name)
        values = _values_in_force(context, dynamic.current)
    else:
        values = dict(dynamic.defaults)
    entries = []
    for key in sorted(values):
        if keys is not None and key not in keys:
            continue
        found = _synonyms(dynamic, key, per_broker)
        source = _source(key, values[key], found)
        sensitive = _sensitive(key)
        entries.append(
            BrokerConfigEntry(
                key,
                None if sensitive else values[key],
                source,
                not is_dynamic(key),
                sensitive,
                tuple(found) if include_synonyms else (),
                _config_type(key),
            )
        )
    return entries


def _source(key: str, value: str | None, found: Sequence[Synonym]) -> ConfigSource:
    """The level a config's value comes from: the most specific that sets it; for the
    finest unit of a duration (log.retention.ms), the one that sets any unit, which it
    is derived from; a value no level sets came from a command-line option."""
    set_at = [(name, source) for name, _, source in found if source != ConfigSource.DEFAULT_CONFIG]
    own = [source for name, source in set_at if name == key]
    if own:
        return own[0]
    if set_at and synonyms(key)[0] == key:
        return set_at[0][1]
    if value is not None and value != _DEFAULTS.get(key):
        return ConfigSource.STATIC_BROKER_CONFIG
    return ConfigSource.DEFAULT_CONFIG


def topic_default_source(context: BrokerContext, topic_config: str) -> ConfigSource | None:
    """The level of a dynamic broker config a topic's default comes from (Kafka reports
    a topic's retention.ms from a dynamic log.retention.hours as DYNAMIC_DEFAULT_BROKER_
    CONFIG); None when no dynamic config sets it."""
    dynamic = context.dynamic_config
    if dynamic is None:
        return None
    levels = (
        (dynamic.own, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (dynamic.defaults, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    )
    for level, source in levels:
        if any(topic_config_of(name) == topic_config for name in level):
            return source
    return None


def _values_in_force(context: BrokerContext, config: BrokerConfig) -> dict[str, str | None]:
    bound = context.bound_ports
    values = broker_property_values(config)
    values.update(config.security.raw)
    # The ports bound, for listeners given port 0.
    listeners = [
        replace(e, port=bound.get(e.listener, e.port)) for e in config.listener_endpoints()
    ]
    values.update(
        {
            "listeners": ",".join(str(e) for e in listeners),
            "advertised.listeners": ",".join(str(e) for e in config.advertised_endpoints(bound)),
            "log.dirs": str(config.data_dir),
        }
    )
    return values


def _synonyms(dynamic: DynamicBrokerConfig, key: str, per_broker: bool) -> list[Synonym]:
    """Kafka's synonyms of a config in precedence order: each name's value at each level
    that sets it, the most specific first."""
    levels: list[tuple[Mapping[str, str], ConfigSource]] = [
        (dynamic.defaults, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (dynamic.static.properties, ConfigSource.STATIC_BROKER_CONFIG),
    ]
    if per_broker:
        levels.insert(0, (dynamic.own, ConfigSource.DYNAMIC_BROKER_CONFIG))
    found: list[Synonym] = []
    for name in synonyms(key):
        for level, source in levels:
            if name in level:
                found.append((name, None if _sensitive(name) else level[name], source))
        default = _DEFAULTS.get(name)
        if default is not None and name in _DEFAULTS:
            found.append((name, default, ConfigSource.DEFAULT_CONFIG))
    return found


def _sensitive(name: str) -> bool:
    return (
        is_sensitive(name)
        or name in STATIC_PASSWORD_CONFIGS
        or name.endswith("sasl.jaas.config")
        or "secret" in name
    )


def _config_type(key: str) -> str:
    if _sensitive(key):
        return "PASSWORD"
    topic_config = topic_config_of(key)
    if topic_config is not None:
        return TOPIC_CONFIG_TYPES.get(topic_config, "STRING")
    kind = property_kind(key)
    return _KIND_TYPES.get(kind, "STRING") if kind is not None else "STRING"


def _known(name: str) -> bool:
    return name in _DEFAULTS or is_security_setting(name) or name in ("log.dirs", "log.dir")


async def alter_broker_configs(
    context: BrokerContext,
    name: str,
    operations: Sequence[Operation],
    *,
    replace: bool,
    validate_only: bool,
) -> None:
    """IncrementalAlterConfigs' operations on this broker's own configs (its id) or the
    cluster-wide defaults (""); with `replace`, the legacy AlterConfigs: the configs
    given (all SET) become the level's whole set. DynamicConfigError if refused."""
    dynamic = _dynamic(context)
    store = context.broker_config_store
    if store is None:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "this broker keeps no dynamic configs")
    per_broker = name != ""
    if per_broker:
        _this_broker(context, name)
    endpoints = context.config.listener_endpoints()
    tls_listeners = {e.listener.lower() for e in endpoints if e.security_protocol.uses_tls}
    in_force = broker_property_values(dynamic.current)
    secret = dynamic.static.security.get(PASSWORD_ENCODER_SECRET)

    def change(stored: dict[str, str]) -> dict[str, str]:
        if replace:
            layer, changed = _replaced(stored, operations)
        else:
            layer, changed = incremental_layer(stored, list(operations), in_force)
        check_change(changed, per_broker, tls_listeners, _known)
        passwords = sorted(n for n in changed if n in layer and is_sensitive(n))
        if passwords and secret is None:
            raise DynamicConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Password encoder secret not configured: {', '.join(passwords)} cannot be"
                f" stored; set {PASSWORD_ENCODER_SECRET} on every broker",
            )
        try:
            dynamic.check(per_broker, layer)
        except ConfigError as exc:
            raise DynamicConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'):"
                f" {exc}",
            ) from None
        return layer

    if validate_only:
        change(dynamic.layer(per_broker))
        return
    try:
        await store.alter(per_broker, change)
    except (ClusterUnavailable, StateVersionConflict, StorageError, OSError) as exc:
        raise DynamicConfigError(ErrorCode.UNKNOWN_SERVER_ERROR, f"not stored: {exc}") from None
    level = f"broker {name}" if per_broker else "the cluster-wide defaults"
    log.info("dynamic configs of %s changed: %s", level, sorted(n for n, _, _ in operations))


def _replaced(
    stored: Mapping[str, str], operations: Sequence[Operation]
) -> tuple[dict[str, str], set[str]]:
    nulls = [name for name, _, value in operations if value is None]
    if nulls:
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
        )
    names = [name for name, _, _ in operations]
    if len(set(names)) != len(names):
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    layer = {name: value for name, _, value in operations if value is not None}
    changed = {n for n in stored.keys() | layer.keys() if stored.get(n) != layer.get(n)}
    return layer, changed | set(layer)


# -- BROKER_LOGGER -----------------------------------------------------------------------


def describe_broker_loggers(
    context: BrokerContext, name: str, keys: Sequence[str] | None
) -> list[BrokerConfigEntry]:
    """Every logger with the level it logs at (Kafka's Log4jController.loggers)."""
    if not name:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    _this_broker(context, name)
    return [
        BrokerConfigEntry(
            logger, level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False, False, (), "STRING"
        )
        for logger, level in loggers.loggers().items()
        if keys is None or logger in keys
    ]


def alter_broker_loggers(
    context: BrokerContext, name: str, operations: Sequence[Operation], validate_only: bool
) -> None:
    """Set or unset log levels at once (RuntimeLoggerManager); DynamicConfigError if
    refused, with nothing changed."""
    _this_broker(context, name)
    names = [logger for logger, _, _ in operations]
    if len(set(names)) != len(names):
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    loggers.check_operations(list(operations))
    if not validate_only:
        loggers.apply_operations(list(operations))

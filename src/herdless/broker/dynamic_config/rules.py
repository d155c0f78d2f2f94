"""Which broker configs change without a restart, at which level, and how a change is
refused: Kafka's DynamicBrokerConfig and DynamicConfig.Broker rules, for the settings
herdless serves. Pure: names and values in, a verdict out.

Two levels, as Kafka keeps them: a broker's own (`/config/brokers/<id>`) over the
cluster-wide default (`/config/brokers/<default>`) over the static file over Kafka's
default. Of what herdless reads, Kafka makes dynamic:

- the broker-wide topic defaults (DynamicLogConfig: log.retention.*, log.segment.bytes,
  log.cleanup.policy, message.max.bytes, compression.type, min.insync.replicas, ...),
  at both levels;
- the replication throttles (leader/follower.replication.throttled.rate), at both;
- producer.id.expiration.ms and transaction.partition.verification.enable (KIP-890),
  at both;
- a TLS listener's keystore and truststore, by the listener prefix alone
  (`listener.name.<listener>.ssl.keystore.location`), per broker alone, since each
  broker has its own certificate.

Everything else is read-only, refused with Kafka's INVALID_REQUEST and message. (Kafka
also changes listeners, thread pools and connection limits at runtime: herdless sets its
listeners at start and has no thread pools or connection limits.)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping

from herdless.broker.broker_properties import TOPIC_DEFAULT_PROPERTIES, duration_synonyms
from herdless.protocol.errors import ErrorCode

# Kafka's ZooKeeperInternals.DEFAULT_STRING: the cluster-wide default's entity name.
DEFAULT_ENTITY = "<default>"

THROTTLE_CONFIGS = frozenset(
    {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}
)
# Kafka's DynamicProducerStateManagerConfig: the logs' producer expiration, and what
# request handlers read per request.
PRODUCER_EXPIRATION = "producer.id.expiration.ms"
REQUEST_CONFIGS = frozenset({"transaction.partition.verification.enable"})
# Not dynamic in Kafka though a topic config has it: the record format follows the
# inter-broker protocol.
_STATIC_LOG_CONFIGS = frozenset({"log.message.format.version"})
LOG_CONFIGS = TOPIC_DEFAULT_PROPERTIES - _STATIC_LOG_CONFIGS

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: what a listener's TLS may change at runtime.
SSL_RECONFIGURABLE = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
    }
)
# Of those, Kafka's PASSWORD configs: described as null, stored encrypted.
PASSWORD_CONFIGS = frozenset(
    {
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
    }
)
PASSWORD_ENCODER_SECRET = "password.encoder.secret"
# Kafka's PASSWORD configs that are only read at start: described as null too.
STATIC_PASSWORD_CONFIGS = frozenset(
    {
        PASSWORD_ENCODER_SECRET,
        "password.encoder.old.secret",
        "delegation.token.secret.key",
        "delegation.token.master.key",
    }
)
# Lists, which IncrementalAlterConfigs may append to and subtract from.
LIST_CONFIGS = frozenset({"log.cleanup.policy"})

_DYNAMIC = LOG_CONFIGS | THROTTLE_CONFIGS | REQUEST_CONFIGS | {PRODUCER_EXPIRATION}
_LISTENER_CONFIG = re.compile(r"listener\.name\.([^.]+)\.(.+)")


class DynamicConfigError(Exception):
    """A change refused: Kafka's error code and message."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def listener_config(name: str) -> tuple[str, str] | None:
    """(listener, base name) of a listener-prefixed config; None for any other."""
    found = _LISTENER_CONFIG.fullmatch(name)
    return None if found is None else (found.group(1), found.group(2))


def is_dynamic(name: str) -> bool:
    if name in _DYNAMIC:
        return True
    prefixed = listener_config(name)
    return prefixed is not None and prefixed[1] in SSL_RECONFIGURABLE


def is_sensitive(name: str) -> bool:
    """Kafka's isPasswordConfig: the name ends with a password config's."""
    return name == PASSWORD_ENCODER_SECRET or any(name.endswith(p) for p in PASSWORD_CONFIGS)


def synonyms(name: str) -> tuple[str, ...]:
    """Kafka's brokerConfigSynonyms, most specific first: the units of a duration, and a
    listener's config before the broker-wide one."""
    prefixed = listener_config(name)
    if prefixed is not None:
        return (name, prefixed[1])
    return duration_synonyms(name)


def check_change(
    changed: Collection[str],
    per_broker: bool,
    tls_listeners: Collection[str],
    known: Callable[[str], bool],
) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs over the configs a request changes
    (set or deleted); DynamicConfigError for the first rule broken. `tls_listeners`: the
    listeners (lower case) that serve TLS; `known`: whether herdless reads a config."""
    broker_wide_tls = [n for n in changed if n in SSL_RECONFIGURABLE]
    if broker_wide_tls:
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST,
            "These security configs can be dynamically updated only per-listener using the"
            f" listener prefix: {_scala_set(broker_wide_tls)}",
        )
    unknown = [n for n in changed if not known(n) and not is_dynamic(n)]
    if unknown:
        raise DynamicConfigError(
            ErrorCode.INVALID_CONFIG, f"Unknown broker configs: {_scala_set(unknown)}"
        )
    read_only = [n for n in changed if not is_dynamic(n)]
    if read_only:
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST,
            f"Cannot update these configs dynamically: {_scala_set(read_only)}",
        )
    listeners = [n for n in changed if listener_config(n) is not None]
    if listeners and not per_broker:
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST,
            "Cannot update these configs at default cluster level, broker id must be"
            f" specified: {_scala_set(listeners)}",
        )
    for name in listeners:
        listener, _ = listener_config(name) or ("", "")
        if listener.lower() not in tls_listeners:
            raise DynamicConfigError(
                ErrorCode.INVALID_CONFIG,
                f"{name}: this broker has no TLS listener named {listener}",
            )


def incremental_layer(
    layer: Mapping[str, str],
    operations: list[tuple[str, int, str | None]],
    current: Mapping[str, str | None],
) -> tuple[dict[str, str], set[str]]:
    """IncrementalAlterConfigs' operations (name, op, value) applied to one level's
    configs: the level as it would be, and the names changed. `current`: the values in
    force, which APPEND and SUBTRACT start from where the level has none.
    DynamicConfigError for an operation Kafka refuses."""
    names = [name for name, _, _ in operations]
    if len(set(names)) != len(names):
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [name for name, op, value in operations if op != OP_DELETE and value is None]
    if nulls:
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
        )
    result = dict(layer)
    for name, op, value in operations:
        if op == OP_SET:
            assert value is not None
            result[name] = value
        elif op == OP_DELETE:
            result.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            if name not in LIST_CONFIGS:
                raise DynamicConfigError(
                    ErrorCode.INVALID_CONFIG,
                    f"Config value append is not allowed for config key: {name}"
                    if op == OP_APPEND
                    else f"Config value subtract is not allowed for config key: {name}",
                )
            start = layer.get(name, current.get(name)) or ""
            items = [i.strip() for i in start.split(",") if i.strip()]
            given = [i.strip() for i in (value or "").split(",") if i.strip()]
            if op == OP_APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            result[name] = ",".join(items)
        else:
            raise DynamicConfigError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op}")
    return result, set(names)


# IncrementalAlterConfigs operations (KIP-339).
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def _scala_set(names: Collection[str]) -> str:
    """Names as Kafka's messages print a Scala Set."""
    return f"Set({', '.join(sorted(names))})"

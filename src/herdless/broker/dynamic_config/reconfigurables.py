"""The parts of a broker that take dynamic configs at once (Kafka's DynamicLogConfig,
the replication quota managers' updateQuota, DynamicListenerConfig's SSL reload)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from herdless.broker.auth.tls import ReloadingContext
from herdless.broker.config import BrokerConfig
from herdless.broker.dynamic_config.rules import (
    LOG_CONFIGS,
    PRODUCER_EXPIRATION,
    REQUEST_CONFIGS,
    SSL_RECONFIGURABLE,
    THROTTLE_CONFIGS,
    listener_config,
)
from herdless.broker.replication.quota import ReplicationQuota
from herdless.storage import LogManager


class _Settled(Protocol):
    """What holds the settings requests are handled with (the handlers' context)."""

    config: BrokerConfig


class ProducerExpiration:
    """producer.id.expiration.ms: every log forgets idle producers by it from its next
    check on."""

    def __init__(self, logs: LogManager) -> None:
        self._logs = logs

    def reconfigures(self, name: str) -> bool:
        return name == PRODUCER_EXPIRATION

    def validate(self, new: BrokerConfig) -> None:
        pass  # the range is BrokerConfig.validate's

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        self._logs.set_producer_id_expiration_ms(new.producer_id_expiration_ms)


class LogDefaults:
    """The broker-wide topic defaults: every topic without its own override follows them
    at once; retention runs at once, so a shorter retention deletes what it now must."""

    def __init__(self, logs: LogManager, retain: Callable[[], None]) -> None:
        self._logs = logs
        self._retain = retain

    def reconfigures(self, name: str) -> bool:
        return name in LOG_CONFIGS

    def validate(self, new: BrokerConfig) -> None:
        new.log_config()  # ConfigError; BrokerConfig.validate checked it already

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        self._logs.set_default_config(new.log_config())
        self._retain()


class HandlerSettings:
    """What request handlers read from the settings at each request: they read the
    settings in force from the context, which this keeps current."""

    def __init__(self, context: _Settled) -> None:
        self._context = context

    def reconfigures(self, name: str) -> bool:
        return name in REQUEST_CONFIGS

    def validate(self, new: BrokerConfig) -> None:
        pass

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        self._context.config = new


class ReplicationThrottles:
    """leader.replication.throttled.rate and follower.replication.throttled.rate: the
    bounds of the two replication quotas, measured bytes kept."""

    def __init__(self, leader: ReplicationQuota, follower: ReplicationQuota) -> None:
        self._leader = leader
        self._follower = follower

    def reconfigures(self, name: str) -> bool:
        return name in THROTTLE_CONFIGS

    def validate(self, new: BrokerConfig) -> None:
        pass  # the ranges are BrokerConfig.validate's

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        self._leader.set_bound(new.leader_replication_throttled_rate)
        self._follower.set_bound(new.follower_replication_throttled_rate)


class ListenerTls:
    """A TLS listener's keystore and truststore: new connections get the new ones, those
    open keep theirs. The files are read before the change is stored, so a path that
    cannot be read is refused rather than stored."""

    def __init__(self, listeners: Sequence[tuple[str, ReloadingContext]]) -> None:
        self._listeners = {name.lower(): tls for name, tls in listeners}

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._listeners)

    def reconfigures(self, name: str) -> bool:
        prefixed = listener_config(name)
        return prefixed is not None and prefixed[1] in SSL_RECONFIGURABLE

    def validate(self, new: BrokerConfig) -> None:
        for tls in self._listeners.values():
            tls.validate(new.security)

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        for name, tls in self._listeners.items():
            prefix = f"listener.name.{name}."
            before, after = old.security.raw, new.security.raw
            if any(
                before.get(k) != after.get(k)
                for k in before.keys() | after.keys()
                if k.startswith(prefix)
            ):
                tls.reconfigure(new.security)

"""Broker configs as `herdless configs` asks for them: DescribeConfigs and
IncrementalAlterConfigs of a broker (sent to that broker, which answers for itself
alone, as Kafka's do), of the cluster-wide defaults (any broker, resource name ""), and
of a broker's loggers; each answer's error in words.

kafka-python's admin cannot name the cluster-wide defaults (it reads every broker
resource's name as an id), so the requests are built here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from herdless.admin.client import incremental_alter_configs, refused, send_to_any_broker
from herdless.admin.errors import AdminError

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

BROKER, BROKER_LOGGER = 4, 8
# DescribeConfigs' config_source values by Kafka's names, lower case as tables show them.
SOURCES = {
    1: "topic",
    2: "dynamic broker",
    3: "dynamic default broker",
    4: "static broker",
    5: "default",
    6: "dynamic broker logger",
}


@dataclass(frozen=True, slots=True)
class ConfigTarget:
    """Whose configs: a broker's (`broker` its id), the cluster-wide defaults (None), or a
    broker's loggers."""

    resource_type: int
    broker: int | None

    @property
    def name(self) -> str:
        return "" if self.broker is None else str(self.broker)

    def describe(self) -> str:
        if self.resource_type == BROKER_LOGGER:
            return f"the loggers of broker {self.broker}"
        return "the broker defaults" if self.broker is None else f"broker {self.broker}"


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool


def describe_configs(admin: KafkaAdminClient, target: ConfigTarget) -> list[DescribedConfig]:
    """Every config of the target; AdminError if refused."""
    from kafka.protocol.admin import DescribeConfigsRequest

    request = DescribeConfigsRequest(
        resources=[(target.resource_type, target.name, None)],
        include_synonyms=False,
    )
    (result,) = _send(admin, target, request).results
    refused(result, f"describe the configs of {target.describe()}")
    return sorted(
        (
            DescribedConfig(
                c.name,
                c.value,
                SOURCES.get(getattr(c, "config_source", 0), "unknown"),
                c.read_only,
                c.is_sensitive,
            )
            for c in result.configs
        ),
        key=lambda c: c.name,
    )


def alter_configs(
    admin: KafkaAdminClient, target: ConfigTarget, changes: Mapping[str, str | None]
) -> None:
    """Set (a value) or delete (None) configs of the target; AdminError if refused."""
    request = incremental_alter_configs(target.resource_type, target.name, changes)
    (result,) = _send(admin, target, request).responses
    refused(result, f"change the configs of {target.describe()}")


def _send(admin: KafkaAdminClient, target: ConfigTarget, request: Any) -> Any:
    from kafka.errors import UnknownBrokerIdError

    if target.broker is None:
        return send_to_any_broker(admin, request)
    try:
        return admin._manager.run(admin._manager.send, request, target.broker)
    except UnknownBrokerIdError:
        raise AdminError(f"the cluster has no broker {target.broker}") from None

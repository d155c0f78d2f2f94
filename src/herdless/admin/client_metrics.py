"""Client-metrics subscriptions (KIP-714) as `herdless client-metrics` and the console
ask for them: ListConfigResources (74) for the names, DescribeConfigs and
IncrementalAlterConfigs of resource type CLIENT_METRICS, as kafka-client-metrics.sh
does; each answer's error in words."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from herdless.admin.client import incremental_alter_configs, refused, send_to_any_broker

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

CLIENT_METRICS = 16
SETTINGS = ("metrics", "interval.ms", "match")


@dataclass(frozen=True, slots=True)
class ClientMetricsSubscription:
    name: str
    # Metric-name prefixes ("*": all), and the clients' selectors (name=regex).
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[str, ...]


def _items(value: str | None) -> tuple[str, ...]:
    return tuple(i.strip() for i in (value or "").split(",") if i.strip())


def list_subscriptions(admin: KafkaAdminClient) -> list[ClientMetricsSubscription]:
    """Every subscription with its settings, by name; AdminError for a refusal."""
    from kafka.protocol.admin import DescribeConfigsRequest, ListConfigResourcesRequest

    listed = send_to_any_broker(admin, ListConfigResourcesRequest[0]())
    refused(listed, "list client metrics subscriptions")
    names = sorted(r.resource_name for r in listed.config_resources)
    if not names:
        return []
    Resource = DescribeConfigsRequest.DescribeConfigsResource
    described = send_to_any_broker(
        admin,
        DescribeConfigsRequest(
            resources=[
                Resource(resource_type=CLIENT_METRICS, resource_name=n, configuration_keys=None)
                for n in names
            ],
            include_synonyms=False,
            include_documentation=False,
        ),
    )
    found = []
    for result in described.results:
        refused(result, f"describe client metrics subscription {result.resource_name!r}")
        values = {c.name: c.value for c in result.configs}
        found.append(
            ClientMetricsSubscription(
                result.resource_name,
                _items(values.get("metrics")),
                int(values.get("interval.ms") or 0),
                _items(values.get("match")),
            )
        )
    return found


def alter_subscription(
    admin: KafkaAdminClient, name: str, settings: Mapping[str, str | None]
) -> None:
    """Set each setting given a value, delete each given None (all three: the
    subscription goes); AdminError for a refusal, in the broker's words."""
    request = incremental_alter_configs(CLIENT_METRICS, name, settings)
    for result in send_to_any_broker(admin, request).responses:
        refused(result, f"change client metrics subscription {name!r}")

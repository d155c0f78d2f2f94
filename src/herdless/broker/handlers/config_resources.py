"""ListConfigResources (74): the names of the config resources DescribeConfigs can be
asked about. v0 was Kafka 3.7's ListClientMetricsResources and lists client-metrics
subscriptions alone; v1 (KIP-1142, Kafka 4.1) lists every config resource type. Like
Kafka, it needs the cluster's DESCRIBE_CONFIGS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import REFUSALS, authorize
from herdless.broker.handlers.client_metrics_configs import RESOURCE_CLIENT_METRICS
from herdless.broker.handlers.configs import (
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
)
from herdless.broker.handlers.group_configs import RESOURCE_GROUP
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

# The config resource types ListConfigResources lists (KIP-1142), Kafka's ids; v0,
# which was ListClientMetricsResources, lists subscriptions alone.
LISTED_RESOURCE_TYPES = {
    0: (RESOURCE_CLIENT_METRICS,),
    1: (
        RESOURCE_TOPIC,
        RESOURCE_BROKER,
        RESOURCE_BROKER_LOGGER,
        RESOURCE_CLIENT_METRICS,
        RESOURCE_GROUP,
    ),
}


async def handle_list_config_resources(context: BrokerContext, request: Request) -> Any:
    """The config resources of the types asked for (v1; all of them when none is named,
    and UNSUPPORTED_VERSION for a type not listed), as Kafka 4.1 lists them: groups with
    configs of their own, client-metrics subscriptions, every live broker for BROKER and
    BROKER_LOGGER, and every topic."""
    Response = response_class(ApiKey.LIST_CONFIG_RESOURCES)
    if not authorize(
        context, request, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return Response(
            throttle_time_ms=0, error_code=REFUSALS[ResourceType.CLUSTER][0], config_resources=[]
        )
    supported = LISTED_RESOURCE_TYPES[request.api_version]
    asked = (request.api_version >= 1 and request.body.resource_types) or supported
    if any(t not in supported for t in asked):
        return Response(
            throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION, config_resources=[]
        )
    listed = [
        Response.ConfigResource(resource_name=name, resource_type=resource_type)
        for resource_type in supported
        if resource_type in asked
        for name in _resource_names(context, resource_type)
    ]
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=listed)


def _resource_names(context: BrokerContext, resource_type: int) -> list[str]:
    if resource_type == RESOURCE_CLIENT_METRICS:
        manager = context.client_metrics
        return sorted(manager.configs()) if manager is not None else []
    if resource_type == RESOURCE_GROUP:
        store = context.group_configs
        return sorted(store.configs.all()) if store is not None else []
    if resource_type == RESOURCE_TOPIC:
        return sorted(context.metadata.topic_names())
    # BROKER and BROKER_LOGGER: each live broker by its id.
    return [str(i) for i in sorted(b.node_id for b in context.metadata.advertised_brokers())]

"""Configs: DescribeConfigs, and AlterConfigs / IncrementalAlterConfigs, dispatched by
resource type: topics here; consumer groups (incrementally) in group_configs.py;
brokers, the cluster-wide broker defaults and broker loggers in broker_configs.py.

Topic configs are Kafka's names with Kafka's validation (storage.config); a
change is persisted with the topic and applies to its partitions at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from herdless.broker.coordinators.group_coordinator import OFFSETS_TOPIC
from herdless.broker.dynamic_config.rules import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    DynamicConfigError,
)
from herdless.broker.handlers.authorization import REFUSALS, authorize
from herdless.broker.handlers.broker_configs import (
    BrokerConfigEntry,
    alter_broker_configs,
    alter_broker_loggers,
    describe_broker_configs,
    describe_broker_loggers,
    topic_default_source,
)
from herdless.broker.handlers.client_metrics_configs import (
    RESOURCE_CLIENT_METRICS,
    ClientMetricsConfigError,
    alter_client_metrics_configs,
    describe_client_metrics_configs,
)
from herdless.broker.handlers.group_configs import (
    RESOURCE_GROUP,
    GroupConfigError,
    alter_group_configs,
    describe_group_configs,
)
from herdless.broker.topics.topic_admin import TopicAdminError
from herdless.coordinator.group_config import GROUP_CONFIG_TYPES
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from herdless.storage import LIST_TOPIC_CONFIGS, ConfigSource
from herdless.storage.config import TOPIC_CONFIG_TYPES

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)


RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8

# DescribeConfigs v3+ config_type codes (Kafka's DescribeConfigsResponse.ConfigType).
CONFIG_TYPE_CODES = {
    "BOOLEAN": 1,
    "STRING": 2,
    "INT": 3,
    "SHORT": 4,
    "LONG": 5,
    "DOUBLE": 6,
    "LIST": 7,
    "CLASS": 8,
    "PASSWORD": 9,
}


def _config_refusal(
    context: BrokerContext, request: Request, operation: AclOperation, resource: Any
) -> tuple[ErrorCode, str] | None:
    """Kafka's check of a config resource (DESCRIBE_CONFIGS to describe it, ALTER_CONFIGS
    to alter it): a broker's configs are the cluster's to grant, a topic's the topic's,
    a group's the group's. (error, message) if refused; None to go on, and for resource
    types that have no configs here (refused further on for that)."""
    if context.acls is None:
        return None
    if resource.resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS):
        resource_type, name = ResourceType.CLUSTER, CLUSTER_NAME
    elif resource.resource_type == RESOURCE_TOPIC:
        resource_type, name = ResourceType.TOPIC, resource.resource_name
    elif resource.resource_type == RESOURCE_GROUP:
        resource_type, name = ResourceType.GROUP, resource.resource_name
    else:
        return None
    if authorize(context, request, operation, resource_type, name):
        return None
    return REFUSALS[resource_type]


class ConfigChangeError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


async def handle_alter_configs(context: BrokerContext, request: Request) -> Any:
    """The legacy AlterConfigs: the given configs replace the topic's explicit ones."""
    body = request.body
    results = []
    for resource in body.resources:
        refusal = _config_refusal(context, request, AclOperation.ALTER_CONFIGS, resource)
        if refusal is not None:
            results.append((resource, *refusal))
            continue
        if resource.resource_type == RESOURCE_BROKER:
            operations = [(c.name, OP_SET, c.value) for c in resource.configs]
            results.append(
                await _alter_broker(context, resource, operations, True, body.validate_only)
            )
            continue
        changes = {c.name: c.value for c in resource.configs}
        results.append(
            await _alter(context, resource, changes, replace=True, validate_only=body.validate_only)
        )
    Response = response_class(ApiKey.ALTER_CONFIGS)
    return Response(throttle_time_ms=0, responses=[_result(Response, r) for r in results])


async def handle_incremental_alter_configs(context: BrokerContext, request: Request) -> Any:
    body = request.body
    results = []
    for resource in body.resources:
        refusal = _config_refusal(context, request, AclOperation.ALTER_CONFIGS, resource)
        if refusal is not None:
            results.append((resource, *refusal))
            continue
        if resource.resource_type == RESOURCE_GROUP:
            results.append(await _alter_group(context, resource, body.validate_only))
            continue
        if resource.resource_type == RESOURCE_CLIENT_METRICS:
            results.append(await _alter_client_metrics(context, resource, body.validate_only))
            continue
        if resource.resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER):
            operations = [(c.name, c.config_operation, c.value) for c in resource.configs]
            results.append(
                await _alter_broker(context, resource, operations, False, body.validate_only)
            )
            continue
        try:
            changes = _incremental_changes(context, resource)
        except ConfigChangeError as exc:
            results.append((resource, exc.error_code, str(exc)))
            continue
        results.append(
            await _alter(
                context, resource, changes, replace=False, validate_only=body.validate_only
            )
        )
    Response = response_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    return Response(throttle_time_ms=0, responses=[_result(Response, r) for r in results])


async def _alter_group(
    context: BrokerContext, resource: Any, validate_only: bool
) -> tuple[Any, ErrorCode, str | None]:
    try:
        await alter_group_configs(context, resource.resource_name, resource.configs, validate_only)
    except GroupConfigError as exc:
        return resource, exc.error_code, str(exc)
    return resource, ErrorCode.NONE, None


async def _alter_client_metrics(
    context: BrokerContext, resource: Any, validate_only: bool
) -> tuple[Any, ErrorCode, str | None]:
    try:
        await alter_client_metrics_configs(
            context, resource.resource_name, resource.configs, validate_only
        )
    except ClientMetricsConfigError as exc:
        return resource, exc.error_code, str(exc)
    return resource, ErrorCode.NONE, None


async def _alter_broker(
    context: BrokerContext,
    resource: Any,
    operations: Sequence[tuple[str, int, str | None]],
    replace: bool,
    validate_only: bool,
) -> tuple[Any, ErrorCode, str | None]:
    name = resource.resource_name
    try:
        if resource.resource_type == RESOURCE_BROKER_LOGGER:
            alter_broker_loggers(context, name, operations, validate_only)
        else:
            await alter_broker_configs(
                context, name, operations, replace=replace, validate_only=validate_only
            )
    except DynamicConfigError as exc:
        return resource, exc.error_code, str(exc)
    return resource, ErrorCode.NONE, None


def _incremental_changes(context: BrokerContext, resource: Any) -> dict[str, str | None]:
    """The operations as values to set (None: back to the default)."""
    if resource.resource_type != RESOURCE_TOPIC:
        return {}  # refused by _alter with the reason
    config = context.topics.topic_config(resource.resource_name)
    current = config.to_topic_configs() if config is not None else {}
    changes: dict[str, str | None] = {}
    seen: set[str] = set()
    for c in resource.configs:
        if c.name in seen:
            raise ConfigChangeError(
                ErrorCode.INVALID_REQUEST, f"config {c.name!r} appears more than once"
            )
        seen.add(c.name)
        if c.config_operation == OP_SET:
            changes[c.name] = c.value
        elif c.config_operation == OP_DELETE:
            changes[c.name] = None
        elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
            if c.name not in LIST_TOPIC_CONFIGS:
                verb = "append" if c.config_operation == OP_APPEND else "subtract"
                raise ConfigChangeError(
                    ErrorCode.INVALID_CONFIG,
                    f"config {c.name!r} is not a list: {verb} is only for list configs",
                )
            items = [i for i in (current.get(c.name) or "").split(",") if i]
            given = [i.strip() for i in (c.value or "").split(",") if i.strip()]
            if c.config_operation == OP_APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            changes[c.name] = ",".join(items)
        else:
            raise ConfigChangeError(
                ErrorCode.INVALID_REQUEST, f"unknown config operation {c.config_operation}"
            )
    return changes


async def _alter(
    context: BrokerContext,
    resource: Any,
    changes: Mapping[str, str | None],
    *,
    replace: bool,
    validate_only: bool,
) -> tuple[Any, ErrorCode, str | None]:
    if resource.resource_type != RESOURCE_TOPIC:
        return (
            resource,
            ErrorCode.INVALID_REQUEST,
            f"resource type {resource.resource_type} has no configs here",
        )
    name = resource.resource_name
    try:
        config = await context.topics.alter_configs(
            name, changes, replace=replace, validate_only=True
        )
        if name == OFFSETS_TOPIC and not config.compacts:
            # Retention would delete acknowledged commits.
            raise ConfigChangeError(
                ErrorCode.INVALID_CONFIG, f"{OFFSETS_TOPIC} must keep cleanup.policy=compact"
            )
        if not validate_only:
            await context.topics.alter_configs(name, changes, replace=replace, validate_only=False)
            log.info("topic %s configs changed: %s", name, dict(changes))
    except ConfigChangeError as exc:
        return resource, exc.error_code, str(exc)
    except TopicAdminError as exc:
        return resource, exc.error_code, exc.message
    return resource, ErrorCode.NONE, None


def _result(Response: Any, result: tuple[Any, ErrorCode, str | None]) -> Any:
    resource, error_code, message = result
    return Response.AlterConfigsResourceResponse(
        error_code=error_code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


async def handle_describe_configs(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DESCRIBE_CONFIGS)
    Result = Response.DescribeConfigsResult
    Entry = Result.DescribeConfigsResourceResult
    results = []
    for resource in request.body.resources:
        result = Result(
            error_code=ErrorCode.NONE,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=[],
        )
        results.append(result)
        refusal = _config_refusal(context, request, AclOperation.DESCRIBE_CONFIGS, resource)
        if refusal is not None:
            result.error_code, result.error_message = refusal
            continue
        if resource.resource_type == RESOURCE_TOPIC:
            config = context.topics.topic_config(resource.resource_name)
            if config is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = f"topic {resource.resource_name!r} does not exist"
                continue
            values = config.to_topic_configs()
            source_of = {k: _topic_source(context, config, k) for k in values}
        elif resource.resource_type in (
            RESOURCE_BROKER,
            RESOURCE_BROKER_LOGGER,
            RESOURCE_GROUP,
            RESOURCE_CLIENT_METRICS,
        ):
            try:
                result.configs = _entries(Entry, context, resource, request.body)
            except (DynamicConfigError, GroupConfigError, ClientMetricsConfigError) as exc:
                result.error_code, result.error_message = exc.error_code, str(exc)
            continue
        else:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"resource type {resource.resource_type} is not described"
            continue
        keys = resource.configuration_keys
        result.configs = [
            _entry(Entry, key, value, source_of[key], TOPIC_CONFIG_TYPES.get(key, ""))
            for key, value in sorted(values.items())
            if keys is None or key in keys
        ]
    return Response(throttle_time_ms=0, results=results)


def _topic_source(context: BrokerContext, config: Any, name: str) -> ConfigSource:
    source = config.config_source(name)
    if source == ConfigSource.TOPIC_CONFIG:
        return source
    return topic_default_source(context, name) or source


def _entries(Entry: Any, context: BrokerContext, resource: Any, body: Any) -> list[Any]:
    """The entries of a broker's configs, its loggers, a group's or a client-metrics
    subscription's; each module's error (with its error code) if it refuses."""
    name, keys = resource.resource_name, resource.configuration_keys
    if resource.resource_type == RESOURCE_GROUP:
        return [
            _entry(Entry, e.name, e.value, e.source, GROUP_CONFIG_TYPES[e.name])
            for e in describe_group_configs(context, name, keys)
        ]
    if resource.resource_type == RESOURCE_CLIENT_METRICS:
        return [
            _entry(Entry, e.name, e.value, e.source, e.config_type)
            for e in describe_client_metrics_configs(context, name, keys)
        ]
    entries: list[BrokerConfigEntry]
    if resource.resource_type == RESOURCE_BROKER_LOGGER:
        entries = describe_broker_loggers(context, name, keys)
    else:
        synonyms = bool(getattr(body, "include_synonyms", False))
        entries = describe_broker_configs(context, name, keys, synonyms)
    return [
        _entry(
            Entry,
            e.name,
            e.value,
            e.source,
            e.config_type,
            read_only=e.read_only,
            sensitive=e.sensitive,
            synonyms=e.synonyms,
        )
        for e in entries
    ]


def _entry(
    Entry: Any,
    name: str,
    value: str | None,
    source: int,
    config_type: str,
    *,
    read_only: bool = False,
    sensitive: bool = False,
    synonyms: Sequence[tuple[str, str | None, int]] = (),
) -> Any:
    """A DescribeConfigs entry of any resource type (`config_type`: Kafka's type name,
    "" where there is none)."""
    Synonym = Entry.DescribeConfigsSynonym
    return Entry(
        name=name,
        value=value,
        read_only=read_only,
        config_source=source,
        is_default=source == ConfigSource.DEFAULT_CONFIG,
        is_sensitive=sensitive,
        synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in synonyms],
        config_type=CONFIG_TYPE_CODES.get(config_type, 0),
        documentation=None,
    )

"""DescribeConfigs and IncrementalAlterConfigs of resource type GROUP (KIP-848 and
KIP-932 group configs, coordinator/group_config.py): a group's own settings, within
the broker's bounds and checked as Kafka checks them.

A group need not exist to have configs, as in Kafka: they wait for its members.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from herdless.coordinator.group_config import InvalidGroupConfig, altered
from herdless.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

RESOURCE_GROUP = 32
# DescribeConfigs' config_source of a group's own config (Kafka's ConfigSource.GROUP_CONFIG).
GROUP_CONFIG_SOURCE = 8
DEFAULT_CONFIG_SOURCE = 5

OP_SET, OP_DELETE = 0, 1


@dataclass(frozen=True, slots=True)
class GroupConfigEntry:
    name: str
    value: str
    source: int


class GroupConfigError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def _check_name(group_id: str) -> None:
    if not group_id:
        raise GroupConfigError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")


def describe_group_configs(
    context: BrokerContext, group_id: str, keys: Sequence[str] | None
) -> list[GroupConfigEntry]:
    """Every group config, the group's own where it set one, else the broker's default."""
    _check_name(group_id)
    store = context.group_configs
    explicit = store.configs.explicit(group_id) if store is not None else {}
    defaults = context.config.group_config_limits().defaults()
    return [
        GroupConfigEntry(
            name,
            explicit.get(name, default),
            GROUP_CONFIG_SOURCE if name in explicit else DEFAULT_CONFIG_SOURCE,
        )
        for name, default in sorted(defaults.items())
        if keys is None or name in keys
    ]


async def alter_group_configs(
    context: BrokerContext, group_id: str, configs: Sequence[Any], validate_only: bool
) -> None:
    """IncrementalAlterConfigs' operations on the group; GroupConfigError if refused."""
    _check_name(group_id)
    store = context.group_configs
    if store is None:
        raise GroupConfigError(ErrorCode.INVALID_REQUEST, "this broker keeps no group configs")
    changes: dict[str, str | None] = {}
    for c in configs:
        if c.name in changes:
            raise GroupConfigError(
                ErrorCode.INVALID_REQUEST, f"config {c.name!r} appears more than once"
            )
        if c.config_operation == OP_SET:
            changes[c.name] = c.value
        elif c.config_operation == OP_DELETE:
            changes[c.name] = None
        else:
            raise GroupConfigError(
                ErrorCode.INVALID_CONFIG,
                f"config {c.name!r} is not a list: append and subtract are only for lists",
            )
    explicit = altered(store.configs.explicit(group_id), changes)
    try:
        context.config.group_config_limits().validate(explicit)
    except InvalidGroupConfig as exc:
        raise GroupConfigError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if validate_only:
        return
    await store.store(group_id, explicit)
    log.info("group %s configs changed: %s", group_id, changes)

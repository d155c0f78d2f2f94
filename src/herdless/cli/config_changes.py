"""`--config key=value` and `--delete-config key`, as the commands that change configs
(topics and groups) take them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from herdless.cli.errors import USAGE, fail
from herdless.cli.output import say

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

ConfigOption = Annotated[
    list[str] | None,
    typer.Option("--config", "-c", metavar="KEY=VALUE", help="key=value to set; repeatable."),
]
DeleteConfigOption = Annotated[
    list[str] | None,
    typer.Option(
        "--delete-config", "-d", metavar="KEY", help="key to set back to its default; repeatable."
    ),
]


def key_values(items: list[str] | None) -> dict[str, str]:
    configs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise fail(f"--config expects key=value, got {item!r}", USAGE)
        configs[key.strip()] = value
    return configs


def config_changes(config: list[str] | None, delete_config: list[str] | None) -> dict[str, object]:
    """The IncrementalAlterConfigs operations kafka-python's alter_configs takes."""
    from kafka.admin import AlterConfigOp

    changes: dict[str, object] = dict(key_values(config))
    for key in delete_config or []:
        if key in changes:
            raise fail(f"{key!r} is both set and deleted", USAGE)
        changes[key] = (AlterConfigOp.DELETE, None)
    return changes


def alter_configs(
    admin: KafkaAdminClient, resource_type: Any, name: str, changes: dict[str, object]
) -> None:
    """IncrementalAlterConfigs of one resource (a topic, a group); says what it changed."""
    from kafka.admin import ConfigResource

    result = admin.alter_configs(
        [ConfigResource(resource_type, name, configs=changes)],
        incremental=True,
        raise_on_unknown=False,  # the broker knows its configs; it names a bad one
    )
    kind = resource_type.name.lower()
    outcome = result.get(kind, {}).get(name)
    if outcome != "OK":
        raise fail(f"cannot change the configs of {kind} {name!r}: {outcome}")
    say(f"changed {len(changes)} config(s) of {kind} {name}")

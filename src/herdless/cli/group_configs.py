"""`herdless groups configs G`: a consumer group's own configs (KIP-848 group configs),
shown, or changed with --config / --delete-config, as kafka-configs.sh does with
`--entity-type groups`. Any broker serving Kafka 4.0's group configs answers."""

from __future__ import annotations

from typing import Annotated

import typer

from herdless.cli.client import connect
from herdless.cli.config_changes import (
    ConfigOption,
    DeleteConfigOption,
    alter_configs,
    config_changes,
)
from herdless.cli.errors import fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap
from herdless.cli.output import OutputOption, Table, View, show


def configs(
    group: Annotated[str, typer.Argument(metavar="GROUP")],
    config: ConfigOption = None,
    delete_config: DeleteConfigOption = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Show a consumer group's configs (consumer.session.timeout.ms,
    consumer.heartbeat.interval.ms, consumer.assignment.interval.ms,
    consumer.assignor.offload.enable), or change some: the others keep their values."""
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.errors import KafkaError

    changes = config_changes(config, delete_config)
    with connect(bootstrap) as admin:
        if changes:
            alter_configs(admin, ConfigResourceType.GROUP, group, changes)
            return
        try:
            described = admin.describe_configs(
                [ConfigResource(ConfigResourceType.GROUP, group)], config_filter="all"
            )
        except KafkaError as exc:
            raise fail(f"cannot describe the configs of group {group!r}: {exc}") from None
    entries = described.get("group", {}).get(group, {})
    rows = [
        {"name": key, "value": entry["value"], "source": entry["config_source"].lower()}
        for key, entry in sorted(entries.items())
    ]
    table = Table(("NAME", "VALUE", "SOURCE"), [(r["name"], r["value"], r["source"]) for r in rows])
    show(View({"group": group, "configs": rows}, [table]), output)

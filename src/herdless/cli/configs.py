"""`herdless configs`: a broker's configs, the cluster-wide broker defaults, or a broker's
log levels, shown, or changed with --config / --delete-config while the brokers run, as
kafka-configs.sh does with `--entity-type brokers --entity-name N`,
`--entity-type brokers --entity-default` and `--entity-type broker-loggers`.

Topic configs are `herdless topics alter`'s, a group's `herdless groups configs`'.
"""

from __future__ import annotations

from typing import Annotated

import typer

from herdless.cli.client import connect
from herdless.cli.config_changes import DeleteConfigOption, key_values
from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap
from herdless.cli.output import OutputOption, Table, View, say, show


def configs(
    broker: Annotated[
        int | None,
        typer.Option("--broker", metavar="ID", help="This broker's own configs (by its id)."),
    ] = None,
    broker_defaults: Annotated[
        bool,
        typer.Option(
            "--broker-defaults", help="The cluster-wide defaults every broker takes (<default>)."
        ),
    ] = False,
    broker_logger: Annotated[
        int | None,
        typer.Option("--broker-logger", metavar="ID", help="This broker's log levels (by its id)."),
    ] = None,
    config: Annotated[
        list[str] | None,
        typer.Option(
            "--config",
            "-c",
            metavar="KEY=VALUE",
            help="key=value to set (a logger and its level: TRACE, DEBUG, INFO, WARN,"
            " ERROR, FATAL); repeatable.",
        ),
    ] = None,
    delete_config: DeleteConfigOption = None,
    all_configs: Annotated[
        bool,
        typer.Option("--all", help="Show every config, Kafka's defaults too (a broker's configs)."),
    ] = False,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Show the configs set on a broker or as the cluster-wide defaults (with --all,
    every config), or a broker's log levels; or change some while the brokers run:
    the others keep their values. Read-only ones are refused, named."""
    from herdless.admin.broker_configs import (
        BROKER,
        BROKER_LOGGER,
        ConfigTarget,
        alter_configs,
        describe_configs,
    )

    chosen = [broker is not None, broker_defaults, broker_logger is not None]
    if sum(chosen) != 1:
        raise fail("give one of --broker ID, --broker-defaults or --broker-logger ID", USAGE)
    if broker_logger is not None:
        target = ConfigTarget(BROKER_LOGGER, broker_logger)
    else:
        target = ConfigTarget(BROKER, broker)
    changes: dict[str, str | None] = dict(key_values(config))
    for key in delete_config or []:
        if key in changes:
            raise fail(f"{key!r} is both set and deleted", USAGE)
        changes[key] = None
    with connect(bootstrap) as admin:
        if changes:
            alter_configs(admin, target, changes)
            say(f"changed {len(changes)} config(s) of {target.describe()}")
            return
        described = describe_configs(admin, target)
    shown = [
        c
        for c in described
        if all_configs or target.resource_type == BROKER_LOGGER or c.source != "default"
    ]
    rows = [
        {
            "name": c.name,
            "value": c.value,
            "source": c.source,
            "read_only": c.read_only,
            "sensitive": c.sensitive,
        }
        for c in shown
    ]
    table = Table(
        ("NAME", "VALUE", "SOURCE"),
        [
            (
                c.name,
                "(sensitive)" if c.sensitive else ("" if c.value is None else c.value),
                c.source,
            )
            for c in shown
        ],
    )
    show(View({"target": target.describe(), "configs": rows}, [table]), output)

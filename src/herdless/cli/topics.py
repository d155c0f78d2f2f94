"""`herdless topics`: create, list, describe, alter and delete topics on a running broker.

It is a Kafka client like any other (kafka-python's admin client), so it works
against any Kafka-compatible broker. Its defaults are Kafka's kafka-topics.sh's:
a topic created without `--partitions` gets the broker's `num.partitions`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from herdless.admin.client import error_text
from herdless.admin.topic_state import partition_rows
from herdless.cli.client import connect
from herdless.cli.config_changes import (
    ConfigOption,
    DeleteConfigOption,
    alter_configs,
    config_changes,
    key_values,
)
from herdless.cli.delete_records import delete_records
from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, command_group
from herdless.cli.output import OutputOption, Table, View, counted, say, show
from herdless.protocol.config_values import format_boolean

topics_app = command_group(
    "Create, list, describe, alter and delete topics, and delete records before an offset."
)
topics_app.command("delete-records")(delete_records)

# CreateTopics' "the broker's default" for partitions and replication factor.
BROKER_DEFAULT = -1


@topics_app.command("create")
def create(
    name: str,
    partitions: Annotated[
        int | None,
        typer.Option(
            "--partitions",
            "-p",
            min=1,
            show_default="the broker's num.partitions",
            help="Number of partitions.",
        ),
    ] = None,
    replication_factor: Annotated[
        int | None,
        typer.Option(min=1, show_default="the broker's default", help="Copies of each partition."),
    ] = None,
    config: Annotated[
        list[str] | None,
        typer.Option("--config", "-c", metavar="KEY=VALUE", help="key=value; repeatable."),
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Create a topic."""
    configs = key_values(config)
    with connect(bootstrap) as admin:
        result = admin.create_topics(
            {
                name: {
                    "num_partitions": partitions or BROKER_DEFAULT,
                    "replication_factor": replication_factor or BROKER_DEFAULT,
                    "configs": configs,
                }
            },
            raise_errors=False,  # kafka-python's exception drops the broker's message
        )
        [topic] = result["topics"]
        if topic["error_code"] != 0:
            raise fail(
                f"cannot create topic {name!r}: "
                + error_text(topic["error_code"], topic.get("error_message"))
            )
        created = topic.get("num_partitions", BROKER_DEFAULT)
        if created == BROKER_DEFAULT:  # CreateTopics before v5 does not say
            created = len(_describe(admin, name)["partitions"])
    say(f"created topic {name} with {counted(created, 'partition')}")


def _describe(admin: object, name: str) -> dict[str, object]:
    described = admin.describe_topics([name])  # type: ignore[attr-defined]
    if not described or described[0]["error_code"] != 0:
        raise fail(f"topic {name!r} does not exist")
    return described[0]


@topics_app.command("alter")
def alter(
    name: str,
    partitions: Annotated[
        int | None,
        typer.Option(
            "--partitions",
            "-p",
            min=1,
            help="Raise the partition count to N (it can only grow; keys move partitions).",
        ),
    ] = None,
    config: ConfigOption = None,
    delete_config: DeleteConfigOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Add partitions to a topic or change some of its configs; the others keep their values."""
    from kafka.admin import ConfigResourceType

    changes = config_changes(config, delete_config)
    if not changes and partitions is None:
        raise fail(
            "nothing to change: give --partitions N, --config key=value or --delete-config key",
            USAGE,
        )
    with connect(bootstrap) as admin:
        if partitions is not None:
            response = admin.create_partitions({name: partitions}, raise_errors=False)
            [outcome] = response.results
            if outcome.error_code != 0:
                raise fail(
                    f"cannot give topic {name!r} {partitions} partitions: "
                    + error_text(outcome.error_code, outcome.error_message)
                )
            say(f"topic {name} now has {counted(partitions, 'partition')}")
        if changes:
            alter_configs(admin, ConfigResourceType.TOPIC, name, changes)


@topics_app.command("list")
def list_topics(
    internal: Annotated[
        bool, typer.Option("--internal", help="Also list internal topics (__consumer_offsets...).")
    ] = False,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """List topics with their partition counts."""
    with connect(bootstrap) as admin:
        described = admin.describe_topics()
    topics = [
        {"topic": t["name"], "partitions": len(t["partitions"]), "internal": t["is_internal"]}
        for t in sorted(described, key=lambda t: t["name"])
        if internal or not t["is_internal"]
    ]
    rows = [(t["topic"], t["partitions"], format_boolean(t["internal"])) for t in topics]
    show(View(topics, [Table(("TOPIC", "PARTITIONS", "INTERNAL"), rows)]), output)


@topics_app.command("describe")
def describe(
    name: str, output: OutputOption = None, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP
) -> None:
    """Show a topic's partitions, their offsets, and its configs."""
    from kafka.admin import ConfigResource, ConfigResourceType

    with connect(bootstrap) as admin:
        topic = _describe(admin, name)
        configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all"
        )["topic"][name]
        partitions = partition_rows(admin, [topic])[name]
    config_rows = [
        {"name": key, "value": entry["value"], "source": entry["config_source"].lower()}
        for key, entry in sorted(configs.items())
    ]
    topic_id = str(topic.get("topic_id") or "")
    view = View(
        data={
            "topic": name,
            "topic_id": topic_id,
            "partitions": partitions,
            "configs": config_rows,
        },
        tables=[
            Table(
                (
                    "PARTITION",
                    "LEADER",
                    "EPOCH",
                    "REPLICAS",
                    "ISR",
                    "OFFLINE",
                    "LOG-START-OFFSET",
                    "LOG-END-OFFSET",
                    "RECORDS",
                ),
                [
                    tuple(",".join(map(str, v)) if isinstance(v, list) else v for v in p.values())
                    for p in partitions
                ],
            ),
            Table(("CONFIG", "VALUE", "SOURCE"), [tuple(c.values()) for c in config_rows]),
        ],
        heading=f"topic {name}  id {topic_id}",
    )
    show(view, output)


@topics_app.command("delete")
def delete(name: str, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    """Delete a topic and all its data."""
    with connect(bootstrap) as admin:
        result = admin.delete_topics([name], raise_errors=False)
        for topic in result["topics"]:
            code = topic.get("error_code", 0)
            if code:
                raise fail(
                    f"cannot delete topic {name!r}: " + error_text(code, topic.get("error_message"))
                )
    say(f"deleted topic {name}")

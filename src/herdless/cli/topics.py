"""`herdless topics`: create, list, describe and delete topics on a running broker.

It is a Kafka client like any other (kafka-python's admin client), so it works
against any Kafka-compatible broker.
"""

from __future__ import annotations

from typing import Annotated

import typer
from kafka import KafkaConsumer, TopicPartition
from kafka import errors as Errors
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic
from rich.table import Table

from herdless.cli.client import Bootstrap, connect, console, fail

topics_app = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True)


@topics_app.command("create")
def create(
    name: str,
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1)] = 1,
    replication_factor: Annotated[int, typer.Option(min=1)] = 1,
    config: Annotated[
        list[str] | None, typer.Option("--config", "-c", help="key=value; repeatable.")
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
) -> None:
    """Create a topic."""
    configs = _key_values(config)
    with connect(bootstrap) as admin:
        result = admin.create_topics(
            [NewTopic(name, partitions, replication_factor, topic_configs=configs)],
            raise_errors=False,  # kafka-python's exception drops the broker's message
        )
    for topic in result.get("topics", []):
        if topic["error_code"] != 0:
            reason = topic["error_message"] or Errors.for_code(topic["error_code"]).__name__
            raise fail(f"cannot create topic {name!r}: {reason}")
    console.print(f"created topic [bold]{name}[/bold] with {partitions} partitions")


def _key_values(items: list[str] | None) -> dict[str, str]:
    configs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise fail(f"--config expects key=value, got {item!r}")
        configs[key.strip()] = value
    return configs


@topics_app.command("alter")
def alter(
    name: str,
    config: Annotated[
        list[str] | None, typer.Option("--config", "-c", help="key=value to set; repeatable.")
    ] = None,
    delete_config: Annotated[
        list[str] | None,
        typer.Option("--delete-config", "-d", help="key to set back to its default; repeatable."),
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
) -> None:
    """Change some of a topic's configs; the others keep their values."""
    changes: dict[str, object] = dict(_key_values(config))
    for key in delete_config or []:
        if key in changes:
            raise fail(f"{key!r} is both set and deleted")
        changes[key] = (AlterConfigOp.DELETE, None)
    if not changes:
        raise fail("nothing to change: give --config key=value or --delete-config key")
    with connect(bootstrap) as admin:
        result = admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, configs=changes)],
            incremental=True,
            raise_on_unknown=False,  # the broker knows its configs; it names a bad one
        )
    outcome = result.get("topic", {}).get(name)
    if outcome != "OK":
        raise fail(f"topic {name!r}: {outcome}")
    console.print(f"changed {len(changes)} config(s) of topic [bold]{name}[/bold]")


@topics_app.command("list")
def list_topics(bootstrap: Bootstrap = "127.0.0.1:9092") -> None:
    """List topics with their partition counts."""
    with connect(bootstrap) as admin:
        described = admin.describe_topics()
    table = Table("topic", "partitions", "internal")
    for topic in sorted(described, key=lambda t: t["name"]):
        table.add_row(topic["name"], str(len(topic["partitions"])), str(topic["is_internal"]))
    console.print(table)


@topics_app.command("describe")
def describe(name: str, bootstrap: Bootstrap = "127.0.0.1:9092") -> None:
    """Show a topic's partitions, their offsets, and its configs."""
    with connect(bootstrap) as admin:
        described = admin.describe_topics([name])
        if not described or described[0]["error_code"] != 0:
            raise fail(f"topic {name!r} does not exist")
        configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all"
        )
    leaders = {p["partition_index"]: p["leader_id"] for p in described[0]["partitions"]}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="herdless-cli")
    try:
        tps = [TopicPartition(name, p) for p in sorted(leaders)]
        starts = consumer.beginning_offsets(tps)
        ends = consumer.end_offsets(tps)
    finally:
        consumer.close()
    table = Table("partition", "leader", "log start offset", "log end offset", "records")
    for tp in tps:
        table.add_row(
            str(tp.partition),
            str(leaders[tp.partition]),
            str(starts[tp]),
            str(ends[tp]),
            str(ends[tp] - starts[tp]),
        )
    console.print(f"[bold]{name}[/bold]  id {described[0].get('topic_id', '')}")
    console.print(table)
    config_table = Table("config", "value", "source")
    for key, entry in sorted(configs["topic"][name].items()):
        config_table.add_row(key, str(entry["value"]), entry["config_source"].lower())
    console.print(config_table)


@topics_app.command("delete")
def delete(name: str, bootstrap: Bootstrap = "127.0.0.1:9092") -> None:
    """Delete a topic and all its data."""
    with connect(bootstrap) as admin:
        admin.delete_topics([name])
    console.print(f"deleted topic [bold]{name}[/bold]")

"""`herdless client-metrics add|list|remove`: the subscriptions that make clients push
their own metrics (KIP-714), as kafka-client-metrics.sh --alter / --list / --delete
keeps them. Through any broker; a change is in force on every broker at once (one
broker) or within a second (a cluster). What clients push is on each broker's /metrics."""

from __future__ import annotations

from typing import Annotated

import typer

from herdless.cli.client import connect
from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, command_group
from herdless.cli.output import OutputOption, Table, View, say, show

client_metrics_app = command_group(
    "Add, list and remove client-metrics subscriptions: which metrics clients push to the"
    " brokers (KIP-714), how often, and which clients."
)

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The subscription's name.")]


def _prefixes(values: list[str] | None) -> list[str]:
    return [p.strip() for v in values or [] for p in v.split(",") if p.strip()]


@client_metrics_app.command("add")
def add(
    name: NameArgument,
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics",
            metavar="PREFIXES",
            help="Metric-name prefixes to push, comma-separated or repeated"
            " (org.apache.kafka.producer.); '*' for all.",
        ),
    ] = None,
    interval_ms: Annotated[
        int | None,
        typer.Option(
            "--interval-ms",
            metavar="MS",
            help="How often to push, 100 to 3600000 [Kafka's default: 300000].",
        ),
    ] = None,
    match: Annotated[
        list[str] | None,
        typer.Option(
            "--match",
            metavar="ATTRIBUTE=REGEX",
            help="Push only from clients whose attribute matches the regular expression"
            " whole: client_id, client_instance_id, client_software_name,"
            " client_software_version, client_source_address, client_source_port."
            " Repeatable: all must match. Without it, every client.",
        ),
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Add a subscription, or change the settings given of an existing one."""
    from herdless.admin.client_metrics import alter_subscription

    settings: dict[str, str | None] = {}
    if metrics is not None:
        prefixes = _prefixes(metrics)
        if not prefixes:
            raise fail("--metrics needs at least one prefix ('*' for all)", USAGE)
        settings["metrics"] = ",".join(prefixes)
    if interval_ms is not None:
        settings["interval.ms"] = str(interval_ms)
    if match is not None:
        for selector in match:
            if "," in selector:
                raise fail(f"--match {selector!r}: give one selector per --match", USAGE)
        settings["match"] = ",".join(m.strip() for m in match)
    if not settings:
        raise fail("give --metrics, --interval-ms or --match", USAGE)
    with connect(bootstrap) as admin:
        alter_subscription(admin, name, settings)
    say(f"client metrics subscription {name} set")


@client_metrics_app.command("list")
def list_(output: OutputOption = None, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    """Every subscription with its metrics, interval and client selectors."""
    from herdless.admin.client_metrics import list_subscriptions

    with connect(bootstrap) as admin:
        found = list_subscriptions(admin)
    rows = [
        {
            "name": s.name,
            "metrics": list(s.metrics),
            "interval_ms": s.interval_ms,
            "match": list(s.match),
        }
        for s in found
    ]
    table = Table(
        ("NAME", "METRICS", "INTERVAL MS", "MATCH"),
        [
            (s.name, ",".join(s.metrics) or "-", s.interval_ms, ",".join(s.match) or "(all)")
            for s in found
        ],
    )
    notes = [] if found else ["no client metrics subscriptions: clients push nothing"]
    show(View(rows, [table], notes=notes), output)


@client_metrics_app.command("remove")
def remove(name: NameArgument, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    """Remove a subscription: the clients it matched stop pushing what it asked for."""
    from herdless.admin.client_metrics import SETTINGS, alter_subscription, list_subscriptions

    with connect(bootstrap) as admin:
        if name not in {s.name for s in list_subscriptions(admin)}:
            raise fail(f"no client metrics subscription named {name!r}")
        alter_subscription(admin, name, dict.fromkeys(SETTINGS))
    say(f"client metrics subscription {name} removed")

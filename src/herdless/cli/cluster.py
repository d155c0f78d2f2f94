"""`herdless cluster`: see a cluster's brokers and partitions' health, or run one locally.

`describe` is a Kafka client like the other commands: brokers, racks, the
controller, how many groups each broker coordinates, and which partitions are
under-replicated or offline. `elect-leaders` asks the controller for preferred or
unclean leader elections, as kafka-leader-election.sh does (elect_leaders.py).
`reassign` moves partitions between brokers as kafka-reassign-partitions.sh does, and
`drain` empties a broker before it is retired (reassign.py).
`up` starts Debian's ZooKeeper and N brokers on this machine, for trying the
cluster on a laptop (local_cluster.py): a broker that dies leaves the others
running; Ctrl-C stops them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from herdless.cli.elect_leaders import elect_leaders
from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, command_group
from herdless.cli.output import OutputOption, Table, View, counted, show
from herdless.cli.reassign import drain, reassign

cluster_app = command_group(
    "See a cluster's brokers and partitions, elect their leaders, or run one on this machine."
)
cluster_app.command("elect-leaders")(elect_leaders)
cluster_app.command("reassign")(reassign)
cluster_app.command("drain")(drain)


@cluster_app.command("describe")
def describe(output: OutputOption = None, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    """Brokers, racks, the controller, the groups each broker coordinates, and
    under-replicated or offline partitions."""
    from herdless.admin.cluster_state import cluster_state
    from herdless.cli.client import connect

    with connect(bootstrap) as admin:
        data = cluster_state(admin)
    broker_rows, problems = data["brokers"], data["unhealthy_partitions"]
    controller, under, offline = data["controller"], data["under_replicated"], data["offline"]
    heading = (
        f"cluster {data['cluster_id']}: {counted(len(broker_rows), 'broker')},"
        f" controller {controller}, {counted(data['partitions'], 'partition')},"
        f" {under} under-replicated, {offline} offline"
    )
    tables = [
        Table(
            (
                "BROKER",
                "HOST",
                "PORT",
                "RACK",
                "CONTROLLER",
                "LEADER-OF",
                "REPLICAS",
                "OUT-OF-ISR",
                "OFFSETS-LEADER-OF",
                "GROUPS",
            ),
            [
                (
                    r["broker"],
                    r["host"],
                    r["port"],
                    r["rack"],
                    "yes" if r["controller"] else "",
                    r["leader_of"],
                    r["replicas"],
                    r["out_of_isr"],
                    r["offsets_leader_of"],
                    r["groups"] if r["groups_error"] is None else r["groups_error"],
                )
                for r in broker_rows
            ],
        )
    ]
    if problems:
        tables.append(
            Table(
                ("TOPIC", "PARTITION", "STATE", "LEADER", "REPLICAS", "ISR", "OFFLINE"),
                [
                    (
                        p["topic"],
                        p["partition"],
                        p["state"],
                        p["leader"] if p["leader"] >= 0 else "none",
                        _ids(p["replicas"]),
                        _ids(p["isr"]),
                        _ids(p["offline_replicas"]),
                    )
                    for p in problems
                ],
            )
        )
    show(View(data=data, tables=tables, heading=heading), output)


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


@cluster_app.command("up")
def up(
    brokers: Annotated[int, typer.Option(min=1, max=9, help="How many brokers to start.")] = 3,
    port: Annotated[
        int, typer.Option(help="The first broker's port; the others take the next ones.")
    ] = 9092,
    zookeeper_port: Annotated[int, typer.Option(help="ZooKeeper's client port.")] = 2181,
    data_dir: Annotated[
        Path, typer.Option(help="Where ZooKeeper's and every broker's data live.")
    ] = Path("herdless-cluster"),
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="A broker property for every broker, key=value; repeatable.",
        ),
    ] = None,
    racks: Annotated[
        str | None,
        typer.Option(
            metavar="RACK,RACK,...",
            help="Each broker's rack (broker.rack), in broker id order: one per broker.",
        ),
    ] = None,
) -> None:
    """Start ZooKeeper and N brokers on 127.0.0.1 for trying a cluster; a broker that
    stops leaves the others running (Enter restarts it); Ctrl-C stops them all."""
    from herdless.cli import local_cluster
    from herdless.cli.zookeeper import ZooKeeperMissing, ZooKeeperServer

    broker_racks = _racks(racks, brokers)
    ports = [port + i for i in range(brokers)]
    local_cluster.check_addresses_free(zookeeper_port, ports)
    try:
        zookeeper = ZooKeeperServer(data_dir / "zookeeper", zookeeper_port)
    except ZooKeeperMissing as exc:
        raise fail(str(exc)) from None
    settings = [arg for item in set_ or [] for arg in ("--set", item)]
    members = [
        local_cluster.LocalBroker(
            i + 1,
            p,
            data_dir,
            zookeeper.connect,
            [*settings, *(("--rack", broker_racks[i]) if broker_racks else ())],
        )
        for i, p in enumerate(ports)
    ]
    local_cluster.run(zookeeper, members, data_dir)


def _racks(racks: str | None, brokers: int) -> list[str]:
    """--racks as one rack per broker; none given: no racks."""
    if racks is None:
        return []
    names = [name.strip() for name in racks.split(",")]
    if not all(names):
        raise fail(f"--racks {racks!r} has an empty rack name", USAGE)
    if len(names) != brokers:
        raise fail(
            f"--racks names {counted(len(names), 'rack')} for {counted(brokers, 'broker')}:"
            " give one per broker, in broker id order (e.g. --racks a,b,c)",
            USAGE,
        )
    return names

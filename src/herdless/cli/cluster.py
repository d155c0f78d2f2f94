"""`herdless cluster`: see a cluster's brokers and partitions' health, or run one locally.

`describe` is a Kafka client like the other commands: brokers, racks, the
controller, how many groups each broker coordinates, and which partitions are
under-replicated or offline. `up` starts Debian's ZooKeeper and N brokers on
this machine, for trying the cluster on a laptop; Ctrl-C stops them all.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from herdless.cli.errors import fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, command_group
from herdless.cli.output import OutputOption, Table, View, note, show

cluster_app = command_group("See a cluster's brokers and partitions, or run one on this machine.")


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
        f"cluster {data['cluster_id']}: {len(broker_rows)} brokers, controller {controller},"
        f" {data['partitions']} partitions, {under} under-replicated, {offline} offline"
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
        typer.Option("--set", help="A broker property for every broker, key=value; repeatable."),
    ] = None,
) -> None:
    """Start ZooKeeper and N brokers on 127.0.0.1 for trying a cluster; Ctrl-C stops them."""
    from herdless.cli.zookeeper import ZooKeeperMissing, ZooKeeperServer

    try:
        zookeeper = ZooKeeperServer(data_dir / "zookeeper", zookeeper_port)
    except ZooKeeperMissing as exc:
        raise fail(str(exc)) from None
    started: list[subprocess.Popen[bytes]] = []
    try:
        try:
            zookeeper.start()
        except RuntimeError as exc:
            raise fail(f"ZooKeeper did not start on port {zookeeper_port}: {exc}") from None
        note(f"ZooKeeper on {zookeeper.connect}, its data in {zookeeper.data_dir}")
        settings = [arg for item in set_ or [] for arg in ("--set", item)]
        for broker_id in range(1, brokers + 1):
            broker_port = port + broker_id - 1
            broker_dir = data_dir / f"broker-{broker_id}"
            broker_dir.mkdir(parents=True, exist_ok=True)
            log = open(data_dir / f"broker-{broker_id}.log", "ab")  # noqa: SIM115 - the child owns it
            started.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "herdless",
                        "serve",
                        "--port",
                        str(broker_port),
                        "--data-dir",
                        str(broker_dir),
                        "--zookeeper",
                        zookeeper.connect,
                        "--broker-id",
                        str(broker_id),
                        *settings,
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
            log.close()
        _wait_until_listening(started, port, data_dir)
        bootstrap = ",".join(f"127.0.0.1:{port + i}" for i in range(brokers))
        note(f"{brokers} brokers up: bootstrap servers {bootstrap}; logs in {data_dir}/")
        note(f"try: herdless cluster describe -b 127.0.0.1:{port} ; Ctrl-C stops them all")
        while all(process.poll() is None for process in started):
            time.sleep(0.5)
        raise fail(f"a broker stopped; see its log in {data_dir}/")
    except KeyboardInterrupt:
        note("stopping the brokers, then ZooKeeper")
    finally:
        for process in started:
            if process.poll() is None:
                process.terminate()
        for process in started:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        if zookeeper.alive():
            zookeeper.stop()


def _wait_until_listening(
    processes: list[subprocess.Popen[bytes]], first_port: int, data_dir: Path
) -> None:
    import socket

    deadline = time.monotonic() + 60
    for index, process in enumerate(processes):
        while True:
            if process.poll() is not None:
                log = data_dir / f"broker-{index + 1}.log"
                text = log.read_text(errors="replace").strip() if log.exists() else ""
                last = text.splitlines()[-1] if text else f"see {log}"
                raise fail(f"broker {index + 1} exited: {last}")
            try:
                with socket.create_connection(("127.0.0.1", first_port + index), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise fail(f"broker {index + 1} did not listen within 60 s") from None
                time.sleep(0.1)

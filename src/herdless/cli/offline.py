"""What the commands that change a cluster's configs offline share (`users`, `quotas`): a
data directory of a broker that is not running, or the cluster's ZooKeeper, logged in to
as Kafka's tools log in, instead of a bootstrap server."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from herdless.cli.errors import USAGE, fail

if TYPE_CHECKING:
    from herdless.cluster.store import ClusterStore

T = TypeVar("T")

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Offline: the data directory of a broker alone, while it is not running.",
    ),
]
ZooKeeperOption = Annotated[
    str | None,
    typer.Option(
        "--zookeeper",
        help="Offline: the cluster's ZooKeeper, host:port[/chroot] (zookeeper.connect).",
    ),
]
ZooKeeperConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--zookeeper-config",
        metavar="FILE",
        help="With --zookeeper: a properties file (the brokers' own will do) whose"
        " java.security.auth.login.config, zookeeper.sasl.client and"
        " zookeeper.sasl.clientconfig log in to ZooKeeper. Without it, KAFKA_OPTS's"
        " -D options, as Kafka's tools.",
    ),
]


@dataclass(frozen=True)
class OfflineZooKeeper:
    connect: str
    config: Path | None


def offline_target(
    ctx: typer.Context, data_dir: Path | None, zookeeper: str | None, zookeeper_config: Path | None
) -> Path | OfflineZooKeeper | None:
    """None: through the brokers; else the data directory or the ZooKeeper to write."""
    if zookeeper_config is not None and zookeeper is None:
        raise fail("--zookeeper-config goes with --zookeeper", USAGE)
    named = [
        option
        for option, given in (
            ("--bootstrap-server", given(ctx, "bootstrap")),
            ("--data-dir", data_dir is not None),
            ("--zookeeper", zookeeper is not None),
        )
        if given
    ]
    if len(named) > 1:
        raise fail(f"give one of --bootstrap-server, --data-dir, --zookeeper, not {named}", USAGE)
    if zookeeper is not None:
        return OfflineZooKeeper(zookeeper, zookeeper_config)
    return data_dir


def given(ctx: typer.Context, parameter: str) -> bool:
    # typer runs on its own copy of click: its ParameterSource is known by name only.
    source = ctx.get_parameter_source(parameter)
    return source is not None and source.name != "DEFAULT"


def open_zookeeper(zookeeper: OfflineZooKeeper) -> ClusterStore:
    """A session with the cluster's ZooKeeper, logged in as Kafka's tools log in."""
    import logging

    from herdless.broker.clock import monotonic_ms, wall_ms
    from herdless.broker.config import read_properties
    from herdless.cluster.store import ClusterStore
    from herdless.cluster.zookeeper.login import read_zookeeper_security

    try:
        settings = {} if zookeeper.config is None else read_properties(zookeeper.config)
        security = read_zookeeper_security(settings).for_tools()
    except ValueError as exc:  # ConfigError, ZooKeeperSecurityError
        raise fail(f"--zookeeper-config: {exc}" if zookeeper.config else str(exc)) from None
    # Kazoo logs every lost connection and refused login; the command says what failed,
    # once, in its own error.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    return ClusterStore(
        zookeeper.connect, wall_ms=wall_ms, monotonic_ms=monotonic_ms, security=security
    )


def read_offline(
    where: Path | OfflineZooKeeper,
    in_data_dir: Callable[[Path], T],
    in_zookeeper: Callable[[ClusterStore], T],
) -> T:
    """Read configs offline: `in_data_dir(path)` from a data directory, or
    `in_zookeeper(store)` from the cluster's ZooKeeper; a failure is the command's error."""
    if isinstance(where, Path):
        from herdless.storage import StorageError

        if not where.is_dir():
            raise fail(f"no data directory {where}")
        try:
            return in_data_dir(where)
        except StorageError as exc:
            raise fail(str(exc)) from None
    return _in_zookeeper(where, in_zookeeper)


def alter_offline(
    where: Path | OfflineZooKeeper,
    what: str,
    in_data_dir: Callable[[Path], object],
    in_zookeeper: Callable[[ClusterStore], object],
) -> None:
    """Change configs offline, as read_offline reads them; a data directory a running
    broker holds is refused with where to `what` instead (alter its quotas...)."""
    if isinstance(where, Path):
        from herdless.storage import StorageError

        try:
            in_data_dir(where)
        except StorageError as exc:
            if "in use" in str(exc):
                raise fail(
                    f"data directory {where} is in use by a running broker: {what}"
                    " through it, with --bootstrap-server"
                ) from None
            raise fail(str(exc)) from None
        except OSError as exc:
            raise fail(f"cannot write to data directory {where}: {exc.strerror or exc}") from None
    else:
        _in_zookeeper(where, in_zookeeper)


def _in_zookeeper(zookeeper: OfflineZooKeeper, call: Callable[[ClusterStore], T]) -> T:
    from herdless.cluster.errors import ClusterError

    try:
        with open_zookeeper(zookeeper) as store:
            return call(store)
    except (ClusterError, ValueError) as exc:  # ValueError: a name ZooKeeper cannot hold
        raise fail(str(exc)) from None

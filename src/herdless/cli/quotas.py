"""`herdless quotas describe|alter`: client quotas by user and client id (KIP-13, KIP-55),
as kafka-configs.sh --entity-type users/clients --describe and --alter --add-config
'producer_byte_rate=1024' --delete-config 'request_percentage' set them.

Online, through any broker (DescribeClientQuotas, AlterClientQuotas). Offline, into the
data directory of a broker that is not running (`--data-dir`), or into a cluster's
ZooKeeper (`--zookeeper`), where running brokers apply the change within a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from herdless.cli.client import connect
from herdless.cli.errors import USAGE, fail
from herdless.cli.offline import (
    DataDirOption,
    OfflineZooKeeper,
    ZooKeeperConfigOption,
    ZooKeeperOption,
    alter_offline,
    offline_target,
    read_offline,
)
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, command_group
from herdless.cli.output import OutputOption, Table, View, say, show

if TYPE_CHECKING:
    from herdless.protocol.client_quotas import QuotaEntity

quotas_app = command_group(
    "Describe and alter client quotas (producer_byte_rate, consumer_byte_rate,"
    " request_percentage, controller_mutation_rate) of users and client ids."
)

UserOption = Annotated[
    str | None, typer.Option("--user", help="The user (principal name) the quotas are of.")
]
UserDefaultsOption = Annotated[
    bool, typer.Option("--user-defaults", help="The default user's quotas (<default>).")
]
ClientOption = Annotated[
    str | None, typer.Option("--client-id", help="The client id the quotas are of.")
]
ClientDefaultsOption = Annotated[
    bool, typer.Option("--client-defaults", help="The default client id's quotas (<default>).")
]


def _entity(
    user: str | None, user_defaults: bool, client_id: str | None, client_defaults: bool
) -> QuotaEntity | None:
    """The entity named by the options; None when none is (every entity)."""
    from herdless.protocol.client_quotas import DEFAULT, InvalidEntity, QuotaEntity

    if user is not None and user_defaults:
        raise fail("give --user or --user-defaults, not both", USAGE)
    if client_id is not None and client_defaults:
        raise fail("give --client-id or --client-defaults, not both", USAGE)
    user_part = DEFAULT if user_defaults else user
    client_part = DEFAULT if client_defaults else client_id
    if user_part is None and client_part is None:
        return None
    try:
        return QuotaEntity(user_part, client_part)
    except InvalidEntity as exc:
        raise fail(str(exc), USAGE) from None


def _label(entity: QuotaEntity) -> str:
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in entity.to_wire())


@quotas_app.command("describe")
def describe(
    ctx: typer.Context,
    user: UserOption = None,
    user_defaults: UserDefaultsOption = False,
    client_id: ClientOption = None,
    client_defaults: ClientDefaultsOption = False,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    data_dir: DataDirOption = None,
    zookeeper: ZooKeeperOption = None,
    zookeeper_config: ZooKeeperConfigOption = None,
) -> None:
    """The quotas of one entity (user, client id, or a user's client id), or of all."""
    entity = _entity(user, user_defaults, client_id, client_defaults)
    where = offline_target(ctx, data_dir, zookeeper, zookeeper_config)
    if where is None:
        from herdless.admin.client_quotas import describe_quotas

        with connect(bootstrap) as admin:
            found = describe_quotas(admin, entity)
    else:
        found = [(e, q) for e, q in _read_offline(where) if entity is None or e == entity]
    rows = [
        {"entity": _label(e), "quota": key, "value": value}
        for e, quotas in found
        for key, value in sorted(quotas.items())
    ]
    table = Table(("ENTITY", "QUOTA", "VALUE"), [tuple(r.values()) for r in rows])
    show(View(rows, [table]), output)


@quotas_app.command("alter")
def alter(
    ctx: typer.Context,
    add_config: Annotated[
        list[str] | None,
        typer.Option(
            "--add-config",
            metavar="KEY=VALUE[,KEY=VALUE]",
            help="Quotas to set, e.g. producer_byte_rate=1048576; repeatable.",
        ),
    ] = None,
    delete_config: Annotated[
        list[str] | None,
        typer.Option("--delete-config", metavar="KEY[,KEY]", help="Quotas to remove; repeatable."),
    ] = None,
    user: UserOption = None,
    user_defaults: UserDefaultsOption = False,
    client_id: ClientOption = None,
    client_defaults: ClientDefaultsOption = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    data_dir: DataDirOption = None,
    zookeeper: ZooKeeperOption = None,
    zookeeper_config: ZooKeeperConfigOption = None,
) -> None:
    """Set and remove quotas of one entity: a user, a client id, or a user's client id."""
    from herdless.protocol.client_quotas import InvalidEntity, quota_value

    entity = _entity(user, user_defaults, client_id, client_defaults)
    if entity is None:
        raise fail(
            "name the entity: --user or --user-defaults, --client-id or --client-defaults",
            USAGE,
        )
    added = _added(add_config or [])
    deleted = [k.strip() for item in delete_config or [] for k in item.split(",") if k.strip()]
    if not added and not deleted:
        raise fail("nothing to alter: give --add-config or --delete-config", USAGE)
    try:
        for key, value in added.items():
            quota_value(key, value)
        for key in deleted:
            quota_value(key, 0)
    except InvalidEntity as exc:
        raise fail(str(exc), USAGE) from None
    where = offline_target(ctx, data_dir, zookeeper, zookeeper_config)
    if where is None:
        from herdless.admin.client_quotas import alter_quotas

        with connect(bootstrap) as admin:
            alter_quotas(admin, entity, added, deleted)
    else:
        _alter_offline(where, entity, added, deleted)
    say(f"altered the quotas of {_label(entity)}")


def _added(items: list[str]) -> dict[str, float]:
    added = {}
    for item in items:
        for pair in item.split(","):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise fail(f"--add-config expects key=value, got {pair!r}", USAGE)
            try:
                added[key.strip()] = float(value)
            except ValueError:
                raise fail(
                    f"--add-config: {key.strip()} must be a number, not {value!r}", USAGE
                ) from None
    return added


# -- offline ------------------------------------------------------------------------------


def _read_offline(where: Path | OfflineZooKeeper) -> list[tuple[QuotaEntity, dict[str, float]]]:
    from herdless.broker.quotas.store import QUOTAS
    from herdless.protocol.client_quotas import QuotaEntity, quotas_of

    configs = read_offline(where, QUOTAS.read, lambda store: store.quota_entity_configs())
    found = []
    for path, config in sorted(configs.items()):
        quotas = quotas_of(config)
        if quotas:
            found.append((QuotaEntity.from_path(path), quotas))
    return found


def _alter_offline(
    where: Path | OfflineZooKeeper, entity: QuotaEntity, added: dict[str, float], deleted: list[str]
) -> None:
    from herdless.broker.quotas.store import QUOTAS
    from herdless.protocol.client_quotas import quota_value

    def change(config: dict[str, str]) -> dict[str, str]:
        changed = {k: v for k, v in config.items() if k not in deleted}
        changed.update({k: quota_value(k, v) for k, v in added.items()})
        return changed

    alter_offline(
        where,
        "alter its quotas",
        lambda data_dir: QUOTAS.alter_offline(data_dir, entity.path, change),
        lambda store: store.alter_entity_config(entity.path, change),
    )

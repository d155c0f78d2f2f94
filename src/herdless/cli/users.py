"""`herdless users add|list|remove`: users' SCRAM credentials, which SASL/SCRAM and
SASL/PLAIN logins are checked against.

Online, through any broker (DescribeUserScramCredentials, AlterUserScramCredentials), as
kafka-configs.sh --bootstrap-server does: the password is salted and hashed here and
never sent. Offline, so that the first admin exists before the first start, as
kafka-storage.sh format --add-scram and kafka-configs.sh --zookeeper did: into the data
directory of a broker that is not running (`--data-dir`), or into a cluster's ZooKeeper
(`--zookeeper`), where running brokers pick the change up within a second. A ZooKeeper
that takes SASL logins is logged in to as Kafka's tools do, with the `Client` section of
the JAAS file that KAFKA_OPTS (`-Djava.security.auth.login.config=...`) or
`--zookeeper-config` names; what is written then gets Kafka's znode ACLs.

Kafka's tools make the mechanism be named; without --mechanism a user gets both,
SCRAM-SHA-256 and SCRAM-SHA-512, so that a client configured for either logs in (and
PLAIN with it). The iterations default to Kafka's, 4096. The password comes from a
prompt (on a terminal), --password-stdin or --password, and is never printed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Collection, Mapping
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
from herdless.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SALT_BYTES,
    SCRAM_MECHANISMS,
    CredentialNotFound,
    ScramCredential,
    altered_config,
    credentials_of,
    make_credential,
)

if TYPE_CHECKING:
    from kafka import KafkaAdminClient


users_app = command_group(
    "Add, list and remove users' SCRAM credentials: through a broker, or offline in a"
    " data directory or ZooKeeper before the first start."
)

MechanismOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mechanism",
        "-m",
        metavar="MECHANISM",
        help="SCRAM-SHA-256 or SCRAM-SHA-512; repeatable.",
        show_default="both",
    ),
]


@users_app.command("add")
def add(
    ctx: typer.Context,
    user: Annotated[str, typer.Argument(metavar="USER")],
    mechanism: MechanismOption = None,
    iterations: Annotated[
        int, typer.Option(help=f"PBKDF2 iterations, {MIN_ITERATIONS} to {MAX_ITERATIONS}.")
    ] = DEFAULT_ITERATIONS,
    password: Annotated[
        str | None,
        typer.Option(
            help="The password (visible to other users of this machine: prefer the prompt"
            " or --password-stdin).",
            show_default=False,
        ),
    ] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    data_dir: DataDirOption = None,
    zookeeper: ZooKeeperOption = None,
    zookeeper_config: ZooKeeperConfigOption = None,
) -> None:
    """Add a user, or set a user's password anew."""
    mechanisms = _mechanisms(mechanism)
    _check_user(user)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise fail(
            f"--iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, not {iterations}",
            USAGE,
        )
    where = offline_target(ctx, data_dir, zookeeper, zookeeper_config)
    secret = _password(password, password_stdin)
    if where is None:
        _add_online(bootstrap, user, mechanisms, secret, iterations)
    else:
        credentials = {
            m: make_credential(m, secret, os.urandom(SALT_BYTES), iterations) for m in mechanisms
        }
        _alter_offline(where, user, credentials, ())
    say(f"added user {user} ({', '.join(mechanisms)}, {iterations} iterations)")


@users_app.command("list")
def list_(
    ctx: typer.Context,
    users: Annotated[
        list[str] | None,
        typer.Argument(metavar="USER", help="Only these users.", show_default=False),
    ] = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    data_dir: DataDirOption = None,
    zookeeper: ZooKeeperOption = None,
    zookeeper_config: ZooKeeperConfigOption = None,
) -> None:
    """List users and the mechanisms and iterations of their credentials (never a key)."""
    where = offline_target(ctx, data_dir, zookeeper, zookeeper_config)
    if where is None:
        found, missing = _describe_online(bootstrap, users)
    else:
        everyone = _read_offline(where)
        found = {u: everyone[u] for u in users or everyone if u in everyone}
        missing = [u for u in users or [] if u not in everyone]
    rows = [
        {"user": user, "mechanism": mechanism, "iterations": iterations}
        for user in sorted(found)
        for mechanism, iterations in sorted(found[user].items())
    ]
    table = Table(("USER", "MECHANISM", "ITERATIONS"), [tuple(r.values()) for r in rows])
    show(View(rows, [table]), output)
    if missing:
        raise fail(f"no SCRAM credential for user(s): {', '.join(missing)}")


@users_app.command("remove")
def remove(
    ctx: typer.Context,
    user: Annotated[str, typer.Argument(metavar="USER")],
    mechanism: Annotated[
        list[str] | None,
        typer.Option(
            "--mechanism",
            "-m",
            metavar="MECHANISM",
            help="SCRAM-SHA-256 or SCRAM-SHA-512; repeatable.",
            show_default="every one the user has",
        ),
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    data_dir: DataDirOption = None,
    zookeeper: ZooKeeperOption = None,
    zookeeper_config: ZooKeeperConfigOption = None,
) -> None:
    """Remove a user's credentials: it can no longer log in with SCRAM or PLAIN."""
    chosen = _mechanisms(mechanism) if mechanism else None
    _check_user(user)
    where = offline_target(ctx, data_dir, zookeeper, zookeeper_config)
    if where is None:
        removed = _remove_online(bootstrap, user, chosen)
    else:
        removed = chosen or sorted(_read_offline(where).get(user, {}))
        if not removed:
            raise fail(f"user {user} has no SCRAM credential")
        _alter_offline(where, user, {}, removed)
    say(f"removed {', '.join(removed)} of user {user}")


# -- where: a broker, or offline ----------------------------------------------------------


def _read_offline(where: Path | OfflineZooKeeper) -> dict[str, dict[str, int]]:
    """Every user with a credential: user -> mechanism -> iterations."""
    from herdless.broker.auth.credential_store import CREDENTIALS

    configs = read_offline(where, CREDENTIALS.read, lambda store: store.user_configs())
    found = {}
    for user, config in configs.items():
        try:
            credentials = credentials_of(config)
        except ValueError as exc:
            raise fail(f"user {user!r} has an unreadable credential: {exc}") from None
        if credentials:
            found[user] = {m: c.iterations for m, c in credentials.items()}
    return found


def _alter_offline(
    where: Path | OfflineZooKeeper,
    user: str,
    upsertions: Mapping[str, ScramCredential],
    deletions: Collection[str],
) -> None:
    from herdless.broker.auth.credential_store import alter_offline as alter_data_dir

    def change(config: dict[str, str]) -> dict[str, str]:
        return altered_config(config, upsertions, deletions)

    try:
        alter_offline(
            where,
            "change its users",
            lambda data_dir: alter_data_dir(data_dir, user, upsertions, deletions),
            lambda store: store.alter_user_config(user, change),
        )
    except CredentialNotFound:
        raise fail(f"user {user} has no {', '.join(deletions)} credential") from None


# -- online: through a broker ---------------------------------------------------------------


def _add_online(
    bootstrap: str, user: str, mechanisms: list[str], password: str, iterations: int
) -> None:
    from kafka.admin import UserScramCredentialUpsertion

    upsertions = [
        UserScramCredentialUpsertion(
            user, m, password, iterations=iterations, salt=os.urandom(SALT_BYTES)
        )
        for m in mechanisms
    ]
    with connect(bootstrap) as admin:
        _altered(admin, user, upsertions, "add")


def _remove_online(bootstrap: str, user: str, mechanisms: list[str] | None) -> list[str]:
    from kafka.admin import UserScramCredentialDeletion

    with connect(bootstrap) as admin:
        if mechanisms is None:
            found, missing = _described(admin, [user])
            if missing:
                raise fail(f"user {user} has no SCRAM credential")
            mechanisms = sorted(found[user])
        deletions = [UserScramCredentialDeletion(user, m) for m in mechanisms]
        _altered(admin, user, deletions, "remove")
    return mechanisms


def _altered(admin: KafkaAdminClient, user: str, alterations: list[object], doing: str) -> None:
    errors = admin.alter_user_scram_credentials(alterations)
    if errors.get(user):
        raise fail(f"cannot {doing} user {user}: {errors[user]}")


def _describe_online(
    bootstrap: str, users: list[str] | None
) -> tuple[dict[str, dict[str, int]], list[str]]:
    with connect(bootstrap) as admin:
        return _described(admin, users)


def _described(
    admin: KafkaAdminClient, users: list[str] | None
) -> tuple[dict[str, dict[str, int]], list[str]]:
    """(user -> mechanism -> iterations, the users asked for that have none)."""
    answer = admin.describe_user_scram_credentials(list(dict.fromkeys(users)) if users else None)
    found, missing = {}, []
    for user, described in answer.items():
        if described["error"] is not None:  # one asked for that has none
            missing.append(user)
            continue
        found[user] = {
            info["mechanism"].name.replace("_", "-"): info["iterations"]
            for info in described["credential_infos"]
        }
    return found, missing


# -- the command line's values ----------------------------------------------------------------


def _mechanisms(given: list[str] | None) -> list[str]:
    if not given:
        return list(SCRAM_MECHANISMS)
    chosen = []
    for name in given:
        mechanism = name.strip().upper()
        if mechanism not in SCRAM_MECHANISMS:
            raise fail(f"--mechanism {name!r} is not one of {', '.join(SCRAM_MECHANISMS)}", USAGE)
        if mechanism not in chosen:
            chosen.append(mechanism)
    return chosen


def _check_user(user: str) -> None:
    if not user:
        raise fail("the user name must not be empty", USAGE)


def _password(given: str | None, from_stdin: bool) -> str:
    if given is not None and from_stdin:
        raise fail("give --password or --password-stdin, not both", USAGE)
    if from_stdin:
        password = sys.stdin.readline().removesuffix("\n").removesuffix("\r")
    elif given is not None:
        password = given
    elif sys.stdin.isatty():
        try:
            password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
        except typer.Abort:
            raise fail("no password given") from None
    else:
        raise fail("no password: type it at the prompt on a terminal, or give --password-stdin")
    if not password:
        raise fail("the password must not be empty", USAGE)
    return password

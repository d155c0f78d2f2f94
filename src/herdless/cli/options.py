"""Options the client commands share: where the brokers are, and how to connect to them.

Every command with --bootstrap-server also takes the client settings a secured
listener needs, as Kafka's tools and kcat take them: `--command-config FILE`, a
properties file in the Java client's names, and `-X key=value` in librdkafka's
(which win). `add_client_options` gives them to each such command, so that none is
left without; the command hands them to its clients from `client_settings()`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any

import typer

from herdless.admin.bootstrap import DEFAULT_PORT, parse_addresses


def _bootstrap(ctx: typer.Context, param: typer.CallbackParam, value: str) -> str:
    settings = {**ctx.meta.get(_FILE, {}), **ctx.meta.get(_EXTRA, {})}
    _settings.set(settings)
    given = settings.get("bootstrap.servers") or settings.get("metadata.broker.list")
    source = ctx.get_parameter_source(param.name or "")
    if given and source is not None and source.name == "DEFAULT":
        # A settings file made for kcat -F names its brokers: --bootstrap-server wins.
        value = given
    try:
        addresses = parse_addresses(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in addresses)


Bootstrap = Annotated[
    str,
    typer.Option(
        "--bootstrap-server",
        "-b",
        callback=_bootstrap,
        help="Brokers to start from: host[:port], comma-separated; the port defaults to 9092.",
    ),
]
DEFAULT_BOOTSTRAP = f"127.0.0.1:{DEFAULT_PORT}"


def command_group(help: str) -> typer.Typer:
    """A `herdless` command group, its help in click's plain layout: rich's panels cost
    a fifth of a second of imports on every --help, and its markup ate `[...]` text."""
    return typer.Typer(help=help, no_args_is_help=True, rich_markup_mode=None)


# The client settings of the command running: librdkafka's names, as
# security/client_config.py translates them. Set once, when --bootstrap-server is
# read (after both options below, which are eager). They stay here, with the
# options that set them: admin/ takes its settings as an argument of each client
# (cli/client.py's connect hands these over), since the console makes clients in a
# sampler thread, where a ContextVar the command set reads empty, and for each user
# who logs in, with that user's password: a context to read would serve neither.
_settings: ContextVar[Mapping[str, str] | None] = ContextVar("client_settings", default=None)
_FILE = "herdless.command_config"
_EXTRA = "herdless.client_settings"


def client_settings() -> Mapping[str, str]:
    """The client settings --command-config and -X gave the running command."""
    return _settings.get() or {}


def read_command_config(path: Path) -> dict[str, str]:
    """A client settings file in Kafka's names, as librdkafka settings; ValueError says
    why it will not do."""
    from herdless.broker.config import read_properties
    from herdless.security.client_config import librdkafka_config

    # ConfigError and ClientConfigError are ValueErrors.
    return librdkafka_config(read_properties(path))


def _read_command_config(ctx: typer.Context, path: Path | None) -> Path | None:
    if path is None:
        return None
    try:
        ctx.meta[_FILE] = read_command_config(path)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return path


def _read_settings(ctx: typer.Context, pairs: list[str] | None) -> list[str] | None:
    from herdless.security.client_config import ClientConfigError, librdkafka_config

    given = {}
    for pair in pairs or []:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise typer.BadParameter(f"expected key=value, got {pair!r}")
        given[key.strip()] = value
    try:
        ctx.meta[_EXTRA] = librdkafka_config(given)
    except ClientConfigError as exc:
        raise typer.BadParameter(str(exc)) from None
    return pairs


def _client_options(
    command_config: Annotated[
        Path | None,
        typer.Option(
            "--command-config",
            callback=_read_command_config,
            is_eager=True,
            expose_value=False,
            metavar="FILE",
            help="Client settings in Kafka's names (security.protocol, sasl.mechanism,"
            " sasl.jaas.config, ssl.truststore.location...), as Kafka's tools read them.",
        ),
    ] = None,
    setting: Annotated[
        list[str] | None,
        typer.Option(
            "-X",
            callback=_read_settings,
            is_eager=True,
            expose_value=False,
            metavar="KEY=VALUE",
            help="A client setting in librdkafka's names, as kcat -X; repeatable.",
        ),
    ] = None,
) -> None:
    """The options every command that connects takes, as typer declares them."""


def name_repeated_values(command: Any) -> None:
    """Help names what a repeatable option or argument takes, never its Python type
    (typer would show `--header <list[str]>`, `GROUP <list[str]>`, which say nothing to
    a user): an argument by its metavar alone (the usage line shows the repetition,
    `[GROUP]...`), an option by its metavar, or else by its own name (`--state STATE`).
    Commands declare a better metavar where there is one (`KEY=VALUE`)."""
    if hasattr(command, "commands"):
        for sub in command.commands.values():
            name_repeated_values(sub)
        return
    for param in command.params:
        if param.param_type_name == "argument" and param.nargs != 1 and param.metavar:
            param.display_type_rich = lambda ctx: None
        elif param.param_type_name == "option" and param.multiple and param.metavar is None:
            longest = max(param.opts, key=len)
            param.metavar = longest.lstrip("-").upper()


def add_client_options(command: Any) -> None:
    """Give --command-config and -X to every command under `command` (a click command
    or group, as typer builds it) that takes --bootstrap-server."""
    if hasattr(command, "commands"):
        for sub in command.commands.values():
            add_client_options(sub)
        return
    if any(param.name == "bootstrap" for param in command.params):
        command.params.extend(_client_params())


@functools.cache
def _client_params() -> list[Any]:
    template = typer.Typer(add_completion=False)
    template.command()(_client_options)
    return typer.main.get_command(template).params

"""The `herdless` command: its subcommands, `--version`, and how a bad command line fails.

Every module below imports its heavy libraries (kafka-python, librdkafka, rich,
the broker itself) inside the command that needs them, so that `--help`,
`--version` and a mistyped option answer at once.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from herdless import __version__
from herdless.admin.errors import AdminError
from herdless.cli.acls import acls_app
from herdless.cli.certs import certs
from herdless.cli.client_metrics import client_metrics_app
from herdless.cli.cluster import cluster_app
from herdless.cli.configs import configs
from herdless.cli.console import console
from herdless.cli.consume import consume
from herdless.cli.errors import FAILED, error
from herdless.cli.groups import groups_app
from herdless.cli.marshal import marshal_app
from herdless.cli.options import add_client_options, name_repeated_values
from herdless.cli.produce import produce
from herdless.cli.quotas import quotas_app
from herdless.cli.serve import serve
from herdless.cli.share_groups import share_groups_app
from herdless.cli.tokens import tokens_app
from herdless.cli.topics import topics_app
from herdless.cli.transactions import transactions_app
from herdless.cli.users import users_app

app = typer.Typer(
    help="herdless: a Kafka-compatible broker built around consumer groups.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # as command_group says
)
app.command()(serve)
app.add_typer(cluster_app, name="cluster")
app.add_typer(topics_app, name="topics")
app.add_typer(groups_app, name="groups")
app.add_typer(share_groups_app, name="share-groups")
app.add_typer(users_app, name="users")
app.add_typer(tokens_app, name="tokens")
app.add_typer(quotas_app, name="quotas")
app.add_typer(client_metrics_app, name="client-metrics")
app.command()(configs)
app.add_typer(transactions_app, name="transactions")
app.command()(produce)
app.command()(consume)
app.add_typer(marshal_app, name="marshal")
app.add_typer(acls_app, name="acls")
app.command()(console)
app.command()(certs)


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"herdless {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the herdless version and exit.",
        ),
    ] = False,
) -> None:
    """herdless: a Kafka-compatible broker built around consumer groups."""


@app.command()
def version() -> None:
    """Print the herdless version."""
    typer.echo(__version__)


def run(args: Sequence[str]) -> int:
    """Run the command line; a usage mistake is one `error:` line, exit code 2, and a
    failure of the admin client (no broker answers...) one `error:` line, exit code 1."""
    # The exception classes of the click that typer runs on (its own copy, in
    # recent typer releases).
    click_errors = sys.modules[typer.BadParameter.__module__]
    try:
        command = typer.main.get_command(app)
        add_client_options(command)
        name_repeated_values(command)
        code = command.main(args=list(args), prog_name="herdless", standalone_mode=False)
    except click_errors.ClickException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            typer.echo(exc.format_message())
            return 0
        message = exc.format_message().rstrip(".")
        if message[:1].isupper() and message[1:2].islower():
            message = message[0].lower() + message[1:]
        context = getattr(exc, "ctx", None)
        if context is not None:
            message += f" (see '{context.command_path} --help')"
        error(message)
        return exc.exit_code
    except AdminError as exc:
        # Here alone, so that every command says the same thing the same way.
        error(str(exc))
        return FAILED
    except KeyboardInterrupt:
        # Ctrl-C: the command stops where it was, as a shell expects (128 + SIGINT).
        return 130
    return code if isinstance(code, int) else 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))

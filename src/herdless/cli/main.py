"""The `herdless` command."""

from __future__ import annotations

import typer

from herdless import __version__
from herdless.cli.groups import groups_app
from herdless.cli.marshal import marshal_app
from herdless.cli.serve import serve
from herdless.cli.topics import topics_app

app = typer.Typer(
    help="herdless: a Kafka-compatible broker built around consumer groups.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(serve)
app.add_typer(topics_app, name="topics")
app.add_typer(groups_app, name="groups")
app.add_typer(marshal_app, name="marshal")


@app.command()
def version() -> None:
    """Print the herdless version."""
    typer.echo(__version__)


def main() -> None:
    app()

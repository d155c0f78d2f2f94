"""`herdless console`: the web console against any brokers, herdless or Kafka.

`herdless serve --console-port P` starts the same console beside its broker;
both open it here, so a port that cannot be had fails the same way.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, client_settings
from herdless.cli.output import note

if TYPE_CHECKING:
    from herdless.console.server import Console

SslKeystoreOption = Annotated[
    Path | None,
    typer.Option(
        "--ssl-keystore",
        metavar="FILE",
        help="Serve HTTPS with the private key and certificate chain in this PEM file"
        " (as ssl.keystore.type=PEM; `herdless certs` writes one as broker.pem).",
    ),
]
DEFAULT_CONSOLE_PORT = 8080
DEFAULT_INTERVAL_S = 2.0
# Shorter looks would be a load on the brokers that no person watching needs.
MIN_INTERVAL_S = 0.2


def console(
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    host: Annotated[str, typer.Option(help="Address the console listens on.")] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(min=0, max=65_535, help="Port the console listens on; 0 for any free one."),
    ] = DEFAULT_CONSOLE_PORT,
    interval: Annotated[
        float,
        typer.Option(
            min=MIN_INTERVAL_S,
            metavar="SECONDS",
            help="How often to ask the brokers and refresh the pages.",
        ),
    ] = DEFAULT_INTERVAL_S,
    ssl_keystore: SslKeystoreOption = None,
    metrics_url: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics-url",
            metavar="URL",
            help="A broker's Prometheus endpoint (http://HOST:PORT/metrics), where the"
            " Clients page reads the metrics clients push (KIP-714); one per broker.",
        ),
    ] = None,
    login: Annotated[
        bool,
        typer.Option(
            "--login",
            help="Ask for a user name and password, checked by logging in to the brokers"
            " as that user over SASL (the client settings must name a SASL listener), and"
            " show each user what they may describe.",
        ),
    ] = False,
) -> None:
    """Serve a web console for the brokers at --bootstrap-server: brokers, topics, groups
    with their lag over time, and rebalances. Ctrl-C stops it."""
    from herdless.cli.client import require_reachable

    checker = None
    if login:
        from herdless.console.sasl_login import SaslLogin

        try:
            checker = SaslLogin(bootstrap, client_settings())
        except ValueError as exc:
            raise fail(f"--login: {exc}", USAGE) from None
    web = open_console(
        host,
        port,
        interval,
        ssl_keystore,
        login_required=login,
        settings=client_settings(),
        metrics_urls=metrics_url or (),
    )
    try:
        require_reachable(bootstrap)
        web.start(bootstrap, checker)
        note(f"console at {web.url} for the brokers at {bootstrap}; Ctrl-C stops it")
        while True:
            time.sleep(3600)
    finally:
        web.stop()


def open_console(
    host: str,
    port: int,
    interval_s: float = DEFAULT_INTERVAL_S,
    ssl_keystore: Path | None = None,
    *,
    login_required: bool = False,
    settings: Mapping[str, str] | None = None,
    metrics_urls: Sequence[str] = (),
) -> Console:
    """A console listening on host:port (HTTPS with the key and certificates in
    `ssl_keystore`), whose client connects with `settings` (librdkafka's names), or the
    command's error saying why it cannot."""
    import ssl

    from herdless.console.server import Console, tls_context

    tls = None
    if ssl_keystore is not None:
        try:
            tls = tls_context(str(ssl_keystore))
        except (OSError, ssl.SSLError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise fail(
                f"cannot serve the console over TLS with {ssl_keystore}: not a PEM file with"
                f" a private key and its certificate ({reason})"
            ) from None
    try:
        return Console(
            host,
            port,
            interval_s,
            tls=tls,
            login_required=login_required,
            client_settings=settings,
            metrics_urls=metrics_urls,
        )
    except OSError as exc:
        raise fail(f"cannot listen for the console on {host}:{port}: {_reason(exc)}") from None


def _reason(exc: OSError) -> str:
    reason = exc.strerror or str(exc)  # "Address already in use"
    return reason[:1].lower() + reason[1:]

"""Options the client commands share: where the brokers are."""

from __future__ import annotations

from typing import Annotated

import typer

DEFAULT_PORT = 9092


def parse_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """`host[:port]` entries, comma-separated, as (host, port); the port defaults to 9092,
    as in every Kafka tool. IPv6 hosts go in brackets when a port follows: `[::1]:9093`."""
    addresses = []
    for entry in bootstrap.split(","):
        entry = entry.strip()
        if not entry:
            continue
        if entry.startswith("["):
            host, _, rest = entry[1:].partition("]")
            port = rest.removeprefix(":") if rest.startswith(":") else ""
            if rest and not rest.startswith(":"):
                raise ValueError(f"{entry!r} is not host:port")
        elif entry.count(":") > 1:  # a bare IPv6 address
            host, port = entry, ""
        else:
            host, _, port = entry.partition(":")
        if not host:
            raise ValueError(f"{entry!r} names no host")
        if not port:
            addresses.append((host, DEFAULT_PORT))
            continue
        if not port.isdigit() or not 0 < int(port) <= 65_535:
            raise ValueError(f"{entry!r} has no port between 1 and 65535")
        addresses.append((host, int(port)))
    if not addresses:
        raise ValueError("no broker address given")
    return addresses


def _bootstrap(value: str) -> str:
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

"""What every `herdless` client command shares: one admin connection, one way to fail.

The commands are ordinary Kafka clients (kafka-python), so they work against any
Kafka-compatible broker; every failure reaches the user as one line naming it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from kafka import KafkaAdminClient
from kafka.errors import (
    BrokerResponseError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from rich.console import Console

console = Console()

Bootstrap = Annotated[str, typer.Option("--bootstrap-server", "-b", help="host:port of a broker.")]

# How long to keep trying to bootstrap from a server that accepts connections but
# does not answer as a broker (one that refuses them fails at once, in
# require_reachable). kafka-python waits 30 s by default, long for a command typed
# at a prompt; a broker that is up answers in milliseconds.
BOOTSTRAP_TIMEOUT_MS = 5_000
REQUEST_TIMEOUT_MS = 10_000


def fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(1)


def require_reachable(bootstrap: str, timeout_s: float = 5.0) -> None:
    """Fail fast, naming the address, when no bootstrap server accepts a connection.

    Kafka clients retry an absent broker for tens of seconds before giving up.
    """
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
                return
        except (OSError, ValueError):
            continue
    raise fail(f"no broker answers at {bootstrap}")


class _Admin(KafkaAdminClient):
    """kafka-python's admin client, minus its decoding of ACL operation bits.

    DescribeGroups answers carry the operations the caller may perform; kafka-python
    turns them into enums and raises ValueError on a bit it does not know, which
    some Kafka-compatible brokers (tansu) set. This command never shows them.
    """

    def _process_acl_operations(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj.pop("authorized_operations", None)
        return obj


@contextmanager
def connect(bootstrap: str) -> Iterator[KafkaAdminClient]:
    """An admin client; any failure becomes one line naming it, and exit code 1."""
    require_reachable(bootstrap)
    try:
        admin = _Admin(
            bootstrap_servers=bootstrap,
            client_id="herdless-cli",
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
        )
    except KafkaError:
        raise fail(f"no broker answers at {bootstrap}") from None
    except Exception as exc:  # e.g. a malformed address
        raise fail(f"cannot connect to {bootstrap!r}: {exc}") from None
    try:
        yield admin
    except typer.Exit:
        raise
    except KafkaError as exc:
        raise fail(explain(exc, bootstrap)) from None
    except Exception as exc:
        # An answer the client could not make sense of: still one clear line, since
        # a traceback tells an operator less than the exception's own words.
        raise fail(f"unexpected {type(exc).__name__} talking to {bootstrap}: {exc}") from None
    finally:
        admin.close()


def explain(exc: KafkaError, bootstrap: str) -> str:
    if isinstance(exc, KafkaTimeoutError):
        return f"the broker at {bootstrap} did not answer in time ({exc})"
    if isinstance(exc, UnsupportedVersionError):
        return f"the broker at {bootstrap} does not support a request this command needs ({exc})"
    if isinstance(exc, BrokerResponseError):
        # kafka-python's own text often embeds the whole request; the error's name,
        # its description and a short detail are what the operator needs.
        detail = str(exc.args[0]) if exc.args else ""
        suffix = f" ({detail})" if detail and len(detail) <= 200 else ""
        return f"the broker answered {exc.message}: {exc.description}{suffix}"
    return str(exc)

"""What a request's handler knows of the connection it came on (Kafka's RequestContext)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from herdless.security.listeners import SecurityProtocol
from herdless.security.principal import ANONYMOUS, KafkaPrincipal

# Kafka's ClientInformation.UNKNOWN_NAME_OR_VERSION.
UNKNOWN_SOFTWARE = "unknown"


@dataclass(slots=True)
class ClientSoftware:
    """The client software a connection's ApiVersions (v3+) named; "unknown" before."""

    name: str = UNKNOWN_SOFTWARE
    version: str = UNKNOWN_SOFTWARE


class RequestsBehind(Protocol):
    """The requests a client has sent on the connection behind the one being handled,
    which must be answered first (responses leave in request order)."""

    def waiting(self) -> bool:
        """Whether a whole request waits behind the one being handled."""
        ...

    def wake_on_arrival(self, waiter: asyncio.Future[None]) -> None:
        """Resolve `waiter` once a whole request waits behind the one being handled (at
        once if one does already)."""
        ...


class _NoRequestsBehind:
    """A session made outside a connection (tests, the broker's own calls)."""

    def waiting(self) -> bool:
        return False

    def wake_on_arrival(self, waiter: asyncio.Future[None]) -> None:
        pass


NO_REQUESTS_BEHIND: RequestsBehind = _NoRequestsBehind()


@dataclass(frozen=True, slots=True)
class ClientSession:
    principal: KafkaPrincipal
    # The listener the connection came in on, by name (PLAINTEXT, INTERNAL, ...).
    listener: str
    security_protocol: SecurityProtocol
    # The client's IP address, as ACLs match hosts.
    client_address: str
    # The SASL mechanism it authenticated with, if any.
    sasl_mechanism: str | None = None
    # Called once the connection has closed (Kafka's connection disconnect listeners):
    # what a handler keeps for this connection alone, such as a share session, ends
    # with it. Shared by the copies SASL makes of the session.
    on_close: list[Callable[[], None]] = field(default_factory=list, compare=False)
    # The client's port, and its software once ApiVersions names it (KIP-511); shared by
    # SASL's copies of the session, as on_close is.
    client_port: int = 0
    software: ClientSoftware = field(default_factory=ClientSoftware, compare=False)
    # What the client sent behind the request being handled: a long poll (a Fetch
    # waiting for records) answers as soon as another request waits, instead of holding
    # it up for the rest of its wait.
    behind: RequestsBehind = field(default=NO_REQUESTS_BEHIND, compare=False)


def anonymous(client_address: str, listener: str = "PLAINTEXT") -> ClientSession:
    return ClientSession(ANONYMOUS, listener, SecurityProtocol.PLAINTEXT, client_address)

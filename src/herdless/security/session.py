"""What a request's handler knows of the connection it came on (Kafka's RequestContext)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from herdless.security.listeners import SecurityProtocol
from herdless.security.principal import ANONYMOUS, KafkaPrincipal

# Kafka's ClientInformation.UNKNOWN_NAME_OR_VERSION.
UNKNOWN_SOFTWARE = "unknown"


@dataclass(slots=True)
class ClientSoftware:
    """The client software a connection's ApiVersions (v3+) named; "unknown" before."""

    name: str = UNKNOWN_SOFTWARE
    version: str = UNKNOWN_SOFTWARE


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


def anonymous(client_address: str, listener: str = "PLAINTEXT") -> ClientSession:
    return ClientSession(ANONYMOUS, listener, SecurityProtocol.PLAINTEXT, client_address)

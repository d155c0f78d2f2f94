"""What a request's handler knows of the connection it came on (Kafka's RequestContext)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from herdless.security.listeners import SecurityProtocol
from herdless.security.principal import ANONYMOUS, KafkaPrincipal


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


def anonymous(client_address: str, listener: str = "PLAINTEXT") -> ClientSession:
    return ClientSession(ANONYMOUS, listener, SecurityProtocol.PLAINTEXT, client_address)

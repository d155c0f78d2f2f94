"""What a request's handler knows of the connection it came on (Kafka's RequestContext)."""

from __future__ import annotations

from dataclasses import dataclass

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


def anonymous(client_address: str, listener: str = "PLAINTEXT") -> ClientSession:
    return ClientSession(ANONYMOUS, listener, SecurityProtocol.PLAINTEXT, client_address)

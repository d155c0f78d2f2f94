"""Listeners as Kafka configures them: `listeners`, `advertised.listeners`,
`listener.security.protocol.map` and `inter.broker.listener.name`.

A listener is a name, the security protocol its connections speak, and where it binds.
Its name is what per-listener settings (`listener.name.<name>.ssl.keystore.location`)
and the brokers' registrations refer to; clients are told, in Metadata, each broker's
address on the listener they came in on.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass


class SecurityProtocol(enum.StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


# Kafka's default map: each protocol's name is a listener of that protocol.
DEFAULT_PROTOCOL_MAP: Mapping[str, SecurityProtocol] = {p.value: p for p in SecurityProtocol}

_LISTENER = re.compile(
    r"^(?P<name>[A-Za-z0-9_-]+)://(?P<host>\[[^\]]*\]|[^:\[\]]*):(?P<port>-?\d+)$"
)


class ListenerError(ValueError):
    """A listener setting that cannot be used; the message names the setting."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener of a broker: its name, protocol, and host and port."""

    listener: str
    security_protocol: SecurityProtocol
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


def parse_protocol_map(value: str) -> dict[str, SecurityProtocol]:
    """`listener.security.protocol.map`: NAME:PROTOCOL pairs, comma-separated."""
    mapping: dict[str, SecurityProtocol] = {}
    for entry in _entries(value):
        name, sep, protocol = entry.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ListenerError(
                f"listener.security.protocol.map entries are NAME:PROTOCOL, not {entry!r}"
            )
        if name in mapping:
            raise ListenerError(f"listener.security.protocol.map names {name} twice")
        mapping[name] = _protocol(protocol, "listener.security.protocol.map")
    return mapping


def parse_listeners(
    value: str, protocol_map: Mapping[str, SecurityProtocol], setting: str = "listeners"
) -> list[Endpoint]:
    """`listeners` or `advertised.listeners`: NAME://host:port, comma-separated. An empty
    host is every interface, as Kafka reads it."""
    endpoints: list[Endpoint] = []
    for entry in _entries(value):
        match = _LISTENER.match(entry)
        if match is None:
            raise ListenerError(f"{setting} entries look like NAME://host:port, not {entry!r}")
        name = match["name"].upper()
        protocol = protocol_map.get(name)
        if protocol is None:
            known = ", ".join(protocol_map)
            raise ListenerError(
                f"{setting}: listener {name} has no security protocol in"
                f" listener.security.protocol.map (mapped: {known})"
            )
        port = int(match["port"])
        if not 0 <= port <= 65_535:
            raise ListenerError(
                f"{setting}: port must be between 0 and 65535, not {port} (in {entry!r})"
            )
        endpoints.append(Endpoint(name, protocol, match["host"].strip("[]"), port))
    if not endpoints:
        raise ListenerError(f"{setting} must name at least one listener")
    names = [e.listener for e in endpoints]
    for name in names:
        if names.count(name) > 1:
            raise ListenerError(f"{setting} names the listener {name} more than once")
    ports = [e.port for e in endpoints if e.port != 0]
    for port in ports:
        if ports.count(port) > 1:
            raise ListenerError(f"{setting} uses port {port} for more than one listener")
    return endpoints


def _entries(value: str) -> list[str]:
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def _protocol(text: str, setting: str) -> SecurityProtocol:
    try:
        return SecurityProtocol(text)
    except ValueError:
        known = ", ".join(p.value for p in SecurityProtocol)
        raise ListenerError(f"{setting}: no security protocol {text!r}; known: {known}") from None


def inter_broker_listener(
    endpoints: list[Endpoint], listener_name: str | None, inter_broker_protocol: str | None
) -> str:
    """The listener brokers reach each other on: `inter.broker.listener.name`, else the
    listener named after `security.inter.broker.protocol` (Kafka's PLAINTEXT default).
    herdless's leniency: with neither set and no PLAINTEXT listener, the first listener,
    so that one broker with one secured listener needs no further setting."""
    names = [e.listener for e in endpoints]
    if listener_name is not None and inter_broker_protocol is not None:
        raise ListenerError(
            "set inter.broker.listener.name or security.inter.broker.protocol, not both"
        )
    if listener_name is not None:
        wanted, setting = listener_name.strip().upper(), "inter.broker.listener.name"
    elif inter_broker_protocol is not None:
        wanted = _protocol(inter_broker_protocol.strip().upper(), "security.inter.broker.protocol")
        setting = "security.inter.broker.protocol"
    else:
        return "PLAINTEXT" if "PLAINTEXT" in names else names[0]
    if wanted not in names:
        raise ListenerError(
            f"{setting} is {wanted}, which is not among the listeners ({', '.join(names)})"
        )
    return str(wanted)

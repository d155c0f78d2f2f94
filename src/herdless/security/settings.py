"""The broker's security settings as Kafka names them, with Kafka's per-listener overrides.

A setting may be given for one listener (`listener.name.<listener>.ssl.keystore.location`)
and, for SASL, for one mechanism of a listener
(`listener.name.<listener>.<mechanism>.sasl.jaas.config`); the most specific wins, then
the broker-wide setting, then the default. Listener and mechanism names are lower case
in these keys, as Kafka writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# The settings this broker reads, and the prefixes of whole families of them.
SETTINGS = frozenset(
    {
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "sasl.enabled.mechanisms",
        "sasl.mechanism.inter.broker.protocol",
        "connections.max.reauth.ms",
        "connection.failed.authentication.delay.ms",
        # herdless's own: failed logins an address may make within the window.
        "connection.failed.authentication.limit",
        "connection.failed.authentication.window.ms",
        "authorizer.class.name",
        "super.users",
        "allow.everyone.if.no.acl.found",
        "principal.builder.class",
        "zookeeper.set.acl",
        # The JAAS file whose Client section logs in to ZooKeeper (Kafka's Java system
        # property, here also a broker setting).
        "java.security.auth.login.config",
        # Encrypts the passwords among dynamic broker configs where they are stored.
        "password.encoder.secret",
    }
)
PREFIXES = ("ssl.", "sasl.", "listener.name.", "zookeeper.ssl.", "zookeeper.sasl.")


def is_security_setting(key: str) -> bool:
    return key in SETTINGS or key.startswith(PREFIXES)


@dataclass(frozen=True)
class SecuritySettings:
    raw: Mapping[str, str] = field(default_factory=dict)

    def get(
        self,
        key: str,
        default: str | None = None,
        *,
        listener: str | None = None,
        mechanism: str | None = None,
    ) -> str | None:
        """The setting for `listener` (and its `mechanism`), else broker-wide, else default."""
        candidates = []
        if listener is not None:
            prefix = f"listener.name.{listener.lower()}."
            if mechanism is not None:
                candidates.append(f"{prefix}{mechanism.lower()}.{key}")
            candidates.append(f"{prefix}{key}")
        candidates.append(key)
        for candidate in candidates:
            value = self.raw.get(candidate)
            if value is not None:
                return value.strip()
        return default

    def get_list(
        self,
        key: str,
        default: str = "",
        *,
        listener: str | None = None,
        mechanism: str | None = None,
    ) -> list[str]:
        """A comma-separated setting as its entries, blanks left out."""
        value = self.get(key, default, listener=listener, mechanism=mechanism) or ""
        return [entry.strip() for entry in value.split(",") if entry.strip()]

    def with_settings(self, **updates: str) -> SecuritySettings:
        """These settings with some replaced (keys with dots, given as a mapping)."""
        return SecuritySettings({**self.raw, **updates})

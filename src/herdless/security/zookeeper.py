"""How a broker or tool logs in to ZooKeeper, and whether its znodes get ACLs, read from
Kafka's settings the way Kafka 3.x in ZooKeeper mode reads them.

- `java.security.auth.login.config`: the JAAS file (Kafka takes it as a Java system
  property, usually through KAFKA_OPTS; herdless also as a broker setting);
- `zookeeper.sasl.clientconfig`: the section of that file to log in with, `Client` by
  default. No such section: no SASL, unless the section was named explicitly;
- `zookeeper.sasl.client`: `false` turns SASL off, which Kafka refuses while the
  section is there (JaasUtils.isZkSaslEnabled);
- `zookeeper.set.acl`: give every znode created Kafka's ACLs (see
  herdless.cluster.zookeeper.znode_acls); refused without a SASL login, as Kafka refuses it.

The section's entry holds a username and password, as ZooKeeper's DigestLoginModule
takes them; the login is SASL DIGEST-MD5, the mechanism ZooKeeper offers for them.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from herdless.protocol.config_values import InvalidConfigValue, parse_boolean
from herdless.security.jaas import JaasConfigError, parse_jaas_file

LOGIN_CONFIG = "java.security.auth.login.config"
SASL_CLIENT = "zookeeper.sasl.client"
SASL_CLIENT_CONFIG = "zookeeper.sasl.clientconfig"
SET_ACL = "zookeeper.set.acl"
# Kafka's ZooKeeper-over-TLS switch; its other zookeeper.ssl.* settings only count with it.
SSL_CLIENT_ENABLE = "zookeeper.ssl.client.enable"
DEFAULT_SECTION = "Client"
# The Java system properties Kafka's scripts pass in KAFKA_OPTS (`-Dkey=value`).
SYSTEM_PROPERTIES = (LOGIN_CONFIG, SASL_CLIENT, SASL_CLIENT_CONFIG)
MECHANISM = "DIGEST-MD5"
_KERBEROS_MODULES = ("com.sun.security.auth.module.Krb5LoginModule",)


class ZooKeeperSecurityError(ValueError):
    """Settings for ZooKeeper's login that cannot be used; the message names the setting
    or the file (never a password)."""


@dataclass(frozen=True)
class ZooKeeperLogin:
    username: str
    password: str = field(repr=False)

    def sasl_options(self) -> dict[str, str]:
        """What kazoo's `sasl_options` takes (handed on to pure-sasl)."""
        return {"mechanism": MECHANISM, "username": self.username, "password": self.password}


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """No login and no ACLs by default: ZooKeeper as it was before security."""

    login: ZooKeeperLogin | None = None
    set_acl: bool = False

    def for_tools(self) -> ZooKeeperSecurity:
        """As Kafka's tools connect (kafka-configs.sh --zookeeper): ACLs whenever they
        log in, so that what a tool writes is never open to everyone while the brokers'
        znodes are closed."""
        return ZooKeeperSecurity(self.login, self.set_acl or self.login is not None)


def kafka_opts_properties(kafka_opts: str | None) -> dict[str, str]:
    """The ZooKeeper login's system properties among KAFKA_OPTS's `-Dkey=value` options."""
    try:
        words = shlex.split(kafka_opts or "")
    except ValueError as exc:
        raise ZooKeeperSecurityError(f"KAFKA_OPTS cannot be read: {exc}") from None
    found = {}
    for word in words:
        key, equals, value = word.removeprefix("-D").partition("=")
        if word.startswith("-D") and equals and key in SYSTEM_PROPERTIES:
            found[key] = value
    return found


def login_config_path(settings: Mapping[str, str]) -> str | None:
    """The JAAS file the settings name; None for none."""
    path = (settings.get(LOGIN_CONFIG) or "").strip()
    return path or None


def zookeeper_security(settings: Mapping[str, str], jaas_text: str | None) -> ZooKeeperSecurity:
    """The login and ACL choice `settings` ask for, given the text of the JAAS file they
    name (None when they name none). ZooKeeperSecurityError says what will not do."""
    if _boolean(settings, SSL_CLIENT_ENABLE, False):
        # Refused rather than ignored: a broker that meant to reach ZooKeeper over TLS
        # must not talk to it in the clear.
        raise ZooKeeperSecurityError(
            f"{SSL_CLIENT_ENABLE}=true: herdless does not reach ZooKeeper over TLS; use its"
            " plaintext port with a SASL login, on a network only the brokers reach"
        )
    sasl_client = _boolean(settings, SASL_CLIENT, True)
    set_acl = _boolean(settings, SET_ACL, False)
    named = (settings.get(SASL_CLIENT_CONFIG) or "").strip()
    section = named or DEFAULT_SECTION
    path = login_config_path(settings)
    login = None
    if jaas_text is not None:
        try:
            sections = parse_jaas_file(jaas_text, f"{LOGIN_CONFIG} {path}")
        except JaasConfigError as exc:
            raise ZooKeeperSecurityError(str(exc)) from None
        entries = sections.get(section)
        if entries is None and named:
            raise ZooKeeperSecurityError(
                f"{SASL_CLIENT_CONFIG}={named}, but {path} has no section {named}"
                f" (it has {', '.join(sections) or 'none'})"
            )
        if entries is not None:
            if not sasl_client:
                raise ZooKeeperSecurityError(
                    f"{path} has a {section} section for ZooKeeper, but {SASL_CLIENT}=false"
                    " turns SASL off: remove one or the other"
                )
            login = _login(entries[0].login_module, entries[0].options, f"{path}, {section}")
    if set_acl and login is None:
        raise ZooKeeperSecurityError(
            f"{SET_ACL}=true needs a SASL login to ZooKeeper: a {section} section in the JAAS"
            f" file named by {LOGIN_CONFIG}"
            + (f" ({path} has none)" if path else " (none is named)")
        )
    return ZooKeeperSecurity(login, set_acl)


def _login(module: str, options: Mapping[str, str], where: str) -> ZooKeeperLogin:
    if module in _KERBEROS_MODULES:
        raise ZooKeeperSecurityError(
            f"{where}: herdless logs in to ZooKeeper with DIGEST-MD5 only, not Kerberos;"
            " use org.apache.zookeeper.server.auth.DigestLoginModule with username and"
            " password"
        )
    missing = [key for key in ("username", "password") if not options.get(key)]
    if missing:
        raise ZooKeeperSecurityError(f"{where}: the login module needs {' and '.join(missing)}")
    return ZooKeeperLogin(options["username"], options["password"])


def _boolean(settings: Mapping[str, str], key: str, default: bool) -> bool:
    raw = settings.get(key) or ""
    if not raw.strip():
        return default
    try:
        return parse_boolean(key, raw)
    except InvalidConfigValue as exc:
        raise ZooKeeperSecurityError(str(exc)) from None

"""A SASL listener's Kerberos identity, from Kafka's settings:

    listener.name.sasl_plaintext.gssapi.sasl.jaas.config=\\
        com.sun.security.auth.module.Krb5LoginModule required \\
        useKeyTab=true storeKey=true keyTab="/etc/kafka/kafka.keytab" \\
        principal="kafka/broker1.example.com@EXAMPLE.COM";
    sasl.kerberos.service.name=kafka
    sasl.kerberos.principal.to.local.rules=RULE:[1:$1@$0](.*@EXAMPLE\\.COM)s/@.*//,DEFAULT

The JAAS entry is looked up as the inter-broker login's is (the listener's and
mechanism's, then the listener's, then sasl.jaas.config). Kerberos itself (the realm, its
KDCs) is configured as for any MIT Kerberos program: krb5.conf, or KRB5_CONFIG.
"""

from __future__ import annotations

from dataclasses import dataclass

from herdless.broker.config import BrokerConfig, ConfigError
from herdless.protocol.config_values import InvalidConfigValue, parse_boolean
from herdless.security.jaas import JaasConfigError, parse_jaas_config
from herdless.security.kerberos_names import KerberosName, KerberosNameError, split_rules
from herdless.security.sasl_gssapi import (
    GSSAPI,
    GssapiAcceptor,
    GssapiMissing,
    GssapiSetupError,
)

# herdless's default; Kafka's broker has none, and its clients are told it in their settings.
DEFAULT_SERVICE_NAME = "kafka"


@dataclass(frozen=True)
class KerberosIdentity:
    """The broker's Kerberos principal and keytab, from a listener's Krb5LoginModule entry,
    and the service name clients ask tickets for."""

    principal: str
    keytab: str | None
    service_name: str
    # The setting it came from, to name in errors.
    key: str


def kerberos_identity(config: BrokerConfig, listener: str) -> KerberosIdentity:
    """The broker's Kerberos identity on `listener`; ConfigError names the setting that
    cannot be used."""
    settings = config.security
    key = f"listener.name.{listener.lower()}.gssapi.sasl.jaas.config"
    text = settings.get("sasl.jaas.config", listener=listener, mechanism=GSSAPI)
    if text is None:
        raise ConfigError(
            f"{key} (or sasl.jaas.config) must give the broker's Kerberos login:"
            " com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true"
            ' storeKey=true keyTab="/path/kafka.keytab" principal="kafka/host@REALM";'
        )
    try:
        entry = parse_jaas_config(text)
    except JaasConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    if not entry.login_module.endswith("Krb5LoginModule"):
        raise ConfigError(f"{key}: GSSAPI logs in with Krb5LoginModule, not {entry.login_module}")
    options = entry.options
    try:
        use_key_tab = parse_boolean(f"{key} useKeyTab", options.get("useKeyTab", "false"))
    except InvalidConfigValue as exc:
        raise ConfigError(str(exc)) from None
    if not use_key_tab:
        raise ConfigError(f"{key}: the broker takes its keys from a keytab: set useKeyTab=true")
    principal = options.get("principal")
    if not principal:
        raise ConfigError(f'{key} must name the broker\'s principal (principal="kafka/host@REALM")')
    service_name = _service_name(config, listener, options.get("serviceName"))
    try:
        principal_service = KerberosName.parse(principal).service_name
    except KerberosNameError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    if principal_service != service_name:
        # Clients ask for tickets to <service name>/<broker host>: none would be accepted.
        raise ConfigError(
            f"{key}: the principal {principal} is not of service {service_name}"
            " (sasl.kerberos.service.name), which clients ask tickets for"
        )
    return KerberosIdentity(principal, options.get("keyTab"), service_name, key)


def kerberos_acceptor(config: BrokerConfig, listener: str) -> GssapiAcceptor:
    """What `listener` accepts with GSSAPI; ConfigError names the setting that cannot be
    used, before anything is bound."""
    identity = kerberos_identity(config, listener)
    rules = split_rules(
        config.security.get("sasl.kerberos.principal.to.local.rules", listener=listener)
    )
    try:
        return GssapiAcceptor.from_keytab(identity.principal, identity.keytab, rules)
    except GssapiMissing as exc:
        raise ConfigError(f"listener {listener} enables GSSAPI: {exc}") from None
    except GssapiSetupError as exc:
        raise ConfigError(f"{identity.key}: {exc}") from None
    except KerberosNameError as exc:
        raise ConfigError(f"sasl.kerberos.principal.to.local.rules: {exc}") from None


def _service_name(config: BrokerConfig, listener: str, in_jaas: str | None) -> str:
    """sasl.kerberos.service.name, which the JAAS entry's serviceName may give instead;
    both, differing, is Kafka's configuration error."""
    setting = config.security.get("sasl.kerberos.service.name", listener=listener)
    if in_jaas and setting and in_jaas != setting:
        raise ConfigError(
            f"Conflicting serviceName values found in JAAS and Kafka configs value in JAAS"
            f" file {in_jaas}, value in Kafka config {setting}"
        )
    return in_jaas or setting or DEFAULT_SERVICE_NAME

"""How this broker connects to the others: TLS and SASL as its inter-broker listener asks,
logging in with `sasl.mechanism.inter.broker.protocol` as Kafka's brokers do:

- PLAIN and SCRAM as the user the listener's JAAS entry names (username, password);
- GSSAPI as the principal of the listener's Krb5LoginModule entry, with its keytab
  (the same entry the listener accepts tickets with), asking tickets for
  `sasl.kerberos.service.name` at each peer's host;
- OAUTHBEARER with Kafka's unsecured login: a token made from the listener's
  OAuthBearerLoginModule options (`unsecuredLoginStringClaim_sub=...`), for development.
"""

from __future__ import annotations

from collections.abc import Callable

from herdless.broker.auth.kerberos import kerberos_identity
from herdless.broker.auth.kerberos_login import DEFAULT_MIN_TIME_BEFORE_RELOGIN_MS, KerberosLogin
from herdless.broker.auth.tls import client_context
from herdless.broker.clock import wall_ms
from herdless.broker.config import BrokerConfig, ConfigError
from herdless.broker.network.listeners import DEFAULT_MECHANISMS, config_int
from herdless.broker.peers.connection import PeerSecurity
from herdless.security.jaas import JaasConfigError, parse_jaas_config
from herdless.security.oauthbearer_login import UnsecuredLogin
from herdless.security.sasl_client import SaslClient, sasl_client
from herdless.security.sasl_gssapi import GSSAPI, GssapiMissing
from herdless.security.sasl_oauthbearer import OAUTHBEARER
from herdless.security.sasl_plain import PLAIN
from herdless.security.scram import SCRAM_MECHANISMS

# The mechanisms this broker logs in to other brokers with.
INTER_BROKER_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, GSSAPI, OAUTHBEARER)
LOGIN_HANDLER = "sasl.login.callback.handler.class"


def inter_broker_security(config: BrokerConfig) -> PeerSecurity:
    """How this broker connects to the others; ConfigError names a setting that cannot be
    used. The mechanism is `sasl.mechanism.inter.broker.protocol`, else (herdless's
    default) the inter-broker listener's first enabled one."""
    name = config.inter_broker_listener()
    endpoint = next(e for e in config.listener_endpoints() if e.listener == name)
    ssl_context = None
    if endpoint.security_protocol.uses_tls:
        ssl_context = client_context(config.security, name)
    if not endpoint.security_protocol.uses_sasl:
        return PeerSecurity(ssl_context)
    settings = config.security
    enabled = [
        m.upper()
        for m in settings.get_list("sasl.enabled.mechanisms", DEFAULT_MECHANISMS, listener=name)
    ]
    mechanism = (settings.get("sasl.mechanism.inter.broker.protocol") or enabled[0]).upper()
    if mechanism not in INTER_BROKER_MECHANISMS:
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol: {mechanism} is not served between brokers"
            f" (served: {', '.join(INTER_BROKER_MECHANISMS)})"
        )
    if mechanism not in enabled:
        # Kafka's rule: the others would refuse the mechanism this broker logs in with.
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol: {mechanism} must be among the"
            f" sasl.enabled.mechanisms of the inter-broker listener {name}"
            f" ({', '.join(enabled)})"
        )
    if mechanism == GSSAPI:
        return PeerSecurity(ssl_context, _kerberos_login(config, name).client)
    if mechanism == OAUTHBEARER:
        return PeerSecurity(ssl_context, _oauthbearer_login(config, name))
    return PeerSecurity(ssl_context, _password_login(config, name, mechanism))


def _password_login(
    config: BrokerConfig, listener: str, mechanism: str
) -> Callable[[str], SaslClient]:
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.security.get("sasl.jaas.config", listener=listener, mechanism=mechanism)
    if text is None:
        raise ConfigError(
            f"{key} (or sasl.jaas.config) must give the username and password this broker"
            " logs in to the others with"
        )
    try:
        options = parse_jaas_config(text).options
    except JaasConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    username, password = options.get("username"), options.get("password")
    if not username or not password:
        raise ConfigError(f"{key} must give both username and password")
    return lambda host: sasl_client(mechanism, username, password)


def _oauthbearer_login(config: BrokerConfig, listener: str) -> Callable[[str], SaslClient]:
    settings = config.security
    handler = settings.get(LOGIN_HANDLER, listener=listener, mechanism=OAUTHBEARER)
    if handler:
        raise ConfigError(
            f"{LOGIN_HANDLER}: brokers log in to each other with OAUTHBEARER's unsecured"
            f" tokens only, not through {handler}"
        )
    key = f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config"
    text = settings.get("sasl.jaas.config", listener=listener, mechanism=OAUTHBEARER)
    if text is None:
        raise ConfigError(
            f"{key} (or sasl.jaas.config) must give the principal this broker logs in as:"
            " org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
            ' unsecuredLoginStringClaim_sub="broker";'
        )
    try:
        login = UnsecuredLogin.from_options(parse_jaas_config(text).options)
    except (JaasConfigError, ValueError) as exc:
        raise ConfigError(f"{key}: {exc}") from None
    return lambda host: login.client(lambda: wall_ms() / 1000)


def _kerberos_login(config: BrokerConfig, listener: str) -> KerberosLogin:
    identity = kerberos_identity(config, listener)
    retry_ms = config_int(
        config,
        "sasl.kerberos.min.time.before.relogin",
        DEFAULT_MIN_TIME_BEFORE_RELOGIN_MS,
        listener,
    )
    try:
        return KerberosLogin(identity.principal, identity.keytab, identity.service_name, retry_ms)
    except GssapiMissing as exc:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol is GSSAPI: {exc}") from None

"""What each listener of the broker serves: its security protocol, its TLS context and
its SASL mechanisms, built from Kafka's settings (broker/config.py, security/settings.py).
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from herdless.broker.auth.kerberos import kerberos_acceptor
from herdless.broker.auth.oauthbearer import oauthbearer_validator
from herdless.broker.auth.tls import (
    ReloadingContext,
    Side,
    peer_principal,
    principal_mapper,
)
from herdless.broker.clock import wall_ms
from herdless.broker.config import BrokerConfig, ConfigError
from herdless.broker.network.sasl_authentication import SaslListener
from herdless.broker.network.tls_handshakes import reporting_handshakes
from herdless.security.listeners import Endpoint, SecurityProtocol
from herdless.security.principal import ANONYMOUS, KafkaPrincipal
from herdless.security.sasl import SaslServer
from herdless.security.sasl_gssapi import GSSAPI, GssapiServer
from herdless.security.sasl_oauthbearer import OAUTHBEARER, OAuthBearerServer
from herdless.security.sasl_plain import PLAIN, PlainServer
from herdless.security.sasl_scram import ScramServer, TokenCredentialCache
from herdless.security.scram import SCRAM_MECHANISMS, CredentialCache

# The mechanisms herdless serves. Kafka enables GSSAPI alone unless told otherwise;
# herdless enables the SCRAM mechanisms, which need no Kerberos realm.
SERVED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, GSSAPI, OAUTHBEARER)
DEFAULT_MECHANISMS = ",".join(SCRAM_MECHANISMS)

# Kafka's defaults: sessions never end; a failed login is answered after 100 ms.
DEFAULT_MAX_REAUTH_MS = 0
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100


def _anonymous(_ssl_object: Any) -> KafkaPrincipal:
    return ANONYMOUS


@dataclass(frozen=True)
class Listener:
    endpoint: Endpoint
    # The server's TLS context (handing each handshake the latest certificates).
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslListener | None = None
    # The principal of a connection before SASL: from its TLS client certificate, through
    # ssl.principal.mapping.rules (PrincipalMappingError: the subject maps to no one).
    principal_of: Callable[[Any], KafkaPrincipal] = _anonymous
    # The server's TLS, which a dynamic change of the listener's ssl.* settings reaches.
    tls: ReloadingContext | None = None

    @property
    def name(self) -> str:
        return self.endpoint.listener

    @property
    def security_protocol(self) -> SecurityProtocol:
        return self.endpoint.security_protocol

    @classmethod
    def plaintext(cls, host: str = "", port: int = 0) -> Listener:
        return cls(Endpoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, host, port))


def build_listeners(
    config: BrokerConfig,
    credentials: CredentialCache,
    verify_plain: Callable[[str, str], bool],
    handshake_failed: Callable[[str, ssl.SSLError], None] = lambda listener, error: None,
    tokens: TokenCredentialCache | None = None,
) -> list[Listener]:
    """Every listener of `config`, ready to bind; ConfigError names a setting that cannot
    be used (before anything is bound). `handshake_failed(listener, error)` hears of each
    TLS handshake a client failed. `tokens`: the delegation tokens SCRAM logs in with,
    when they are enabled."""
    listeners = []
    for endpoint in config.listener_endpoints():
        tls: ReloadingContext | None = None
        principal_of = _anonymous
        if endpoint.security_protocol.uses_tls:
            tls, principal_of = _tls(config, endpoint, handshake_failed)
        sasl = None
        if endpoint.security_protocol.uses_sasl:
            sasl = _sasl_listener(config, endpoint.listener, credentials, verify_plain, tokens)
        ssl_context = None if tls is None else tls.context
        listeners.append(Listener(endpoint, ssl_context, sasl, principal_of, tls))
    return listeners


def _tls(
    config: BrokerConfig,
    endpoint: Endpoint,
    handshake_failed: Callable[[str, ssl.SSLError], None],
) -> tuple[ReloadingContext, Callable[[Any], KafkaPrincipal]]:
    reloading = ReloadingContext(
        config.security, endpoint.listener, Side.SERVER, endpoint.security_protocol
    )
    reloading.context.sslobject_class = reporting_handshakes(
        functools.partial(handshake_failed, endpoint.listener)
    )
    mapper = principal_mapper(config.security, endpoint.listener)

    def principal_of(ssl_object: Any) -> KafkaPrincipal:
        return ANONYMOUS if ssl_object is None else peer_principal(ssl_object, mapper)

    return reloading, principal_of


def _sasl_listener(
    config: BrokerConfig,
    listener: str,
    credentials: CredentialCache,
    verify_plain: Callable[[str, str], bool],
    tokens: TokenCredentialCache | None,
) -> SaslListener:
    settings = config.security
    mechanisms = tuple(
        m.upper()
        for m in settings.get_list("sasl.enabled.mechanisms", DEFAULT_MECHANISMS, listener=listener)
    )
    if not mechanisms:
        raise ConfigError(f"listener {listener}: sasl.enabled.mechanisms names no mechanism")
    for mechanism in mechanisms:
        if mechanism not in SERVED_MECHANISMS:
            raise ConfigError(
                f"sasl.enabled.mechanisms: {mechanism} is not served"
                f" (served: {', '.join(SERVED_MECHANISMS)})"
            )

    # Read once: the keytab's keys are checked before the listener is bound.
    kerberos = kerberos_acceptor(config, listener) if GSSAPI in mechanisms else None
    # One per listener: a JWKS is fetched and refreshed once for all its connections.
    validator = oauthbearer_validator(settings, listener) if OAUTHBEARER in mechanisms else None

    def make_server(mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(verify_plain)
        if mechanism == GSSAPI:
            assert kerberos is not None
            return GssapiServer(kerberos)
        if mechanism == OAUTHBEARER:
            assert validator is not None
            return OAuthBearerServer(validator, wall_ms)
        return ScramServer(mechanism, credentials, tokens, wall_ms)

    return SaslListener(
        mechanisms,
        make_server,
        config_int(config, "connections.max.reauth.ms", DEFAULT_MAX_REAUTH_MS, listener),
        config_int(
            config,
            "connection.failed.authentication.delay.ms",
            DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
            listener,
        ),
    )


def config_int(config: BrokerConfig, key: str, default: int, listener: str | None = None) -> int:
    """A security setting that is a count or milliseconds, at least 0."""
    value = config.security.get(key, str(default), listener=listener)
    try:
        millis = int(value or default)
    except ValueError:
        raise ConfigError(f"{key} must be an integer, not {value!r}") from None
    if millis < 0:
        raise ConfigError(f"{key} must be at least 0, not {millis}")
    return millis

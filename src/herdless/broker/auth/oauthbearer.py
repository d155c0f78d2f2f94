"""Which validator checks a listener's OAUTHBEARER tokens, chosen as Kafka chooses it:
`listener.name.<l>.oauthbearer.sasl.server.callback.handler.class` names Kafka's OIDC
validator (signed JWTs against a JWKS, KIP-768), or nothing does and the listener takes
Kafka's default, unsecured JWTs for development, with options from its sasl.jaas.config.

Every setting may be given for the listener and mechanism
(`listener.name.<l>.oauthbearer.sasl.oauthbearer.expected.audience`), the listener, or
the whole broker.
"""

from __future__ import annotations

import logging

from herdless.broker.auth.jwks import JwksError, RefreshingJwks
from herdless.broker.auth.tls import client_context
from herdless.broker.config import ConfigError
from herdless.security.jaas import JaasConfigError, parse_jaas_config
from herdless.security.oauthbearer_jwt import SignedJwtValidator
from herdless.security.oauthbearer_token import TokenValidator
from herdless.security.oauthbearer_unsecured import UnsecuredValidator
from herdless.security.sasl_oauthbearer import OAUTHBEARER
from herdless.security.settings import SecuritySettings

log = logging.getLogger("herdless.broker.auth.oauthbearer")

UNSECURED_VALIDATOR = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured"
    ".OAuthBearerUnsecuredValidatorCallbackHandler"
)
OIDC_VALIDATORS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    # its name before Kafka 3.7
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
HANDLER_CLASS = "sasl.server.callback.handler.class"
JWKS_ENDPOINT_URL = "sasl.oauthbearer.jwks.endpoint.url"

# Kafka's defaults (SaslConfigs).
DEFAULT_JWKS_REFRESH_MS = 60 * 60 * 1000
DEFAULT_JWKS_RETRY_BACKOFF_MS = 100
DEFAULT_JWKS_RETRY_BACKOFF_MAX_MS = 10_000
DEFAULT_CLOCK_SKEW_SECONDS = 30
# A JWKS at an https URL is fetched trusting what these options of the JAAS entry say,
# as Kafka's JaasOptionsUtils builds its SSL client from them.
JAAS_SSL_PREFIX = "ssl."


class _Settings:
    """The listener's OAUTHBEARER settings, most specific first."""

    def __init__(self, settings: SecuritySettings, listener: str) -> None:
        self.settings = settings
        self.listener = listener

    def get(self, key: str, default: str | None = None) -> str | None:
        value = self.settings.get(key, listener=self.listener, mechanism=OAUTHBEARER)
        return default if value is None or value == "" else value

    def integer(self, key: str, default: int, minimum: int = 0) -> int:
        value = self.get(key, str(default))
        try:
            number = int(value or default)
        except ValueError:
            raise ConfigError(f"{key} must be an integer, not {value!r}") from None
        if number < minimum:
            raise ConfigError(f"{key} must be at least {minimum}, not {number}")
        return number


def oauthbearer_validator(settings: SecuritySettings, listener: str) -> TokenValidator:
    """The validator of `listener`'s tokens; ConfigError names a setting it cannot use."""
    own = _Settings(settings, listener)
    options = _jaas_options(own)
    handler = own.get(HANDLER_CLASS)
    if handler is None or handler == UNSECURED_VALIDATOR:
        log.warning(
            "listener %s accepts unsecured OAUTHBEARER tokens, which anyone can write: set"
            " listener.name.%s.oauthbearer.%s to %s to check signed ones",
            listener,
            listener.lower(),
            HANDLER_CLASS,
            OIDC_VALIDATORS[0],
        )
        try:
            return UnsecuredValidator.from_options(options)
        except ValueError as exc:
            raise ConfigError(f"listener {listener}: sasl.jaas.config: {exc}") from None
    if handler not in OIDC_VALIDATORS:
        raise ConfigError(
            f"listener.name.{listener.lower()}.oauthbearer.{HANDLER_CLASS}: {handler} is not"
            f" served (served: {', '.join((*OIDC_VALIDATORS, UNSECURED_VALIDATOR))})"
        )
    return _signed_jwt_validator(own, options)


def _signed_jwt_validator(own: _Settings, options: dict[str, str]) -> SignedJwtValidator:
    url = own.get(JWKS_ENDPOINT_URL)
    if url is None:
        raise ConfigError(
            f"listener {own.listener}: {JWKS_ENDPOINT_URL} must name the identity"
            " provider's JWKS (a file: or https: URL) for OAuthBearerValidatorCallbackHandler"
        )
    ssl_options = {k: v for k, v in options.items() if k.startswith(JAAS_SSL_PREFIX)}
    ssl_context = None
    if url.lower().startswith("https:"):
        ssl_context = client_context(SecuritySettings(ssl_options), own.listener)
    try:
        keys = RefreshingJwks(
            url,
            own.integer("sasl.oauthbearer.jwks.endpoint.refresh.ms", DEFAULT_JWKS_REFRESH_MS, 1),
            own.integer(
                "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", DEFAULT_JWKS_RETRY_BACKOFF_MS
            ),
            own.integer(
                "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
                DEFAULT_JWKS_RETRY_BACKOFF_MAX_MS,
            ),
            ssl_context,
        )
    except JwksError as exc:
        raise ConfigError(f"{JWKS_ENDPOINT_URL}: {exc}") from None
    audience = own.settings.get_list(
        "sasl.oauthbearer.expected.audience", listener=own.listener, mechanism=OAUTHBEARER
    )
    return SignedJwtValidator(
        keys,
        expected_audience=tuple(audience),
        expected_issuer=own.get("sasl.oauthbearer.expected.issuer"),
        sub_claim_name=own.get("sasl.oauthbearer.sub.claim.name", "sub") or "sub",
        scope_claim_name=own.get("sasl.oauthbearer.scope.claim.name", "scope") or "scope",
        clock_skew_s=own.integer("sasl.oauthbearer.clock.skew.seconds", DEFAULT_CLOCK_SKEW_SECONDS),
    )


def _jaas_options(own: _Settings) -> dict[str, str]:
    """The options of the listener's OAUTHBEARER JAAS entry; none when it has none (the
    broker logs in to no one with OAUTHBEARER, so herdless needs no entry)."""
    text = own.get("sasl.jaas.config")
    if text is None:
        return {}
    try:
        return parse_jaas_config(text).options
    except JaasConfigError as exc:
        raise ConfigError(
            f"listener.name.{own.listener.lower()}.oauthbearer.sasl.jaas.config: {exc}"
        ) from None

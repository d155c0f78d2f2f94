"""Which validator a listener's OAUTHBEARER tokens meet, from Kafka's settings, and the
settings it cannot use named before anything is bound."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from herdless.broker.auth.oauthbearer import OIDC_VALIDATORS, UNSECURED_VALIDATOR
from herdless.broker.config import BrokerConfig, ConfigError
from herdless.broker.network.inter_broker import inter_broker_security
from herdless.broker.network.listeners import build_listeners
from herdless.security.principal import user
from herdless.security.sasl import SaslServer
from herdless.security.settings import SecuritySettings
from tests.support.tokens import SigningKey, claims, unsecured_token, write_jwks

PREFIX = "listener.name.sasl_plaintext.oauthbearer."
OIDC = OIDC_VALIDATORS[0]


def oauthbearer_server(tmp_path: Path, **settings: str) -> SaslServer:
    raw = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        **settings,
    }
    config = BrokerConfig(data_dir=str(tmp_path / "data"), security=SecuritySettings(raw))
    [listener] = build_listeners(config, None, lambda name, password: False)  # type: ignore[arg-type]
    assert listener.sasl is not None
    return listener.sasl.make_server("OAUTHBEARER")


def login(server: SaslServer, token: str) -> bytes:
    return server.evaluate(f"n,,\x01auth=Bearer {token}\x01\x01".encode())


def test_with_no_handler_named_unsecured_tokens_are_accepted(tmp_path: Path) -> None:
    server = oauthbearer_server(tmp_path)
    assert login(server, unsecured_token(claims("alice", time.time()))) == b""
    assert server.principal == user("alice")


def test_the_unsecured_validator_takes_its_options_from_the_jaas_entry(tmp_path: Path) -> None:
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
        ' unsecuredValidatorRequiredScope="produce";'
    )
    settings = {
        f"{PREFIX}sasl.server.callback.handler.class": UNSECURED_VALIDATOR,
        f"{PREFIX}sasl.jaas.config": jaas,
    }
    server = oauthbearer_server(tmp_path, **settings)
    assert b"insufficient_scope" in login(server, unsecured_token(claims("a", time.time())))


def test_the_oidc_validator_checks_signatures_against_the_jwks(tmp_path: Path) -> None:
    key = SigningKey.named("key-1")
    jwks = write_jwks(tmp_path / "jwks.json", key)
    settings = {
        f"{PREFIX}sasl.server.callback.handler.class": OIDC,
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        f"{PREFIX}sasl.oauthbearer.expected.audience": "kafka,other",
        "sasl.oauthbearer.expected.issuer": "idp",
    }
    server = oauthbearer_server(tmp_path, **settings)
    token = key.sign(claims("svc", time.time(), aud="kafka", iss="idp"))
    assert login(server, token) == b""
    assert server.principal == user("svc")
    server = oauthbearer_server(tmp_path, **settings)
    assert login(server, unsecured_token(claims("svc", time.time()))) != b""


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({f"{PREFIX}sasl.server.callback.handler.class": "com.example.Mine"}, "is not served"),
        ({f"{PREFIX}sasl.server.callback.handler.class": OIDC}, "jwks.endpoint.url must name"),
        (
            {
                f"{PREFIX}sasl.server.callback.handler.class": OIDC,
                "sasl.oauthbearer.jwks.endpoint.url": "file:///nowhere/jwks.json",
            },
            "could not fetch the JWKS",
        ),
        (
            {
                f"{PREFIX}sasl.server.callback.handler.class": OIDC,
                "sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
                "sasl.oauthbearer.jwks.endpoint.refresh.ms": "hourly",
            },
            "refresh.ms must be an integer",
        ),
        (
            {
                f"{PREFIX}sasl.server.callback.handler.class": OIDC,
                "sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
                "sasl.oauthbearer.jwks.endpoint.refresh.ms": "0",
            },
            "refresh.ms must be at least 1",
        ),
        ({f"{PREFIX}sasl.jaas.config": "no semicolon"}, "sasl.jaas.config"),
        (
            {f"{PREFIX}sasl.jaas.config": "M required unsecuredValidatorAllowableClockSkewMs=x;"},
            "must be an integer",
        ),
    ],
)
def test_settings_that_cannot_be_used_are_named(
    tmp_path: Path, settings: dict[str, str], problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem):
        oauthbearer_server(tmp_path, **settings)


def test_brokers_log_in_to_each_other_with_unsecured_tokens(tmp_path: Path) -> None:
    settings = {
        "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
        f"{PREFIX}sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
            ' unsecuredLoginStringClaim_sub="broker" unsecuredLoginExtension_traceId="t1";'
        ),
    }
    raw = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER"}
    config = BrokerConfig(data_dir=str(tmp_path), security=SecuritySettings({**raw, **settings}))
    security = inter_broker_security(config)
    assert security.sasl is not None
    client = security.sasl("127.0.0.1")
    # The listener's own validator (unsecured tokens) takes what this broker sends.
    server = oauthbearer_server(tmp_path, **settings)
    assert client.evaluate(server.evaluate(client.first())) is None
    assert server.principal == user("broker")
    assert 3_590_000 < server.session_lifetime_ms <= 3_600_000  # type: ignore[operator]


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({}, "must give the principal this broker logs in as"),
        (
            {f"{PREFIX}sasl.jaas.config": "M required unsecuredLoginStringClaim_name=x;"},
            "unsecuredLoginStringClaim_sub must give the principal",
        ),
        (
            {f"{PREFIX}sasl.login.callback.handler.class": "com.example.Login"},
            "not through com.example.Login",
        ),
    ],
)
def test_an_oauthbearer_login_between_brokers_that_cannot_be_used_is_named(
    tmp_path: Path, settings: dict[str, str], problem: str
) -> None:
    raw = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        **settings,
    }
    config = BrokerConfig(data_dir=str(tmp_path), security=SecuritySettings(raw))
    with pytest.raises(ConfigError, match=problem):
        inter_broker_security(config)

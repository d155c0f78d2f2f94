"""TLS contexts from Kafka's ssl.* settings, proved by real handshakes between an asyncio
server (asyncio's own loop and uvloop) and Python ssl clients."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

from herdless.broker.auth.tls import ReloadingContext, Side, client_context, server_context
from herdless.broker.config import ConfigError
from herdless.security.certificates import new_authority
from herdless.security.listeners import SecurityProtocol
from herdless.security.settings import SecuritySettings
from tests.support.tls import (
    LOOPS,
    Pki,
    TlsServer,
    connect,
    now,
    refused,
    replace_file,
)
from tests.support.tls import client_context as python_client

LISTENER = "SSL"


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki.create(tmp_path)


def serving(settings: dict[str, str], loop: str = "asyncio", rules: str | None = None) -> TlsServer:
    return TlsServer(server_context(SecuritySettings(settings), LISTENER), loop, rules)


def with_certificate(pki: Pki, **options: object) -> ssl.SSLContext:
    return python_client(pki.ca_file, pki.client_file, pki.client_key_file, **options)  # type: ignore[arg-type]


def without_certificate(pki: Pki, **options: object) -> ssl.SSLContext:
    return python_client(pki.ca_file, **options)  # type: ignore[arg-type]


# -- client authentication, on both loops ---------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_client_auth_required_refuses_a_client_without_a_certificate(pki: Pki, loop: str) -> None:
    with serving(pki.server_settings(**{"ssl.client.auth": "required"}), loop) as server:
        refused(server.port, without_certificate(pki))
        connection = connect(server.port, with_certificate(pki))
        assert connection.principal == "User:CN=client"
        connection.close()


@pytest.mark.parametrize("loop", LOOPS)
def test_client_auth_requested_takes_both(pki: Pki, loop: str) -> None:
    with serving(pki.server_settings(**{"ssl.client.auth": "requested"}), loop) as server:
        anonymous = connect(server.port, without_certificate(pki))
        named = connect(server.port, with_certificate(pki))
        assert (anonymous.principal, named.principal) == ("User:ANONYMOUS", "User:CN=client")
        anonymous.close()
        named.close()


@pytest.mark.parametrize("loop", LOOPS)
def test_an_untrusted_client_certificate_fails(pki: Pki, loop: str, tmp_path: Path) -> None:
    stranger = new_authority("another CA", now()).issue("mallory", now(), client=True)
    certificate, key = pki.write_client(stranger, "mallory")
    for auth in ("required", "requested"):
        with serving(pki.server_settings(**{"ssl.client.auth": auth}), loop) as server:
            refused(server.port, python_client(pki.ca_file, certificate, key))


def test_client_auth_none_asks_for_no_certificate(pki: Pki) -> None:
    with serving(pki.server_settings()) as server:  # Kafka's default: none
        connection = connect(server.port, with_certificate(pki))
        assert connection.principal == "User:ANONYMOUS"
        connection.close()


@pytest.mark.parametrize("loop", LOOPS)
def test_the_principal_through_the_mapping_rules(tmp_path: Path, loop: str) -> None:
    pki = Pki.create(tmp_path, client_name="Alice")
    settings = pki.server_settings(**{"ssl.client.auth": "required"})
    rules = "RULE:^CN=(.*?),OU=ServiceUsers$/$1/U, RULE:^CN=(.*)$/$1/L, DEFAULT"
    with serving(settings, loop, rules) as server:
        connection = connect(server.port, with_certificate(pki))
        assert connection.principal == "User:alice"
        service = pki.ca.issue("Billing", now(), organizational_unit="ServiceUsers", client=True)
        certificate, key = pki.write_client(service, "billing")
        connection = connect(server.port, python_client(pki.ca_file, certificate, key))
        assert connection.principal == "User:BILLING"


def test_sasl_ssl_takes_client_auth_only_from_the_listeners_own_setting(pki: Pki) -> None:
    broker_wide = SecuritySettings(pki.server_settings(**{"ssl.client.auth": "required"}))
    context = server_context(broker_wide, "SECURE", SecurityProtocol.SASL_SSL)
    assert context.verify_mode == ssl.CERT_NONE
    assert server_context(broker_wide, "SECURE").verify_mode == ssl.CERT_REQUIRED
    own = broker_wide.with_settings(**{"listener.name.secure.ssl.client.auth": "requested"})
    context = server_context(own, "SECURE", SecurityProtocol.SASL_SSL)
    assert context.verify_mode == ssl.CERT_OPTIONAL


# -- the forms a keystore and a truststore may take -------------------------------------


def _pkcs12(pki: Pki, password: bytes) -> bytes:
    return pkcs12.serialize_key_and_certificates(
        b"broker",
        pki.broker.key,
        pki.broker.certificate,
        [pki.ca.certificate],
        BestAvailableEncryption(password),
    )


def _forms(pki: Pki) -> dict[str, dict[str, str]]:
    encrypted = pki.directory / "encrypted.pem"
    encrypted.write_bytes(pki.broker.keystore_pem(b"key secret"))
    keystore_p12 = pki.directory / "broker.p12"
    keystore_p12.write_bytes(_pkcs12(pki, b"store secret"))
    truststore_p12 = pki.directory / "trust.p12"
    truststore_p12.write_bytes(
        pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(pki.ca.certificate, b"ca")], BestAvailableEncryption(b"t")
        )
    )
    trust_pem = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file)}
    return {
        "pem file": pki.server_settings(),
        "pem file, type not given": {
            "ssl.keystore.location": str(pki.broker_file),
            "ssl.truststore.location": str(pki.ca_file),
        },
        "encrypted key": {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(encrypted),
            "ssl.key.password": "key secret",
            **trust_pem,
        },
        "inline": {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": pki.broker.key_pem().decode(),
            "ssl.keystore.certificate.chain": pki.broker.chain_pem().decode(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": pki.ca.certificate_pem().decode(),
        },
        "pkcs12": {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(keystore_p12),
            "ssl.keystore.password": "store secret",
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(truststore_p12),
            "ssl.truststore.password": "t",
        },
        "per listener": {f"listener.name.ssl.{k}": v for k, v in pki.server_settings().items()},
    }


@pytest.mark.parametrize(
    "form",
    ["pem file", "pem file, type not given", "encrypted key", "inline", "pkcs12", "per listener"],
)
def test_each_form_of_the_stores_serves_and_verifies(pki: Pki, form: str) -> None:
    settings = {**_forms(pki)[form], "ssl.client.auth": "required"}
    with serving(settings) as server:
        connection = connect(server.port, with_certificate(pki))
        assert connection.principal == "User:CN=client"
        assert connection.server_certificate == pki.broker.certificate
        refused(
            server.port,
            python_client(
                pki.ca_file,
                *pki.write_client(
                    new_authority("x", now()).issue("x", now(), client=True), "stranger"
                ),
            ),
        )


def _error(settings: dict[str, str], listener: str = LISTENER) -> str:
    with pytest.raises(ConfigError) as caught:
        server_context(SecuritySettings(settings), listener)
    return str(caught.value)


def test_errors_name_the_setting_and_the_file(pki: Pki, tmp_path: Path) -> None:
    missing = tmp_path / "absent.pem"
    message = _error({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(missing)})
    assert f"ssl.keystore.location {missing}" in message and "No such file" in message

    jks = tmp_path / "broker.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 64)
    message = _error({"ssl.keystore.location": str(jks), "ssl.keystore.password": "x"})
    assert str(jks) in message and "convert it to PEM or PKCS12" in message
    message = _error({"ssl.keystore.type": "JKS", "ssl.keystore.location": str(jks)})
    assert "JKS store" in message

    encrypted = tmp_path / "encrypted.pem"
    encrypted.write_bytes(pki.broker.keystore_pem(b"right"))
    settings = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(encrypted)}
    assert "set ssl.key.password" in _error(settings)
    assert "cannot be read with ssl.key.password" in _error(
        {**settings, "ssl.key.password": "wrong"}
    )

    mismatched = tmp_path / "mismatched.pem"
    other = pki.ca.issue("other", now())
    mismatched.write_bytes(other.key_pem() + pki.broker.chain_pem())
    assert "does not belong to the first certificate" in _error(
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(mismatched)}
    )
    assert "ssl.key.password, not ssl.keystore.password" in _error(
        {**pki.server_settings(), "ssl.keystore.password": "x"}
    )
    assert "ssl.keystore.certificate.chain is not" in _error(
        {"ssl.keystore.key": pki.broker.key_pem().decode()}
    )
    assert "has no keystore" in _error({"ssl.truststore.location": str(pki.ca_file)})
    message = _error({"listener.name.ssl.ssl.keystore.location": str(missing)})
    assert f"listener.name.ssl.ssl.keystore.location {missing}" in message
    truststore = {**pki.server_settings(), "ssl.truststore.location": str(pki.client_key_file)}
    assert "holds no PEM certificate" in _error(truststore)


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("ssl.client.auth", "sometimes", "must be required, requested or none"),
        ("ssl.enabled.protocols", "TLSv1.2,SSLv3", "SSLv3 cannot be served"),
        ("ssl.enabled.protocols", "TLSv1.1,TLSv1.3", "without gaps"),
        ("ssl.protocol", "SSLv3", "ssl.protocol must be one of"),
        ("ssl.cipher.suites", "TLS_RSA_WITH_AES_128_CBC_SHA,TLS_NOPE,SSL_X", "TLS_NOPE, SSL_X"),
        ("ssl.cipher.suites", "TLS_AES_256_GCM_SHA384", "TLS 1.3 cannot be restricted"),
        ("ssl.allow.dn.changes", "maybe", "value maybe for configuration ssl.allow.dn.changes"),
        ("ssl.keystore.type", "BKS", "ssl.keystore.type must be PEM or PKCS12"),
    ],
)  # fmt: skip
def test_unusable_settings_are_named(pki: Pki, setting: str, value: str, words: str) -> None:
    assert words in _error(pki.server_settings(**{setting: value}))


# -- protocols and cipher suites ---------------------------------------------------


def test_enabled_protocols_restrict_the_version(pki: Pki) -> None:
    with serving(pki.server_settings()) as server:
        assert connect(server.port, without_certificate(pki)).version == "TLSv1.3"
    with serving(pki.server_settings(**{"ssl.enabled.protocols": "TLSv1.2"})) as server:
        assert connect(server.port, without_certificate(pki)).version == "TLSv1.2"
        only_13 = without_certificate(pki, minimum=ssl.TLSVersion.TLSv1_3)
        refused(server.port, only_13)
    with serving(pki.server_settings(**{"ssl.enabled.protocols": "TLSv1.3"})) as server:
        only_12 = without_certificate(pki, maximum=ssl.TLSVersion.TLSv1_2)
        refused(server.port, only_12)


def test_cipher_suites_restrict_what_is_negotiated(pki: Pki) -> None:
    suites = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    with serving(pki.server_settings(**{"ssl.cipher.suites": suites})) as server:
        # No TLS 1.3 suite named: TLS 1.3 is off, as in Java.
        connection = connect(server.port, without_certificate(pki))
        assert (connection.version, connection.cipher) == (
            "TLSv1.2",
            "ECDHE-ECDSA-AES128-GCM-SHA256",
        )
        other = without_certificate(
            pki, maximum=ssl.TLSVersion.TLSv1_2, ciphers="ECDHE-ECDSA-AES256-GCM-SHA384"
        )
        refused(server.port, other)
    all_13 = "TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256,TLS_AES_128_GCM_SHA256"
    with serving(pki.server_settings(**{"ssl.cipher.suites": all_13})) as server:
        assert connect(server.port, without_certificate(pki)).version == "TLSv1.3"
        old = without_certificate(pki, maximum=ssl.TLSVersion.TLSv1_2)
        refused(server.port, old)


# -- the broker as a client ------------------------------------------------------------


def test_client_context_checks_the_host_name_unless_told_not_to(pki: Pki) -> None:
    client_settings = {
        "ssl.truststore.location": str(pki.ca_file),
        "ssl.keystore.location": str(pki.broker_file),
    }
    server_settings = pki.server_settings(**{"ssl.client.auth": "required"})
    with serving(server_settings) as server:
        context = client_context(SecuritySettings(client_settings), LISTENER)
        assert connect(server.port, context, "localhost").principal == "User:CN=broker"
        assert "mismatch" in refused(server.port, context, "elsewhere.example")
        unchecked = {**client_settings, "ssl.endpoint.identification.algorithm": ""}
        context = client_context(SecuritySettings(unchecked), LISTENER)
        assert connect(server.port, context, "elsewhere.example").principal == "User:CN=broker"
        capped = {**client_settings, "ssl.protocol": "TLSv1.2"}
        context = client_context(SecuritySettings(capped), LISTENER)
        assert connect(server.port, context).version == "TLSv1.2"


def test_client_context_trusts_only_its_truststore(pki: Pki, tmp_path: Path) -> None:
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_bytes(new_authority("other", now()).certificate_pem())
    with serving(pki.server_settings()) as server:
        context = client_context(
            SecuritySettings({"ssl.truststore.location": str(other_ca)}), LISTENER
        )
        assert "certificate verify failed" in refused(server.port, context)


# -- reloading ---------------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_a_replaced_keystore_serves_new_connections_and_old_ones_carry_on(
    pki: Pki, loop: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = SecuritySettings(pki.server_settings(**{"ssl.client.auth": "required"}))
    tls = ReloadingContext(settings, LISTENER, Side.SERVER, check_interval_ms=0)
    with TlsServer(tls.context, loop) as server:
        old = connect(server.port, with_certificate(pki))
        assert old.server_certificate == pki.broker.certificate

        renewed = pki.ca.issue("broker", now(), hosts=["localhost", "127.0.0.1"], server=True)
        replace_file(pki.broker_file, renewed.keystore_pem())
        new = connect(server.port, with_certificate(pki))
        assert new.server_certificate == renewed.certificate
        assert old.echo("still here") == "still here"

        with caplog.at_level(logging.WARNING, logger="herdless.broker.auth.tls"):
            replace_file(pki.broker_file, b"-----BEGIN PRIVATE KEY-----\ngarbage\n")
            for _ in range(2):
                assert connect(server.port, with_certificate(pki)).server_certificate == (
                    renewed.certificate
                )
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, warnings
        assert "keeps the previous ones" in warnings[0] and str(pki.broker_file) in warnings[0]

        # A good file again: taken up.
        again = pki.ca.issue("broker", now(), hosts=["localhost", "127.0.0.1"], server=True)
        replace_file(pki.broker_file, again.keystore_pem())
        assert connect(server.port, with_certificate(pki)).server_certificate == again.certificate
        assert old.echo("and here") == "and here"


def test_a_new_subject_or_a_dropped_name_is_refused_unless_allowed(
    pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    settings = SecuritySettings(pki.server_settings())
    tls = ReloadingContext(settings, LISTENER, Side.SERVER, check_interval_ms=3_600_000)
    renamed = pki.ca.issue("someone else", now(), hosts=["localhost", "127.0.0.1"], server=True)
    replace_file(pki.broker_file, renamed.keystore_pem())
    with caplog.at_level(logging.WARNING, logger="herdless.broker.auth.tls"):
        assert not tls.check()
    assert "ssl.allow.dn.changes is false" in caplog.text
    narrower = pki.ca.issue("broker", now(), hosts=["localhost"], server=True)
    replace_file(pki.broker_file, narrower.keystore_pem())
    assert not tls.check()
    assert "drops subject alternative names 127.0.0.1" in caplog.text

    allowed = SecuritySettings(
        pki.server_settings(**{"ssl.allow.dn.changes": "true", "ssl.allow.san.changes": "true"})
    )
    tls = ReloadingContext(allowed, LISTENER, Side.SERVER, check_interval_ms=3_600_000)
    replace_file(pki.broker_file, renamed.keystore_pem())
    assert tls.check()
    assert not tls.check()  # nothing changed since


@pytest.mark.parametrize("loop", LOOPS)
def test_a_replaced_truststore_is_the_only_one_trusted(pki: Pki, loop: str) -> None:
    trust = pki.directory / "trust.pem"
    trust.write_bytes(pki.ca.certificate_pem())
    settings = SecuritySettings(
        pki.server_settings(
            **{"ssl.client.auth": "required", "ssl.truststore.location": str(trust)}
        )
    )
    tls = ReloadingContext(settings, LISTENER, Side.SERVER, check_interval_ms=3_600_000)
    new_ca = new_authority("next CA", now())
    newcomer = python_client(
        pki.ca_file, *pki.write_client(new_ca.issue("newcomer", now(), client=True), "newcomer")
    )
    with TlsServer(tls.context, loop) as server:
        assert connect(server.port, with_certificate(pki)).principal == "User:CN=client"
        refused(server.port, newcomer)

        replace_file(trust, new_ca.certificate_pem())
        # Not looked at before the interval is up...
        assert connect(server.port, with_certificate(pki)).principal == "User:CN=client"
        assert tls.check()  # ...unless asked
        assert connect(server.port, newcomer).principal == "User:CN=newcomer"
        refused(server.port, with_certificate(pki))


def test_the_client_side_follows_its_files(pki: Pki) -> None:
    clock = [0]
    settings = SecuritySettings(
        {"ssl.keystore.location": str(pki.broker_file), "ssl.truststore.location": str(pki.ca_file)}
    )
    tls = ReloadingContext(
        settings, LISTENER, Side.CLIENT, check_interval_ms=5_000, clock=lambda: clock[0]
    )
    first = tls.current()
    renewed = pki.ca.issue(
        "broker", now(), hosts=["localhost", "127.0.0.1"], server=True, client=True
    )
    replace_file(pki.broker_file, renewed.keystore_pem())
    assert tls.current() is first  # not looked at before the interval is up
    clock[0] = 5_000
    assert tls.current() is not first
    with serving(pki.server_settings(**{"ssl.client.auth": "required"})) as server:
        assert connect(server.port, tls.current()).principal == "User:CN=broker"

"""The broker's side of SASL/GSSAPI against a real MIT KDC, in this process: the client's
side is python-gssapi's initiator, speaking RFC 4752 as kafka-python and Cyrus SASL do.
Then the listener's Kerberos settings, refused with a message naming the setting."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import gssapi
import pytest

from herdless.broker.auth.kerberos import kerberos_acceptor
from herdless.broker.config import BrokerConfig, ConfigError
from herdless.broker.network.sasl_authentication import SaslAuthentication, SaslListener
from herdless.protocol.codec import REQUESTS, Request
from herdless.security.principal import user
from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_gssapi import GssapiAcceptor, GssapiServer, GssapiSetupError
from herdless.testing.kerberos import MitKdc

SERVICE = "kafka/broker.herdless.test"


class Realm:
    def __init__(self, kdc: MitKdc, keytab: Path) -> None:
        self.kdc = kdc
        self.keytab = keytab

    def acceptor(self, rules: list[str] | None = None) -> GssapiAcceptor:
        return GssapiAcceptor.from_keytab(self.kdc.principal(SERVICE), str(self.keytab), rules)


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    base = tmp_path_factory.mktemp("kerberos")
    with MitKdc(base / "kdc") as kdc, pytest.MonkeyPatch.context() as env:
        kdc.add_principal(SERVICE)
        keytab = kdc.keytab(SERVICE)
        for name in ("alice", "carol/batch"):
            kdc.add_principal(name)
        # This process is both client and broker: one realm, one ticket cache.
        for key, value in kdc.environment(base / "client.cc").items():
            env.setenv(key, value)
        yield Realm(kdc, keytab)


def log_in(realm: Realm, name: str) -> None:
    realm.kdc.kinit(name, realm.kdc.keytab(name), Path(os.environ["KRB5CCNAME"][5:]))


def initiator() -> gssapi.SecurityContext:
    target = gssapi.Name("kafka@broker.herdless.test", gssapi.NameType.hostbased_service)
    return gssapi.SecurityContext(
        name=target.canonicalize(gssapi.MechType.kerberos), usage="initiate"
    )


def exchange(server: GssapiServer, authorization_id: bytes = b"", layer: int = 1) -> None:
    """A client's whole exchange with `server`, as kafka-python runs it."""
    client = initiator()
    challenge = server.evaluate(client.step(None))
    while not client.complete:
        challenge = server.evaluate(client.step(challenge) or b"")
    assert challenge is not None
    offer = client.unwrap(challenge).message
    assert offer == bytes([1]) + (65536).to_bytes(3, "big")
    answer = client.wrap(bytes([layer]) + offer[1:] + authorization_id, False).message
    assert server.evaluate(answer) is None


def test_a_client_with_a_ticket_is_its_short_name(realm: Realm) -> None:
    log_in(realm, "alice")
    server = GssapiServer(realm.acceptor())
    exchange(server)
    assert server.complete
    assert server.principal == user("alice")
    assert server.session_lifetime_ms is None


def test_the_authorization_id_never_changes_who_the_client_is(realm: Realm) -> None:
    # kafka-python and aiokafka send the service's name there; Kafka keeps the client's.
    log_in(realm, "alice")
    for authorization_id in (b"kafka@broker.herdless.test", b"alice@HERDLESS.TEST", b"bob"):
        server = GssapiServer(realm.acceptor())
        exchange(server, authorization_id)
        assert server.principal == user("alice")


def test_rules_name_the_client_and_one_no_rule_maps_is_refused(realm: Realm) -> None:
    log_in(realm, "carol/batch")
    server = GssapiServer(realm.acceptor(["RULE:[2:$2-$1]"]))
    exchange(server)
    assert server.principal == user("batch-carol")

    server = GssapiServer(realm.acceptor([r"RULE:[1:$1@$0](.*@HERDLESS\.TEST)s/@.*//"]))
    with pytest.raises(SaslAuthenticationFailed) as failure:
        exchange(server)
    assert "invalid credentials with SASL mechanism GSSAPI" in str(failure.value)
    assert failure.value.reason is not None
    assert "No rules apply to carol/batch@HERDLESS.TEST" in failure.value.reason
    assert not server.complete


def test_a_security_layer_the_broker_did_not_offer_is_refused(realm: Realm) -> None:
    log_in(realm, "alice")
    server = GssapiServer(realm.acceptor())
    with pytest.raises(SaslAuthenticationFailed) as failure:
        exchange(server, layer=4)  # confidentiality
    assert "security layer not offered" in str(failure.value.reason)


@pytest.mark.parametrize("token", [b"", b"\x00", b"not a kerberos token" * 10, b"\x60\x82\xff"])
def test_a_token_that_is_no_kerberos_token_is_refused(realm: Realm, token: bytes) -> None:
    server = GssapiServer(realm.acceptor())
    with pytest.raises(SaslAuthenticationFailed) as failure:
        server.evaluate(token)
    assert failure.value.reason  # the GSS error, for the broker's log
    with pytest.raises(SaslAuthenticationFailed, match="already over"):
        server.evaluate(token)


def test_the_unframed_flow_sends_nothing_after_the_last_token(realm: Realm) -> None:
    log_in(realm, "alice")
    auth = SaslAuthentication(
        SaslListener(("GSSAPI",), lambda _: GssapiServer(realm.acceptor())), "peer"
    )
    auth.handshake(Request(17, 0, 1, "test", REQUESTS[17](mechanism="GSSAPI")))
    assert auth.expects_raw_token
    client = initiator()
    step = auth.raw_token(client.step(None), 0)
    frames = [b"".join(bytes(chunk) for chunk in step.reply or [])]
    client.step(frames[-1][4:])
    step = auth.raw_token(b"", 0)
    offer = client.unwrap(b"".join(bytes(c) for c in step.reply or [])[4:]).message
    step = auth.raw_token(client.wrap(offer, False).message, 0)
    assert step.authenticated == user("alice")
    assert step.reply is None


def test_a_keytab_without_the_principal_is_refused(realm: Realm) -> None:
    with pytest.raises(GssapiSetupError, match="kafka/other.host@HERDLESS.TEST"):
        GssapiAcceptor.from_keytab(realm.kdc.principal("kafka/other.host"), str(realm.keytab), None)


def broker_config(realm: Realm, jaas: str | None, **settings: str) -> BrokerConfig:
    config = BrokerConfig()
    if jaas is not None:
        settings["listener.name.sasl_plaintext.gssapi.sasl.jaas.config"] = jaas
    config.apply_properties(settings)
    return config


def jaas(realm: Realm, principal: str = SERVICE, extra: str = "useKeyTab=true") -> str:
    return (
        f"com.sun.security.auth.module.Krb5LoginModule required {extra} storeKey=true"
        f' keyTab="{realm.keytab}" principal="{realm.kdc.principal(principal)}";'
    )


def test_the_listener_reads_its_login_from_kafkas_settings(realm: Realm) -> None:
    acceptor = kerberos_acceptor(broker_config(realm, jaas(realm)), "SASL_PLAINTEXT")
    assert acceptor.service_principal == f"{SERVICE}@HERDLESS.TEST"
    assert acceptor.short_namer.rules[0].default_realm == "HERDLESS.TEST"


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({}, "must give the broker's Kerberos login"),
        (
            {"jaas": "org.apache.kafka.common.security.plain.PlainLoginModule required;"},
            "Krb5LoginModule, not",
        ),
        ({"extra": "useKeyTab=false"}, "set useKeyTab=true"),
        ({"principal": "other/broker.herdless.test"}, "not of service kafka"),
        ({"sasl.kerberos.service.name": "other"}, "not of service other"),
        (
            {"extra": "useKeyTab=true serviceName=kafka", "sasl.kerberos.service.name": "other"},
            "Conflicting serviceName values",
        ),
        ({"principal": "kafka/not.in.keytab"}, "cannot accept tickets for kafka/not.in.keytab"),
        ({"sasl.kerberos.principal.to.local.rules": "RULE:[1:$1]/X"}, "Invalid rule"),
    ],
)
def test_settings_that_cannot_be_used_are_refused(
    realm: Realm, settings: dict[str, str], problem: str
) -> None:
    settings = dict(settings)
    text: str | None = None
    if settings:
        text = settings.pop("jaas", None) or jaas(
            realm, settings.pop("principal", SERVICE), settings.pop("extra", "useKeyTab=true")
        )
    with pytest.raises(ConfigError, match=problem):
        kerberos_acceptor(broker_config(realm, text, **settings), "SASL_PLAINTEXT")


def test_without_the_gssapi_package_the_listener_says_what_to_install(
    realm: Realm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'herdless\[gssapi\]'"):
        kerberos_acceptor(broker_config(realm, jaas(realm)), "SASL_PLAINTEXT")

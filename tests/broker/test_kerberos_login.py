"""A broker's Kerberos login to the others against a real MIT KDC, in this process: the
client's side of SASL GSSAPI (herdless.security.sasl_gssapi_client) from the broker's
keytab, against the broker's side (GssapiServer); tickets renewed before they end; a
keytab with stale keys refused with one reason, without asking the KDC again and again.
Then the inter-broker settings that cannot be used."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import gssapi
import pytest

from herdless.broker.auth.kerberos_login import KerberosLogin
from herdless.broker.config import BrokerConfig, ConfigError
from herdless.broker.network.inter_broker import inter_broker_security
from herdless.security.principal import user
from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_gssapi import GssapiAcceptor, GssapiServer
from herdless.security.sasl_gssapi_client import GssapiClient
from herdless.security.settings import SecuritySettings
from herdless.testing.kerberos import MitKdc

HOST = "broker1.herdless.test"
SERVICE = f"kafka/{HOST}"
# A broker whose tickets last 20 s: MIT renews those within 30 s of their end, at once.
SHORT_LIVED = "kafka/short.herdless.test"
STALE = "kafka/stale.herdless.test"


class Realm:
    def __init__(self, kdc: MitKdc, base: Path) -> None:
        self.kdc = kdc
        self.base = base

    def keytab(self, name: str) -> str:
        return str(self.kdc.directory / f"{name.replace('/', '_')}.keytab")

    def login(self, name: str, clock: Callable[[], float] = time.monotonic) -> KerberosLogin:
        return KerberosLogin(self.kdc.principal(name), self.keytab(name), "kafka", clock=clock)

    def acceptor(self) -> GssapiAcceptor:
        return GssapiAcceptor.from_keytab(self.kdc.principal(SERVICE), self.keytab(SERVICE), None)

    def server(self) -> GssapiServer:
        return GssapiServer(self.acceptor())

    def logins_at_kdc(self, name: str) -> int:
        """The initial tickets (AS-REQs) the KDC has issued to `name`."""
        log = (self.kdc.directory / "kdc.log").read_text()
        wanted = f"{self.kdc.principal(name)} for krbtgt/"
        return sum(1 for line in log.splitlines() if "AS_REQ" in line and wanted in line)


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    base = tmp_path_factory.mktemp("kerberos-login")
    with MitKdc(base / "kdc") as kdc, pytest.MonkeyPatch.context() as env:
        for name in (SERVICE, SHORT_LIVED, STALE):
            kdc.add_principal(name)
        kdc.keytab(STALE)
        kdc.change_keys(STALE)  # the keytab now holds keys the KDC no longer has
        for name in (SERVICE, SHORT_LIVED):
            kdc.keytab(name)
        kdc.set_max_life(SHORT_LIVED, "20 seconds")
        # No ticket cache of this process's is used: each login has its own.
        for key, value in kdc.environment(base / "unused.cc").items():
            env.setenv(key, value)
        yield Realm(kdc, base)


def exchange(client: GssapiClient, server: GssapiServer) -> None:
    """The whole SASL exchange, as PeerConnection carries it over SaslAuthenticate."""
    message: bytes | None = client.first()
    while message is not None:
        challenge = server.evaluate(message)
        message = client.evaluate(challenge or b"")


def test_a_broker_logs_in_to_another_with_its_keytab(realm: Realm) -> None:
    server = realm.server()
    exchange(realm.login(SERVICE).client(HOST), server)
    # Kafka's DEFAULT rule: kafka/broker1.herdless.test@HERDLESS.TEST is User:kafka.
    assert server.principal == user("kafka")


def test_tickets_are_renewed_before_they_end_and_kept_while_they_last(realm: Realm) -> None:
    login = realm.login(SERVICE)
    before = realm.logins_at_kdc(SERVICE)
    for _ in range(3):
        exchange(login.client(HOST), realm.server())
    assert realm.logins_at_kdc(SERVICE) == before + 1  # an hour's ticket serves them all

    short = realm.login(SHORT_LIVED)
    before = realm.logins_at_kdc(SHORT_LIVED)
    for _ in range(3):
        exchange(short.client(HOST), realm.server())
        assert 0 < short.credentials().lifetime <= 20  # type: ignore[attr-defined]
    # Each ticket was within 30 s of its end: each login asked for a new one first.
    assert realm.logins_at_kdc(SHORT_LIVED) >= before + 3


def test_a_stale_keytab_fails_with_one_reason_and_waits_before_asking_again(
    realm: Realm,
) -> None:
    now = [0.0]
    login = realm.login(STALE, clock=lambda: now[0])
    before = realm.logins_at_kdc(STALE)
    with pytest.raises(SaslAuthenticationFailed) as first:
        login.client(HOST)
    assert str(first.value) == (
        f"cannot log in as {realm.kdc.principal(STALE)} with keytab {realm.keytab(STALE)}:"
        " Decrypt integrity check failed"
    )
    asked = realm.logins_at_kdc(STALE)
    assert asked > before
    now[0] = 59.0
    with pytest.raises(SaslAuthenticationFailed) as again:
        login.client(HOST)
    assert str(again.value) == str(first.value)
    assert realm.logins_at_kdc(STALE) == asked  # the KDC was not asked
    now[0] = 60.0
    with pytest.raises(SaslAuthenticationFailed):
        login.client(HOST)
    assert realm.logins_at_kdc(STALE) > asked


def test_a_server_requiring_a_security_layer_is_refused(realm: Realm) -> None:
    client = realm.login(SERVICE).client(HOST)
    # A server with the broker's keys that wants integrity protection.
    context = gssapi.SecurityContext(creds=realm.acceptor().credentials, usage="accept")
    answer = context.step(client.first())
    assert client.evaluate(answer or b"") == b""
    offer = context.wrap(bytes([0x02]) + (65536).to_bytes(3, "big"), False).message
    with pytest.raises(SaslAuthenticationFailed, match="requires a security layer"):
        client.evaluate(offer)


def test_a_host_without_a_principal_is_named(realm: Realm) -> None:
    with pytest.raises(SaslAuthenticationFailed) as refused:
        realm.login(SERVICE).client("nowhere.herdless.test").first()
    assert str(refused.value) == (
        "GSSAPI: logging in to kafka@nowhere.herdless.test: Server"
        " kafka/nowhere.herdless.test@HERDLESS.TEST not found in Kerberos database"
    )


def config(tmp_path: Path, **raw: str) -> BrokerConfig:
    settings = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", **raw}
    return BrokerConfig(data_dir=str(tmp_path), security=SecuritySettings(settings))


def test_gssapi_between_brokers_must_be_enabled_on_the_listener(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="GSSAPI must be among the sasl.enabled.mechanisms"):
        inter_broker_security(
            config(tmp_path, **{"sasl.mechanism.inter.broker.protocol": "GSSAPI"})
        )


def test_gssapi_between_brokers_needs_the_listeners_kerberos_login(tmp_path: Path) -> None:
    settings = {
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.mechanism.inter.broker.protocol": "GSSAPI",
    }
    with pytest.raises(ConfigError, match="must give the broker's Kerberos login"):
        inter_broker_security(config(tmp_path, **settings))
    settings["sasl.jaas.config"] = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true"
        ' keyTab="/k" principal="kafka/h@R"; '
    )
    settings["sasl.kerberos.min.time.before.relogin"] = "soon"
    with pytest.raises(ConfigError, match="min.time.before.relogin must be an integer"):
        inter_broker_security(config(tmp_path, **settings))

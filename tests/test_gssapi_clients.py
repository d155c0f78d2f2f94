"""SASL_PLAINTEXT with GSSAPI against a real MIT KDC: confluent-kafka, kcat, kafka-python and
aiokafka log in with Kerberos tickets, produce, consume in a group and commit; a stale
keytab, a principal no rule maps and an expired ticket are refused with
SASL_AUTHENTICATION_FAILED and one line in the broker's log.

confluent-kafka's wheels cannot speak GSSAPI (their librdkafka has no Cyrus SASL), so
its runs use the build of tests/support/librdkafka_gssapi.py in a child process; kcat is
Debian's, on librdkafka 2.0 with Cyrus SASL's GSSAPI plugin.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gssapi
import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from herdless.testing.kerberos import MitKdc
from tests.support.broker import BrokerProcess, free_port, module_broker
from tests.support.librdkafka_gssapi import run_confluent_with_gssapi
from tests.support.secured_clients import run_aiokafka, run_kafka_python, run_kcat, values
from tests.support.wire import Wire

# Clients ask for a ticket to <service>/<the broker's host as they reach it>.
SERVICE = "kafka/127.0.0.1"
# Users of the realm by their first name; anyone else (carol/batch) is no one here.
RULES = r"RULE:[1:$1@$0](.*@HERDLESS\.TEST)s/@.*//"
SASL_AUTHENTICATION_FAILED = 58
FAILED_LINE = "SASL authentication failed"
source_hosts = (f"127.0.42.{n}" for n in itertools.count(1))


class Kerberized:
    def __init__(self, kdc: MitKdc, broker: BrokerProcess, ports: dict[str, int], base: Path):
        self.kdc = kdc
        self.broker = broker
        self.ports = ports
        self.base = base

    def keytab(self, name: str) -> Path:
        return self.kdc.directory / f"{name.replace('/', '_')}.keytab"


def krb5_login(kdc: MitKdc, broker_keytab: Path) -> str:
    return (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true"
        f' keyTab="{broker_keytab}" principal="{kdc.principal(SERVICE)}";'
    )


@pytest.fixture(scope="module")
def kerberized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kerberized]:
    base = tmp_path_factory.mktemp("gssapi")
    with MitKdc(base / "kdc") as kdc:
        kdc.add_principal(SERVICE)
        # A keytab made before the service's keys changed: what a broker left behind has.
        stale = kdc.keytab(SERVICE, base / "stale.keytab")
        kdc.change_keys(SERVICE)
        current = kdc.keytab(SERVICE, base / "kafka.keytab")
        for name in ("alice", "carol/batch"):
            kdc.add_principal(name)
            kdc.keytab(name)
        ports = {"SASL_PLAINTEXT": free_port(), "STALE": free_port()}
        settings = {
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,STALE:SASL_PLAINTEXT"
            ),
            "sasl.enabled.mechanisms": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "sasl.kerberos.principal.to.local.rules": RULES,
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": krb5_login(kdc, current),
            "listener.name.stale.gssapi.sasl.jaas.config": krb5_login(kdc, stale),
            "group.initial.rebalance.delay.ms": "0",
        }
        args = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
        env = ("env", *[f"{key}={value}" for key, value in kdc.environment().items()])
        with module_broker(base / "data", *args, listeners=listeners, prefix=env) as broker:
            yield Kerberized(kdc, broker, ports, base)


@pytest.fixture
def alice(kerberized: Kerberized, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Kerberized:
    """This process (and the clients it starts) in the realm, with alice's tickets."""
    ticket_cache = tmp_path / "alice.cc"
    for key, value in kerberized.kdc.environment(ticket_cache).items():
        monkeypatch.setenv(key, value)
    kerberized.kdc.kinit("alice", kerberized.keytab("alice"), ticket_cache)
    return kerberized


def librdkafka_settings(kerberized: Kerberized) -> dict[str, str]:
    # librdkafka logs in itself, running kinit with the keytab it is given.
    return {
        "bootstrap.servers": f"127.0.0.1:{kerberized.ports['SASL_PLAINTEXT']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.principal": "alice",
        "sasl.kerberos.keytab": str(kerberized.keytab("alice")),
    }


def python_settings(kerberized: Kerberized) -> dict[str, Any]:
    # kafka-python and aiokafka take the tickets already in the cache (the alice fixture's).
    return {
        "bootstrap_servers": f"127.0.0.1:{kerberized.ports['SASL_PLAINTEXT']}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka",
    }


CLIENTS = {
    "confluent-kafka": (run_confluent_with_gssapi, librdkafka_settings),
    "kcat": (run_kcat, librdkafka_settings),
    "kafka-python": (run_kafka_python, python_settings),
    "aiokafka": (run_aiokafka, python_settings),
}


def committed(broker: BrokerProcess, group: str, topic: str) -> int | None:
    """The group's committed offset, read over the PLAINTEXT listener."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        [partition] = consumer.committed([TopicPartition(topic, 0)], timeout=15)
        return partition.offset if partition.offset >= 0 else None
    finally:
        consumer.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_a_client_produces_consumes_in_a_group_and_commits(alice: Kerberized, client: str) -> None:
    run, settings_for = CLIENTS[client]
    topic, group = f"t-gssapi-{client}", f"g-gssapi-{client}"
    seen = run(settings_for(alice), topic, group)
    assert sorted(seen) == values(topic)
    assert committed(alice.broker, group, topic) == len(values(topic))


def failed_lines(broker: BrokerProcess) -> list[str]:
    return [line for line in broker.log_path.read_text().splitlines() if FAILED_LINE in line]


def log_in_raw(kerberized: Kerberized, port: int) -> tuple[int, str | None, list[str]]:
    """A GSSAPI login on the wire with this process's tickets, as kafka-python makes it:
    the answer's error code and message, and the broker's new failure lines."""
    before = len(failed_lines(kerberized.broker))
    wire = Wire(kerberized.broker, port=port, source_host=next(source_hosts))
    try:
        handshake: Any = wire.call(
            SaslHandshakeRequest[1](mechanism="GSSAPI"), SaslHandshakeResponse[1]
        )
        assert handshake.error_code == 0
        target = gssapi.Name("kafka@127.0.0.1", gssapi.NameType.hostbased_service)
        client = gssapi.SecurityContext(
            name=target.canonicalize(gssapi.MechType.kerberos), usage="initiate"
        )
        answer = authenticate(wire, client.step(None))
        while answer.error_code == 0 and not client.complete:
            answer = authenticate(wire, client.step(answer.auth_bytes) or b"")
        if answer.error_code == 0:  # the broker's offer of security layers: take none
            offer = client.unwrap(answer.auth_bytes).message
            answer = authenticate(wire, client.wrap(bytes([1]) + offer[1:], False).message)
        assert answer.error_code != 0, "the broker took a login it should have refused"
        # The broker closes the connection after its line and the failed-login delay.
        wire.sock.settimeout(10)
        assert wire.sock.recv(1) == b""
    finally:
        wire.close()
    return answer.error_code, answer.error_message, failed_lines(kerberized.broker)[before:]


def authenticate(wire: Wire, token: bytes) -> Any:
    return wire.call(SaslAuthenticateRequest[2](auth_bytes=token), SaslAuthenticateResponse[2])


def assert_refused(outcome: tuple[int, str | None, list[str]], cause: str) -> None:
    code, message, lines = outcome
    assert code == SASL_AUTHENTICATION_FAILED
    assert message == (
        "Authentication failed during authentication due to invalid credentials with SASL"
        " mechanism GSSAPI"
    )
    assert len(lines) == 1, lines
    assert cause in lines[0]


def test_a_broker_with_a_stale_keytab_refuses_every_ticket(alice: Kerberized) -> None:
    outcome = log_in_raw(alice, alice.ports["STALE"])
    assert_refused(outcome, "kafka/127.0.0.1@HERDLESS.TEST")


def test_a_principal_no_rule_maps_is_refused(
    kerberized: Kerberized, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ticket_cache = tmp_path / "carol.cc"
    for key, value in kerberized.kdc.environment(ticket_cache).items():
        monkeypatch.setenv(key, value)
    kerberized.kdc.kinit("carol/batch", kerberized.keytab("carol/batch"), ticket_cache)
    outcome = log_in_raw(kerberized, kerberized.ports["SASL_PLAINTEXT"])
    assert_refused(outcome, "No rules apply to carol/batch@HERDLESS.TEST")


def test_an_expired_ticket_is_refused(
    kerberized: Kerberized, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A client whose clock is 2 hours behind: its KDC's too, so it believes its tickets
    # (an hour's life at most) good, while to the broker they ended an hour ago.
    with kerberized.kdc.with_clock_offset(-7200) as behind:
        ticket_cache = tmp_path / "alice-behind.cc"
        for key, value in behind.environment(ticket_cache).items():
            monkeypatch.setenv(key, value)
        behind.kinit("alice", kerberized.keytab("alice"), ticket_cache)
        outcome = log_in_raw(kerberized, kerberized.ports["SASL_PLAINTEXT"])
    assert_refused(outcome, "Ticket expired")


def test_a_keytab_without_the_brokers_key_stops_the_start_with_one_line(
    kerberized: Kerberized, tmp_path: Path
) -> None:
    settings = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{free_port()}",
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.jaas.config": krb5_login(kerberized.kdc, kerberized.keytab("alice")),
    }
    args = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    result = subprocess.run(
        [sys.executable, "-m", "herdless", "serve", "--data-dir", str(tmp_path / "data"), *args],
        env={**os.environ, **kerberized.kdc.environment()},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: listener.name.sasl_plaintext.gssapi.sasl.jaas.config: cannot accept tickets"
        f" for kafka/127.0.0.1@HERDLESS.TEST with keytab {kerberized.keytab('alice')}:"
        f" No key table entry found for kafka/127.0.0.1@HERDLESS.TEST"
    ]

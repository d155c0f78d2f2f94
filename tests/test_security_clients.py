"""Every client over every secured listener of one broker: SSL with and without a client
certificate, SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
Each produces, consumes in a group and commits, as users would.

The broker has a PLAINTEXT listener too, where the test checks what the clients did (the
committed offsets) without going through the listener under test.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from herdless.cli.certs import CertificateFiles, write_certificates
from herdless.protocol.codec import REQUESTS, RESPONSES
from tests.support.broker import BrokerProcess, free_port, module_broker
from tests.support.secured_clients import (
    CLIENTS,
    RECORDS,
    SETUPS,
    Login,
    committed,
    librdkafka_settings,
    run_client,
    run_confluent,
    setup_id,
    values,
)

PASSWORD = "alice-Secret-7f3a"
# librdkafka re-authenticates at 90% of its session: 6 s leaves it a margin of 0.6 s,
# which a loaded machine's thread scheduling does not eat.
REAUTH_MS = 6000


class Secured:
    """The broker's secured listeners and the files clients need."""

    def __init__(
        self, broker: BrokerProcess, certificates: CertificateFiles, ports: dict[str, int]
    ):
        self.broker = broker
        self.certificates = certificates
        self.ports = ports


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("security")
    certificates = write_certificates(base / "certs", ["127.0.0.1", "localhost"])
    data_dir = base / "data"
    # The first user exists before the first start, as users create their admin.
    subprocess.run(
        ["herdless", "users", "add", "alice", "--password-stdin", "--data-dir", str(data_dir)],
        input=PASSWORD,
        text=True,
        check=True,
        capture_output=True,
    )
    ports = {name: free_port() for name in ("SSL", "SASL_PLAINTEXT", "SASL_SSL", "REAUTH")}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    settings = {
        # A listener whose sessions end after 3 s (KIP-368), for the re-authentication tests.
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,REAUTH:SASL_PLAINTEXT",
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certificates.broker,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certificates.ca,
        "ssl.client.auth": "requested",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "group.initial.rebalance.delay.ms": "0",
    }
    args = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    with module_broker(data_dir, *args, listeners=listeners) as broker:
        yield Secured(broker, certificates, ports)


def login(secured: Secured, listener: str, mechanism: str | None, certificate: bool) -> Login:
    files = secured.certificates
    return Login(
        f"127.0.0.1:{secured.ports[listener]}",
        listener,
        ca=files.ca if listener in ("SSL", "SASL_SSL") else None,
        certificate=files.client if certificate else None,
        key=files.client_key if certificate else None,
        mechanism=mechanism,
        username="alice" if mechanism else None,
        password=PASSWORD if mechanism else None,
    )


@pytest.mark.parametrize("setup", SETUPS, ids=setup_id)
@pytest.mark.parametrize("client", CLIENTS)
def test_a_client_produces_consumes_in_a_group_and_commits(
    secured: Secured, client: str, setup: tuple[str, str | None, bool]
) -> None:
    name = f"{client}-{setup_id(setup)}".lower().replace("_", "-")
    topic, group = f"t-{name}", f"g-{name}"
    seen = run_client(client, login(secured, *setup), topic, group)
    assert sorted(seen) == values(topic)
    assert committed(secured.broker.bootstrap, group, topic) == RECORDS


def whole_log(secured: Secured) -> str:
    return secured.broker.log_path.read_text(errors="replace")


def broker_log_since(secured: Secured, offset: int) -> str:
    return whole_log(secured)[offset:]


def wait_for_line(secured: Secured, offset: int, text: str) -> list[str]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [line for line in broker_log_since(secured, offset).splitlines() if text in line]
        if lines:
            return lines
        time.sleep(0.1)
    raise AssertionError(
        f"no line with {text!r} in the broker's log:\n{broker_log_since(secured, offset)}"
    )


def librdkafka_errors(settings: dict[str, str]) -> list[KafkaError]:
    """The errors a producer hears while it tries to connect."""
    errors: list[KafkaError] = []
    producer = Producer({**settings, "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    return errors


@pytest.mark.parametrize(
    ("name", "password", "mechanism"),
    [
        ("alice", "wrong-password", "SCRAM-SHA-256"),
        ("mallory", PASSWORD, "SCRAM-SHA-512"),
        ("alice", "wrong", "PLAIN"),
    ],
)
def test_a_failed_login_is_the_clients_error_and_one_broker_line(
    secured: Secured, name: str, password: str, mechanism: str
) -> None:
    offset = len(whole_log(secured))
    settings = librdkafka_settings(login(secured, "SASL_PLAINTEXT", mechanism, False))
    settings |= {"sasl.username": name, "sasl.password": password}
    errors = librdkafka_errors(settings)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str()
    lines = wait_for_line(secured, offset, "SASL authentication failed")
    assert "Traceback" not in broker_log_since(secured, offset)
    assert password not in broker_log_since(secured, offset) or password == PASSWORD
    assert all(mechanism in line or "Invalid username" in line for line in lines)
    # Nothing else changed: alice still logs in.
    assert run_confluent(
        librdkafka_settings(login(secured, "SASL_PLAINTEXT", "SCRAM-SHA-256", False)),
        f"after-{name}-{mechanism}".lower(),
        f"after-{name}-{mechanism}".lower(),
    )


def test_an_untrusted_client_certificate_fails_the_handshake_with_one_line(
    secured: Secured, tmp_path: Path
) -> None:
    stranger = write_certificates(tmp_path / "stranger", ["127.0.0.1"])  # another CA
    offset = len(whole_log(secured))
    settings = librdkafka_settings(login(secured, "SSL", None, False)) | {
        "ssl.certificate.location": str(stranger.client),
        "ssl.key.location": str(stranger.client_key),
    }
    errors: list[Any] = []
    producer = Producer({**settings, "error_cb": errors.append})
    producer.produce("never", b"x")
    assert producer.flush(5) == 1  # not delivered
    assert errors, "the client heard of no failure"
    lines = wait_for_line(secured, offset, "TLS handshake on listener SSL failed")
    assert any("CERTIFICATE_VERIFY_FAILED" in line for line in lines), lines
    assert "Traceback" not in broker_log_since(secured, offset)


def test_a_client_speaking_plaintext_to_a_tls_port_is_one_line(secured: Secured) -> None:
    offset = len(whole_log(secured))
    settings = librdkafka_settings(login(secured, "SSL", None, False)) | {
        "security.protocol": "PLAINTEXT"
    }
    errors: list[Any] = []
    producer = Producer({**settings, "error_cb": errors.append})
    producer.poll(3)
    producer.flush(0)
    lines = wait_for_line(secured, offset, "TLS handshake on listener SSL failed")
    assert "Traceback" not in broker_log_since(secured, offset)
    assert lines


def test_no_password_is_in_the_data_directory_or_the_log(secured: Secured) -> None:
    needle = PASSWORD.encode()
    for path in [secured.broker.log_path, *secured.broker.data_dir.rglob("*")]:
        if path.is_file():
            assert needle not in path.read_bytes(), f"{path} holds a password"


def test_a_server_name_that_is_not_ascii_is_one_line_not_a_traceback(secured: Secured) -> None:
    """Found by tools/fuzz_security.py: Python's ssl module printed a traceback for it."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        client.do_handshake()
    hello = outgoing.read().replace(b"localhost", b"localho\xf3t")
    offset = len(whole_log(secured))
    with socket.create_connection(("127.0.0.1", secured.ports["SSL"]), timeout=10) as sock:
        sock.sendall(hello)
        sock.recv(1024)
    wait_for_line(secured, offset, "named a server that is not ASCII")
    assert "Traceback" not in broker_log_since(secured, offset)


def test_a_client_that_re_authenticates_works_on_past_its_sessions_end(secured: Secured) -> None:
    """librdkafka re-authenticates (KIP-368) before connections.max.reauth.ms runs out, on
    the same connection: a producer sending for three sessions loses nothing."""
    settings = librdkafka_settings(
        replace(
            login(secured, "SASL_PLAINTEXT", "SCRAM-SHA-512", False),
            bootstrap=f"127.0.0.1:{secured.ports['REAUTH']}",
        )
    )
    offset = len(whole_log(secured))
    errors: list[Any] = []
    producer = Producer({**settings, "error_cb": errors.append, "linger.ms": 0})
    delivered: list[Any] = []
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    while time.monotonic() < deadline:
        producer.produce("reauth", b"x", on_delivery=lambda e, m: delivered.append(e))
        producer.flush(10)
        time.sleep(0.25)
    assert delivered and all(error is None for error in delivered), delivered
    assert not errors, errors
    # Logged in again on its connections, not disconnected and reconnected.
    assert "session expired" not in broker_log_since(secured, offset)


def test_a_connection_that_does_not_re_authenticate_is_closed_when_its_session_ends(
    secured: Secured,
) -> None:
    with socket.create_connection(("127.0.0.1", secured.ports["REAUTH"]), timeout=10) as sock:

        def call(api_key: int, version: int, **fields: Any) -> Any:
            message = REQUESTS[api_key](**fields)
            message.API_VERSION = version
            message.with_header(correlation_id=1, client_id="test")
            sock.sendall(bytes(message.encode(header=True, framed=True)))
            size = int.from_bytes(receive(sock, 4), "big")
            return RESPONSES[api_key].decode(receive(sock, size), version=version, header=True)

        assert call(17, 1, mechanism="PLAIN").error_code == 0
        answer = call(36, 2, auth_bytes=f"\0alice\0{PASSWORD}".encode())
        assert answer.error_code == 0
        assert 0 < answer.session_lifetime_ms <= REAUTH_MS
        assert call(18, 3, client_software_name="t", client_software_version="1").error_code == 0
        time.sleep(answer.session_lifetime_ms / 1000 + 0.2)
        with pytest.raises((ConnectionError, EOFError)):
            call(18, 3, client_software_name="t", client_software_version="1")


def receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("the broker closed the connection")
        data += chunk
    return data


def test_describe_configs_names_every_listener_as_bound_and_advertised(secured: Secured) -> None:
    admin = AdminClient({"bootstrap.servers": secured.broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(timeout=15)
    expected = {
        f"PLAINTEXT://127.0.0.1:{secured.broker.port}",
        *(f"{name}://127.0.0.1:{port}" for name, port in secured.ports.items()),
    }
    assert set(configs["listeners"].value.split(",")) == expected
    assert set(configs["advertised.listeners"].value.split(",")) == expected

"""`herdless certs DIR` run as a user runs it, and its files used for real handshakes."""

from __future__ import annotations

import ipaddress
import json
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509

from herdless.broker.auth.tls import server_context
from herdless.broker.config import read_properties
from herdless.security.settings import SecuritySettings
from tests.support.cli import assert_documented, herdless, refused, succeeded
from tests.support.tls import TlsServer, connect
from tests.support.tls import client_context as python_client
from tests.support.tls import refused as handshake_refused

FILES = ("ca.pem", "broker.pem", "client.pem", "client-key.pem")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    directory = tmp_path_factory.mktemp("certs") / "tls"
    args = ("certs", str(directory), "--host", "kafka.example", "--host", "10.1.2.3")
    document = json.loads(succeeded(herdless(*args, "--client", "alice", "-o", "json")))
    return directory, document


def test_it_writes_the_files_keys_for_their_owner_only(written: tuple[Path, dict]) -> None:
    directory, document = written
    assert_documented("certs DIR", document)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in directory.iterdir()}
    assert modes["broker.pem"] == modes["client-key.pem"] == 0o600
    assert modes["ca.pem"] & 0o077 != 0  # a certificate is no secret
    assert {f["file"] for f in document["files"]} == {str(p) for p in directory.iterdir()}
    assert document["principal"] == "User:CN=alice"


def test_the_broker_certificate_names_this_machine_and_the_hosts_given(
    written: tuple[Path, dict],
) -> None:
    directory, _ = written
    certificate = x509.load_pem_x509_certificates((directory / "broker.pem").read_bytes())[0]
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {"localhost", "kafka.example"}
    assert set(names.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address(a) for a in ("127.0.0.1", "::1", "10.1.2.3")
    }


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_its_files_and_settings_make_a_handshake(written: tuple[Path, dict], loop: str) -> None:
    directory, document = written
    # The broker settings as printed, and as written for `herdless serve --config`.
    broker = document["broker"]
    assert read_properties(directory / "broker.properties") == broker
    context = server_context(SecuritySettings(broker), "SSL")
    librdkafka = document["clients"]["confluent-kafka, kcat"]
    python = document["clients"]["kafka-python"]
    assert read_properties(directory / "client.properties") == librdkafka
    assert (python["ssl_cafile"], python["ssl_certfile"], python["ssl_keyfile"]) == (
        librdkafka["ssl.ca.location"],
        librdkafka["ssl.certificate.location"],
        librdkafka["ssl.key.location"],
    )
    with TlsServer(context, loop) as server:
        client = python_client(
            Path(librdkafka["ssl.ca.location"]),
            Path(librdkafka["ssl.certificate.location"]),
            Path(librdkafka["ssl.key.location"]),
        )
        for host in ("localhost", "127.0.0.1", "kafka.example"):
            connection = connect(server.port, client, host)
            assert connection.principal == document["principal"]
            connection.close()
        assert "mismatch" in handshake_refused(server.port, client, "elsewhere.example")
        # ssl.client.auth=required, as printed: no certificate, no connection.
        handshake_refused(server.port, python_client(Path(librdkafka["ssl.ca.location"])))


def test_a_second_run_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    directory = tmp_path / "tls"
    succeeded(herdless("certs", str(directory), "-o", "json"))
    before = {name: (directory / name).read_bytes() for name in FILES}
    result = herdless("certs", str(directory))
    refused(result, f"{directory / 'ca.pem'} already exists; --force overwrites it")
    assert {name: (directory / name).read_bytes() for name in FILES} == before
    succeeded(herdless("certs", str(directory), "--force", "-o", "json"))
    after = {name: (directory / name).read_bytes() for name in FILES}
    assert all(after[name] != before[name] for name in FILES)
    assert stat.S_IMODE((directory / "client-key.pem").stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--host", "bad host"], "--host 'bad host' is neither a host name nor an IP address"),
        (["--client", ""], "--client must be 1 to 64 characters"),
        (["--client", "x" * 65], "--client must be 1 to 64 characters"),
    ],
)
def test_bad_options_are_named(tmp_path: Path, args: list[str], words: str) -> None:
    refused(herdless("certs", str(tmp_path / "tls"), *args), words, code=2)
    assert not (tmp_path / "tls").exists()


def test_a_file_where_the_directory_belongs(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")
    refused(herdless("certs", str(tmp_path / "taken")), "not a directory")


def test_python_ssl_trusts_the_ca_strictly(written: tuple[Path, dict]) -> None:
    """OpenSSL's strict checks (Python 3.13's default) accept the chain: the CA has key
    usage and key identifiers."""
    directory, _ = written
    context = python_client(
        directory / "ca.pem", directory / "client.pem", directory / "client-key.pem"
    )
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    server = server_context(
        SecuritySettings(
            json.loads("{}")
            | {
                "ssl.keystore.location": str(directory / "broker.pem"),
                "ssl.truststore.location": str(directory / "ca.pem"),
                "ssl.client.auth": "required",
            }
        ),
        "SSL",
    )
    server.verify_flags |= ssl.VERIFY_X509_STRICT
    with TlsServer(server) as running:
        assert connect(running.port, context).principal == "User:CN=alice"

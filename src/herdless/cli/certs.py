"""`herdless certs DIR`: a throw-away CA with a broker and a client certificate, to try TLS.

It prints the broker settings that serve TLS with these files, and the client settings
that connect with them, for librdkafka (confluent-kafka, kcat) and kafka-python, and
writes the first as broker.properties (`herdless serve --config`) and librdkafka's as
client.properties (`kcat -F`). The
CA's private key is not kept: nothing more can be signed with it, and a new set is one
`--force` away.
"""

from __future__ import annotations

import datetime
import errno
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from herdless.cli.errors import USAGE, fail
from herdless.cli.output import OutputOption, Table, View, show

SSL_PORT = 9093
# The names a client on this machine reaches the broker by.
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
RDKAFKA = "confluent-kafka, kcat"
KAFKA_PYTHON = "kafka-python"
# X.520's upper bound on a common name, which cryptography enforces.
MAX_COMMON_NAME = 64
_HOST_NAME = re.compile(
    r"(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"
)


@dataclass(frozen=True)
class CertificateFiles:
    ca: Path  # the CA's certificate: the truststore of brokers and clients
    broker: Path  # the broker's key and certificate chain: a PEM keystore
    client: Path  # the client's certificate chain
    client_key: Path
    broker_properties: Path
    client_properties: Path  # librdkafka's settings, for kcat -F

    @classmethod
    def under(cls, directory: Path) -> CertificateFiles:
        return cls(
            *(directory / name for name in ("ca.pem", "broker.pem", "client.pem")),
            *(directory / name for name in ("client-key.pem", "broker.properties")),
            directory / "client.properties",
        )

    def all(self) -> tuple[Path, ...]:
        return (
            self.ca,
            self.broker,
            self.client,
            self.client_key,
            self.broker_properties,
            self.client_properties,
        )


def write_certificates(
    directory: Path,
    hosts: list[str] | None = None,
    client_name: str = "client",
    *,
    force: bool = False,
    days: int = 365,
) -> CertificateFiles:
    """Write a new CA's certificate, a broker keystore for `hosts` and this machine, and a
    client key and certificate for `client_name`. Keys are readable by their owner only.
    FileExistsError names a file already there, unless `force`."""
    from herdless.security.certificates import new_authority

    files = CertificateFiles.under(directory)
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(directory))
    if not force:
        for path in files.all():
            if path.exists():
                raise FileExistsError(path)
    now = datetime.datetime.now(datetime.UTC)
    ca = new_authority("herdless throw-away CA", now, days)
    broker = ca.issue(
        "broker", now, hosts=[*LOCAL_HOSTS, *(hosts or [])], server=True, client=True, days=days
    )
    client = ca.issue(client_name, now, client=True, days=days)
    directory.mkdir(parents=True, exist_ok=True)
    _write(files.ca, ca.certificate_pem(), 0o644)
    _write(files.broker, broker.keystore_pem(), 0o600)
    _write(files.client, client.chain_pem(), 0o644)
    _write(files.client_key, client.key_pem(), 0o600)
    address = _address((hosts or ["127.0.0.1"])[0])
    _write(files.broker_properties, _properties(broker_settings(files, address)), 0o644)
    _write(files.client_properties, _properties(client_settings(files, address)[RDKAFKA]), 0o644)
    return files


def certs(
    directory: Annotated[
        Path, typer.Argument(help="Where to write the files; made if it does not exist.")
    ],
    host: Annotated[
        list[str] | None,
        typer.Option(
            "--host",
            metavar="HOST",
            help="Another name or address clients reach the broker by, for its certificate"
            " (localhost, 127.0.0.1 and ::1 are always in it); repeatable.",
        ),
    ] = None,
    client: Annotated[
        str, typer.Option("--client", help="The client certificate's common name (CN).")
    ] = "client",
    days: Annotated[int, typer.Option(min=1, help="How long the certificates are valid.")] = 365,
    force: Annotated[bool, typer.Option("--force", help="Overwrite files already there.")] = False,
    output: OutputOption = None,
) -> None:
    """Write a throw-away CA, a broker certificate and a client certificate to DIRECTORY,
    and print the broker and client settings that use them."""
    if not client.strip() or len(client) > MAX_COMMON_NAME:
        raise fail(f"--client must be 1 to {MAX_COMMON_NAME} characters, not {client!r}", USAGE)
    for name in host or []:
        if not _is_host(name):
            raise fail(f"--host {name!r} is neither a host name nor an IP address", USAGE)
    try:
        files = write_certificates(directory, host, client, force=force, days=days)
    except FileExistsError as exc:
        raise fail(f"{exc.args[0]} already exists; --force overwrites it") from None
    except OSError as exc:
        raise fail(f"cannot write to {directory}: {exc.strerror or exc}") from None
    show(_view(files, _address((host or ["127.0.0.1"])[0])), output)


def broker_settings(files: CertificateFiles, address: str) -> dict[str, str]:
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:9092,SSL://{address}",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": _absolute(files.broker),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": _absolute(files.ca),
        "ssl.client.auth": "required",
    }


def client_settings(files: CertificateFiles, address: str) -> dict[str, dict[str, str]]:
    ca, client, key = (_absolute(p) for p in (files.ca, files.client, files.client_key))
    return {
        RDKAFKA: {
            "bootstrap.servers": address,
            "security.protocol": "SSL",
            "ssl.ca.location": ca,
            "ssl.certificate.location": client,
            "ssl.key.location": key,
        },
        KAFKA_PYTHON: {
            "bootstrap_servers": address,
            "security_protocol": "SSL",
            "ssl_cafile": ca,
            "ssl_certfile": client,
            "ssl_keyfile": key,
        },
    }


def _view(files: CertificateFiles, address: str) -> View:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    from herdless.security.distinguished_name import subject_name
    from herdless.security.principal_mapping import SslPrincipalMapper, principal_from_certificate

    settings = broker_settings(files, address)
    clients = client_settings(files, address)
    certificate = x509.load_pem_x509_certificates(files.client.read_bytes())[0].public_bytes(
        serialization.Encoding.DER
    )
    principal = principal_from_certificate(certificate, SslPrincipalMapper.from_rules(None))
    written = [
        (files.ca, "the CA's certificate: what brokers and clients trust"),
        (files.broker, "the broker's private key and certificate (a PEM keystore)"),
        (files.client, f"the client's certificate, for {subject_name(certificate)}"),
        (files.client_key, "the client's private key"),
        (files.broker_properties, "the broker settings below"),
        (files.client_properties, f"the {RDKAFKA} settings below"),
    ]
    rows = [(_absolute(path), holds) for path, holds in written]
    return View(
        data={
            "files": [{"file": path, "holds": holds} for path, holds in rows],
            "broker": settings,
            "clients": clients,
            "principal": str(principal),
        },
        tables=[
            Table(("FILE", "HOLDS"), rows),
            Table(("BROKER SETTING", "VALUE"), list(settings.items())),
            Table(
                ("CLIENT", "SETTING", "VALUE"),
                [(name, k, v) for name, pairs in clients.items() for k, v in pairs.items()],
            ),
        ],
        heading=f"A throw-away CA and certificates in {_absolute(files.ca.parent)}",
        notes=[
            f"herdless serve --config {_absolute(files.broker_properties)} serves them;"
            f" kcat -F {_absolute(files.client_properties)} -L connects with them.",
            f"A client with this certificate is {principal};"
            " ssl.client.auth=requested would also take clients without one.",
        ],
    )


def _is_host(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return _HOST_NAME.fullmatch(name) is not None
    return True


def _address(host: str) -> str:
    return f"[{host}]:{SSL_PORT}" if ":" in host else f"{host}:{SSL_PORT}"


def _absolute(path: Path) -> str:
    return str(path.resolve())


def _properties(settings: dict[str, str]) -> bytes:
    lines = ["# written by herdless certs", *(f"{k}={v}" for k, v in settings.items())]
    return ("\n".join(lines) + "\n").encode()


def _write(path: Path, content: bytes, mode: int) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "wb") as file:
        os.fchmod(file.fileno(), mode)  # also when --force rewrites a file made otherwise
        file.write(content)

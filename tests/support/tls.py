"""Certificates on disk and TLS endpoints for tests: a server on a real event loop
(asyncio's or uvloop) in its own thread, and Python ssl clients that talk to it."""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

import uvloop  # the broker runs on it: a missing uvloop fails these tests loudly
from cryptography import x509

from herdless.broker.auth.tls import peer_principal
from herdless.security.certificates import Authority, Issued, new_authority
from herdless.security.principal_mapping import SslPrincipalMapper

LOOPS = ("asyncio", "uvloop")


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass
class Pki:
    """A CA, a broker certificate for localhost and 127.0.0.1, and a client's, on disk."""

    directory: Path
    ca: Authority
    broker: Issued
    client: Issued

    @classmethod
    def create(cls, directory: Path, client_name: str = "client") -> Pki:
        ca = new_authority("test CA", now())
        pki = cls(
            directory,
            ca,
            ca.issue("broker", now(), hosts=["localhost", "127.0.0.1"], server=True, client=True),
            ca.issue(client_name, now(), client=True),
        )
        pki.ca_file.write_bytes(ca.certificate_pem())
        pki.broker_file.write_bytes(pki.broker.keystore_pem())
        pki.client_file.write_bytes(pki.client.chain_pem())
        pki.client_key_file.write_bytes(pki.client.key_pem())
        return pki

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def broker_file(self) -> Path:
        return self.directory / "broker.pem"

    @property
    def client_file(self) -> Path:
        return self.directory / "client.pem"

    @property
    def client_key_file(self) -> Path:
        return self.directory / "client-key.pem"

    def server_settings(self, **more: str) -> dict[str, str]:
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.broker_file),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
            **more,
        }

    def write_client(self, issued: Issued, name: str) -> tuple[Path, Path]:
        certificate, key = self.directory / f"{name}.pem", self.directory / f"{name}-key.pem"
        certificate.write_bytes(issued.chain_pem())
        key.write_bytes(issued.key_pem())
        return certificate, key


def replace_file(path: Path, content: bytes) -> None:
    """Replace a file as tools that rotate certificates do: a new file renamed over it."""
    staged = path.with_name(path.name + ".new")
    staged.write_bytes(content)
    staged.replace(path)


class TlsServer:
    """An asyncio TLS server on 127.0.0.1 in a thread. To each connection it says one
    line, `principal|version|cipher`, then echoes lines until the client closes."""

    def __init__(
        self, context: ssl.SSLContext, loop: str = "asyncio", rules: str | None = None
    ) -> None:
        self.context = context
        self.loop_kind = loop
        self.mapper = SslPrincipalMapper.from_rules(rules)
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._answering: set[asyncio.Task[None]] = set()

    def __enter__(self) -> TlsServer:
        self._thread.start()
        assert self._ready.wait(10), "the TLS server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        loop = uvloop.new_event_loop() if self.loop_kind == "uvloop" else asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._answer, "127.0.0.1", 0, ssl=self.context)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        server.close()
        for task in self._answering:
            task.cancel()
        await asyncio.gather(*self._answering, return_exceptions=True)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)
        ssl_object = writer.get_extra_info("ssl_object")
        principal = peer_principal(ssl_object, self.mapper)
        cipher = ssl_object.cipher()[0]
        writer.write(f"{principal}|{ssl_object.version()}|{cipher}\n".encode())
        try:
            while line := await reader.readline():
                writer.write(line)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        writer.close()


def client_context(
    ca: Path | None,
    certificate: Path | None = None,
    key: Path | None = None,
    *,
    minimum: ssl.TLSVersion | None = None,
    maximum: ssl.TLSVersion | None = None,
    ciphers: str | None = None,
) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca is not None:
        context.load_verify_locations(ca)
    if certificate is not None:
        context.load_cert_chain(certificate, key)
    if minimum is not None:
        context.minimum_version = minimum
    if maximum is not None:
        context.maximum_version = maximum
    if ciphers is not None:
        context.set_ciphers(ciphers)
    return context


@dataclass
class Connection:
    sock: ssl.SSLSocket
    greeting: str  # principal|version|cipher

    @property
    def principal(self) -> str:
        return self.greeting.split("|")[0]

    @property
    def version(self) -> str:
        return self.greeting.split("|")[1]

    @property
    def cipher(self) -> str:
        return self.greeting.split("|")[2]

    @property
    def server_certificate(self) -> x509.Certificate:
        return x509.load_der_x509_certificate(self.sock.getpeercert(binary_form=True))

    def echo(self, text: str) -> str:
        self.sock.sendall(text.encode() + b"\n")
        return _line(self.sock)

    def close(self) -> None:
        self.sock.close()


def connect(port: int, context: ssl.SSLContext, host: str = "localhost") -> Connection:
    """A TLS connection that the server accepted: it answered its greeting."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock = context.wrap_socket(raw, server_hostname=host)
        return Connection(sock, _line(sock))
    except BaseException:
        raw.close()
        raise


def refused(port: int, context: ssl.SSLContext, host: str = "localhost") -> str:
    """What the client saw when the server (or the client itself) failed the handshake.
    With TLS 1.3 a client learns that its certificate was refused only on its first
    read, so a handshake that seemed to work must then fail to read the greeting. A
    server on asyncio or uvloop closes the connection without sending its TLS alert, so
    a client sees an EOF rather than the alert's reason."""
    try:
        connection = connect(port, context, host)
    except ssl.SSLError as exc:
        return str(exc)
    except (ConnectionError, EOFError) as exc:
        return repr(exc)
    connection.close()
    raise AssertionError(f"the connection was accepted: {connection.greeting}")


def _line(sock: ssl.SSLSocket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise EOFError(f"connection closed after {data!r}")
        data += chunk
    return data.decode().rstrip("\n")

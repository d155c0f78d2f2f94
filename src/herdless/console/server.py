"""The console's HTTP server: the standard library's, on threads of its own.

It answers GETs of pages drawn from the sampler's last look (and, with a login,
the login form and logout), so it needs no framework, and, on threads of its
own, it never runs on a broker's event loop when `herdless serve` hosts it. With
a TLS context it serves HTTPS, each handshake on the thread of its connection.
"""

from __future__ import annotations

import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from herdless.console.clients import ClientTelemetry
from herdless.console.login import COOKIE, Login, LoginUnavailable, Viewer
from herdless.console.pages import Pages, Response
from herdless.console.sampler import Sampler

log = logging.getLogger(__name__)

# Pages load their script and styles from the console alone; nothing inline runs.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
        " frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
WILDCARD_HOSTS = ("", "0.0.0.0", "::")
# A login form is a few dozen bytes; a body beyond this is refused unread.
MAX_FORM_BYTES = 4096
# A browser that starts a TLS connection and says nothing holds a thread this long.
HANDSHAKE_TIMEOUT_S = 10.0


class Console:
    """A console listening on (host, port) from construction: a port that cannot be
    had fails here (OSError), before anything else starts."""

    def __init__(
        self,
        host: str,
        port: int,
        interval_s: float,
        *,
        tls: ssl.SSLContext | None = None,
        login_required: bool = False,
        client_settings: Mapping[str, str] | None = None,
        metrics_urls: Sequence[str] = (),
    ) -> None:
        self.interval_s = interval_s
        # The brokers' /metrics, where the clients page reads clients' pushed metrics.
        self.metrics_urls = tuple(metrics_urls)
        # How the console's own client connects (librdkafka's names), and to which
        # brokers when they name them.
        self.client_settings = dict(client_settings or {})
        # Whoever starts it gives it the Login (the broker's credentials and authorizer).
        self.login_required = login_required
        self._server = _Server((host, port), _Handler)
        self._server.tls = tls
        self._thread: threading.Thread | None = None
        self.sampler: Sampler | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        if host in WILDCARD_HOSTS:
            host = "127.0.0.1" if self._server.address_family == socket.AF_INET else "::1"
        shown = f"[{host}]" if ":" in str(host) else host
        scheme = "https" if self._server.tls is not None else "http"
        return f"{scheme}://{shown}:{port}/"

    def start(self, bootstrap: str, login: Login | None = None) -> None:
        """Start sampling the brokers at `bootstrap` (unless the client settings name
        theirs) and answering requests, after a `login` if given."""
        if self.login_required and login is None:
            raise ValueError("this console asks for a login: give it one")
        self._server.login = login
        bootstrap = self.client_settings.get("bootstrap.servers") or bootstrap
        self.sampler = Sampler(bootstrap, self.interval_s, self.client_settings)
        telemetry = ClientTelemetry(self.metrics_urls, self.interval_s)
        self._server.pages = Pages(self.sampler, telemetry=telemetry)
        self.sampler.start()
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="herdless-console-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop answering and sampling; a second call does nothing."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._server.shutdown()
            thread.join()
        self._server.server_close()
        if self.sampler is not None:
            self.sampler.stop()
        if self._server.login is not None:
            self._server.login.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    pages: Pages | None = None
    tls: ssl.SSLContext | None = None
    login: Login | None = None

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """On the connection's own thread: the TLS handshake first, when serving TLS."""
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            secured = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            # Plain HTTP to the HTTPS port, an untrusted certificate: that browser's matter.
            log.debug("TLS handshake with %s failed: %s", client_address, exc)
            return
        try:
            secured.settimeout(None)
            super().finish_request(secured, client_address)
        finally:
            secured.close()

    def handle_error(self, request: object, client_address: object) -> None:
        """A browser that goes away mid-answer (a tab closed during a refresh) is no
        error; socketserver would print its traceback on stderr."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):
            log.debug("%s went away: %s", client_address, error)
        else:
            log.exception("the console failed answering %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "herdless-console"

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        self._answer(send_body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(send_body=False)

    def do_POST(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path
        login, pages = self.server.login, self.server.pages
        if login is None or pages is None or path not in ("/login", "/logout"):
            self._send(Response(405, b"the console changes nothing", "text/plain"), True)
            return
        if path == "/logout":
            login.sessions.close(self._token())
            self._send(self._redirect("/login", self._cookie("", max_age=0)), True)
            return
        length = self.headers.get("Content-Length") or ""
        if not length.isdigit() or not 0 < int(length) <= MAX_FORM_BYTES:
            self._send(pages.login_page(400, "Give a user name and a password."), True)
            return
        form = parse_qs(self.rfile.read(int(length)).decode(errors="replace"))
        user = form.get("user", [""])[0]
        try:
            accepted = login.check(user, form.get("password", [""])[0])
        except LoginUnavailable as exc:
            self._send(pages.login_page(503, f"The brokers cannot check a login now: {exc}"), True)
            return
        if not accepted:
            # One answer for an unknown user and a wrong password, as Kafka's.
            log.info("console login refused for user %r from %s", user, self.client_address[0])
            self._send(pages.login_page(401, "Wrong user name or password."), True)
            return
        token = login.sessions.open(user, time.monotonic())
        self._send(self._redirect("/groups", self._cookie(token)), True)

    def _answer(self, send_body: bool) -> None:
        url = urlsplit(self.path)
        pages, login = self.server.pages, self.server.login
        fragment = parse_qs(url.query).get("fragment") == ["1"]
        if pages is None:
            self._send(Response(503, b"starting", "text/plain; charset=utf-8"), send_body)
            return
        viewer = None
        if login is not None and url.path == "/login":
            self._send(pages.login_page(200), send_body)
            return
        if login is not None and not url.path.startswith("/static/"):
            user = login.sessions.user(self._token(), time.monotonic())
            if user is None:
                # A page's refresh gets a status its script can act on, a person the form.
                gone = Response(401, b"log in again", "text/plain; charset=utf-8")
                self._send(gone if fragment else self._redirect("/login"), send_body)
                return
            viewer = Viewer(user, self.client_address[0], login)
        try:
            response = pages.get(url.path, fragment, viewer, parse_qs(url.query))
        except Exception:
            log.exception("the console failed to draw %s", self.path)
            response = Response(500, b"the console failed to draw this page", "text/plain")
        self._send(response, send_body)

    def _token(self) -> str | None:
        try:
            cookie = SimpleCookie(self.headers.get("Cookie") or "")
        except CookieError:
            return None
        morsel = cookie.get(COOKIE)
        return morsel.value if morsel is not None else None

    def _cookie(self, token: str, max_age: int | None = None) -> dict[str, str]:
        # Never sent to scripts or with requests from other sites; over TLS, only over TLS.
        attributes = "; Path=/; HttpOnly; SameSite=Strict"
        if self.server.tls is not None:
            attributes += "; Secure"
        if max_age is not None:
            attributes += f"; Max-Age={max_age}"
        return {"Set-Cookie": f"{COOKIE}={token}{attributes}"}

    @staticmethod
    def _redirect(location: str, headers: Mapping[str, str] | None = None) -> Response:
        return Response(303, b"", headers={"Location": location, **(headers or {})})

    def _send(self, response: Response, send_body: bool) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in {**SECURITY_HEADERS, **response.headers}.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
        log.debug("%s %s", self.address_string(), format % args)


def tls_context(keystore: str) -> ssl.SSLContext:
    """A server context with the private key and certificate chain in one PEM file (a
    PEM key store, as Kafka's ssl.keystore.type=PEM and `herdless certs`' broker.pem);
    TLS 1.2 at least. OSError or ssl.SSLError says why the file will not do."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(keystore)
    return context

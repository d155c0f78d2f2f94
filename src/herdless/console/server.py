"""The console's HTTP server: the standard library's, on threads of its own.

It only answers GETs of pages drawn from the sampler's last look, so it needs
no framework, and, on threads of its own, it never runs on a broker's event loop
when `herdless serve` hosts it.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

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


class Console:
    """A console listening on (host, port) from construction: a port that cannot be
    had fails here (OSError), before anything else starts."""

    def __init__(self, host: str, port: int, interval_s: float) -> None:
        self.interval_s = interval_s
        self._server = _Server((host, port), _Handler)
        self._thread: threading.Thread | None = None
        self.sampler: Sampler | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        if host in WILDCARD_HOSTS:
            host = "127.0.0.1" if self._server.address_family == socket.AF_INET else "::1"
        shown = f"[{host}]" if ":" in str(host) else host
        return f"http://{shown}:{port}/"

    def start(self, bootstrap: str, client_settings: Mapping[str, str] | None = None) -> None:
        """Start sampling the brokers at `bootstrap` (connecting with `client_settings`,
        librdkafka's names) and answering requests."""
        self.sampler = Sampler(bootstrap, self.interval_s, client_settings)
        self._server.pages = Pages(self.sampler)
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    pages: Pages | None = None

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

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

    def _answer(self, send_body: bool) -> None:
        url = urlsplit(self.path)
        pages = self.server.pages
        if pages is None:
            response = Response(503, b"starting", "text/plain; charset=utf-8")
        else:
            fragment = parse_qs(url.query).get("fragment") == ["1"]
            try:
                response = pages.get(url.path, fragment)
            except Exception:
                log.exception("the console failed to draw %s", self.path)
                response = Response(500, b"the console failed to draw this page", "text/plain")
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

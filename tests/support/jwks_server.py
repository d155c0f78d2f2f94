"""A test identity provider's JWKS endpoint: HTTPS on 127.0.0.1 in a thread of its own,
serving whatever key set the test gives it and counting the fetches."""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.tokens import SigningKey, jwks


class JwksServer:
    def __init__(self, keystore: Path, *keys: SigningKey) -> None:
        """`keystore`: a PEM file with the server's key and certificate chain."""
        self.document: dict[str, Any] = jwks(*keys)
        self.fetches = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.fetches += 1
                body = json.dumps(server.document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(keystore)
        self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
        self.url = f"https://localhost:{self._http.server_address[1]}/jwks.json"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def serve(self, *keys: SigningKey) -> None:
        self.document = jwks(*keys)

    def __enter__(self) -> JwksServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

"""Hearing of TLS handshakes that fail.

The event loops (asyncio's and uvloop) drop a connection whose handshake fails without a
word, outside debug mode, and before the broker's protocol ever sees it. Both shake hands
through the context's SSLObject class, so a subclass that reports a failed do_handshake()
is how the broker learns of it. The client's address is not known at that depth: the line
names the listener and the reason (an untrusted certificate, PLAINTEXT spoken to a TLS
port, no common protocol or cipher).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable


def reporting_handshakes(failed: Callable[[ssl.SSLError], None]) -> type[ssl.SSLObject]:
    """An SSLObject class whose failed handshakes are told to `failed`."""

    class ReportingSSLObject(ssl.SSLObject):
        def do_handshake(self) -> None:
            try:
                super().do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                raise  # the handshake waits for the peer: not a failure
            except ssl.SSLError as error:
                failed(error)
                raise

    return ReportingSSLObject

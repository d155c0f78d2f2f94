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
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


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


def quiet_server_name_errors(failed: Callable[[str], None]) -> None:
    """Turn Python's traceback for a ClientHello whose server name is not ASCII into a call
    of `failed`. The ssl module decodes the name before the context's SNI callback (which
    hands each handshake the latest certificates, broker/auth/tls.py) and, when it cannot,
    prints the error as an unraisable exception: a client could fill the log with them.
    The handshake itself fails as it should (CALLBACK_FAILED, reported as any other)."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        frames = traceback.extract_tb(unraisable.exc_traceback)
        if (
            isinstance(unraisable.exc_value, UnicodeError)
            and frames
            and frames[-1].name == "do_handshake"
            and Path(frames[-1].filename).name == "ssl.py"
        ):
            failed(f"a ClientHello named a server that is not ASCII: {unraisable.object!r:.80}")
            return
        previous(unraisable)

    sys.unraisablehook = hook

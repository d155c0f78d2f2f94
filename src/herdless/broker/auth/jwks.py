"""The identity provider's JWKS, fetched from sasl.oauthbearer.jwks.endpoint.url and kept
fresh, as Kafka's RefreshingHttpsJwks keeps it: again every
sasl.oauthbearer.jwks.endpoint.refresh.ms, and soon after a token names a kid the set
lacks (a provider that rotated its keys). A failed fetch is retried with backoff
(sasl.oauthbearer.jwks.endpoint.retry.backoff.ms up to ...retry.backoff.max.ms); the keys
already held stay in use meanwhile.

Fetches run on a thread of their own: an identity provider that is slow to answer
never holds up the event loop, where tokens are checked against the latest set. A
file: URL is read once before the listener starts, so a missing or unreadable file
stops the start, as it stops Kafka's.
"""

from __future__ import annotations

import http.client
import logging
import ssl
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable

from herdless.security.oauthbearer_jwt import JsonWebKeySet, MissingKeyIds

log = logging.getLogger("herdless.broker.auth.jwks")

SCHEMES = ("file", "http", "https")
# A JWKS holds a few keys; anything much larger is not one.
MAX_JWKS_BYTES = 1 << 20
FETCH_TIMEOUT_S = 10.0


class JwksError(Exception):
    """The JWKS could not be fetched or read; the message says which and why."""


def fetch_jwks(url: str, ssl_context: ssl.SSLContext | None = None) -> JsonWebKeySet:
    """The key set at `url` (file:, http: or https:). Blocking: call it off the loop."""
    try:
        with urllib.request.urlopen(  # noqa: S310 (the scheme is checked by the caller)
            url, timeout=FETCH_TIMEOUT_S, context=ssl_context
        ) as response:
            body = response.read(MAX_JWKS_BYTES + 1)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise JwksError(f"could not fetch the JWKS from {url}: {exc}") from None
    if len(body) > MAX_JWKS_BYTES:
        raise JwksError(f"the JWKS from {url} is larger than {MAX_JWKS_BYTES} bytes")
    try:
        return JsonWebKeySet.from_json(body)
    except ValueError as exc:
        raise JwksError(f"{url}: {exc}") from None


class RefreshingJwks:
    """A KeySource (security/oauthbearer_jwt.py) that refreshes itself."""

    def __init__(
        self,
        url: str,
        refresh_ms: int,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 10_000,
        ssl_context: ssl.SSLContext | None = None,
        fetch: Callable[[str, ssl.SSLContext | None], JsonWebKeySet] = fetch_jwks,
    ) -> None:
        """JwksError when a file: URL cannot be read now."""
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme not in SCHEMES:
            raise JwksError(f"{url}: only file, http and https URLs are served")
        if refresh_ms <= 0:
            raise JwksError(f"the JWKS refresh interval must be positive, not {refresh_ms} ms")
        self.location = url
        self._refresh_ms = refresh_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = max(retry_backoff_max_ms, retry_backoff_ms)
        self._ssl_context = ssl_context
        self._fetch = fetch
        self._keys: JsonWebKeySet | None = None
        self._lock = threading.Lock()
        self._missing = MissingKeyIds()
        self._wake = threading.Event()
        self._closed = threading.Event()
        if scheme == "file":
            self._keys = fetch(url, ssl_context)
        self._thread = threading.Thread(target=self._run, name=f"herdless-jwks {url}", daemon=True)
        self._thread.start()

    def current(self) -> JsonWebKeySet | None:
        return self._keys

    def key_missing(self, kid: str | None, now_ms: int) -> None:
        with self._lock:
            refresh = self._missing.should_refresh(kid or "", now_ms)
        if refresh:
            log.info(
                "fetching the JWKS from %s again: it has no key for kid %r", self.location, kid
            )
            self._wake.set()

    def close(self) -> None:
        self._closed.set()
        self._wake.set()

    def _run(self) -> None:
        # A file: set was read at start; a URL's is fetched first thing.
        if self._keys is not None:
            self._wait()
        while not self._closed.is_set():
            self._refresh()
            self._wait()

    def _wait(self) -> None:
        """Until the next scheduled refresh, or a missing kid asks for one sooner."""
        self._wake.wait(self._refresh_ms / 1000)
        self._wake.clear()

    def _refresh(self) -> None:
        keys = self._fetch_with_retries()
        if keys is None:
            return
        previous, self._keys = self._keys, keys
        with self._lock:
            self._missing.found(keys.key_ids)
        if previous is None or previous.key_ids != keys.key_ids:
            log.info("JWKS from %s: key ids %s", self.location, sorted(keys.key_ids))

    def _fetch_with_retries(self) -> JsonWebKeySet | None:
        """The set, fetched again after each failure with a doubled wait, until the wait
        would pass the backoff's maximum (then None: the next refresh tries again)."""
        backoff_ms = self._retry_backoff_ms
        while True:
            try:
                return self._fetch(self.location, self._ssl_context)
            except JwksError as exc:
                if backoff_ms > self._retry_backoff_max_ms:
                    log.warning("%s; keeping the keys held until the next refresh", exc)
                    return None
            if self._closed.wait(backoff_ms / 1000):
                return None
            backoff_ms *= 2

"""The JWKS kept fresh off the event loop: fetched from a file: or https: URL, again every
refresh interval and soon after a token names an unknown kid; a failed fetch keeps the
keys held."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from herdless.broker.auth.jwks import JwksError, RefreshingJwks, fetch_jwks
from herdless.broker.auth.tls import client_context
from herdless.cli.certs import CertificateFiles, write_certificates
from herdless.security.oauthbearer_jwt import JsonWebKeySet
from herdless.security.settings import SecuritySettings
from tests.support.jwks_server import JwksServer
from tests.support.tokens import SigningKey, write_jwks

HOUR_MS = 3_600_000


def eventually(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.01)


def key_ids(jwks: RefreshingJwks) -> frozenset[str]:
    current = jwks.current()
    return frozenset() if current is None else current.key_ids


@pytest.fixture
def keys() -> tuple[SigningKey, SigningKey]:
    return SigningKey.named("key-1"), SigningKey.named("key-2")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> CertificateFiles:
    return write_certificates(tmp_path_factory.mktemp("certs"), ["127.0.0.1", "localhost"])


@pytest.fixture
def refreshing() -> Iterator[list[RefreshingJwks]]:
    made: list[RefreshingJwks] = []
    yield made
    for jwks in made:
        jwks.close()


def test_a_file_is_read_at_start_and_again_every_refresh_interval(
    tmp_path: Path, keys: tuple[SigningKey, SigningKey], refreshing: list[RefreshingJwks]
) -> None:
    first, second = keys
    path = write_jwks(tmp_path / "jwks.json", first)
    jwks = RefreshingJwks(path.as_uri(), refresh_ms=50)
    refreshing.append(jwks)
    current = jwks.current()
    assert current is not None and current.key_ids == {"key-1"}
    write_jwks(path, second)
    eventually(lambda: key_ids(jwks) == {"key-2"})


def test_an_unknown_kid_fetches_the_set_again_at_once(
    tmp_path: Path, keys: tuple[SigningKey, SigningKey], refreshing: list[RefreshingJwks]
) -> None:
    first, second = keys
    path = write_jwks(tmp_path / "jwks.json", first)
    fetched: list[str] = []

    def counting(url: str, context: object) -> JsonWebKeySet:
        fetched.append(url)
        return fetch_jwks(url)

    jwks = RefreshingJwks(path.as_uri(), refresh_ms=HOUR_MS, fetch=counting)
    refreshing.append(jwks)
    write_jwks(path, first, second)
    jwks.key_missing("key-2", now_ms=0)
    eventually(lambda: "key-2" in key_ids(jwks))
    # The same kid again within the minute asks for nothing more.
    jwks.key_missing("key-2", now_ms=1_000)
    jwks.key_missing("key-3", now_ms=1_000)
    eventually(lambda: len(fetched) == 3)
    time.sleep(0.1)
    assert len(fetched) == 3


def test_a_failed_fetch_keeps_the_keys_held_and_is_retried_with_backoff(
    tmp_path: Path, keys: tuple[SigningKey, SigningKey], refreshing: list[RefreshingJwks]
) -> None:
    first, second = keys
    path = write_jwks(tmp_path / "jwks.json", first)
    attempts: list[float] = []

    def flaky(url: str, context: object) -> JsonWebKeySet:
        attempts.append(time.monotonic())
        # The read at start succeeds, then the next two fail.
        if 1 < len(attempts) < 4:
            raise JwksError("the identity provider is down")
        return fetch_jwks(url)

    jwks = RefreshingJwks(
        path.as_uri(),
        refresh_ms=HOUR_MS,
        retry_backoff_ms=20,
        retry_backoff_max_ms=1000,
        fetch=flaky,
    )
    refreshing.append(jwks)
    write_jwks(path, second)
    jwks.key_missing("key-2", now_ms=0)
    eventually(lambda: len(attempts) == 4)
    eventually(lambda: key_ids(jwks) == {"key-2"})
    assert attempts[3] - attempts[2] >= attempts[2] - attempts[1] >= 0.02


def test_a_file_that_cannot_be_read_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(JwksError, match="could not fetch"):
        RefreshingJwks((tmp_path / "absent.json").as_uri(), refresh_ms=HOUR_MS)
    (tmp_path / "bad.json").write_text('{"keys": []}')
    with pytest.raises(JwksError, match="no key that can verify"):
        RefreshingJwks((tmp_path / "bad.json").as_uri(), refresh_ms=HOUR_MS)
    with pytest.raises(JwksError, match="only file, http and https"):
        RefreshingJwks("ftp://idp.example/jwks.json", refresh_ms=HOUR_MS)


def test_an_https_endpoint_is_fetched_off_the_caller_s_thread_and_refreshed(
    certificates: CertificateFiles,
    keys: tuple[SigningKey, SigningKey],
    refreshing: list[RefreshingJwks],
) -> None:
    first, second = keys
    context = client_context(
        SecuritySettings(
            {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certificates.ca)}
        ),
        "jwks",
    )
    with JwksServer(certificates.broker, first) as server:
        jwks = RefreshingJwks(server.url, refresh_ms=100, ssl_context=context)
        refreshing.append(jwks)
        eventually(lambda: jwks.current() is not None)
        server.serve(second)
        eventually(lambda: key_ids(jwks) == {"key-2"})
        assert server.fetches >= 2


def test_an_https_endpoint_whose_certificate_is_not_trusted_is_not_fetched(
    certificates: CertificateFiles, keys: tuple[SigningKey, SigningKey]
) -> None:
    with (
        JwksServer(certificates.broker, keys[0]) as server,
        pytest.raises(JwksError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        fetch_jwks(server.url, client_context(SecuritySettings({}), "jwks"))

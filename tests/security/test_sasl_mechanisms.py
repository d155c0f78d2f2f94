"""The broker's PLAIN and SCRAM servers against scramp's client and our own, including what
real clients send that the RFCs do not (librdkafka 2.0's doubled nonce)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
import scramp

from herdless.security.principal import user
from herdless.security.sasl import SaslAuthenticationFailed
from herdless.security.sasl_client import PlainClient, ScramClient
from herdless.security.sasl_plain import PlainServer
from herdless.security.sasl_scram import ScramServer
from herdless.security.scram import SCRAM_MECHANISMS, ScramCredential, verify_plain


class Credentials:
    def __init__(self, users: dict[str, str]) -> None:
        self._stored = {}
        for name, password in users.items():
            for mechanism in SCRAM_MECHANISMS:
                salt, stored, server, iterations = scramp.ScramMechanism(mechanism).make_auth_info(
                    password, 4096
                )
                self._stored[name, mechanism] = ScramCredential(salt, stored, server, iterations)

    def scram(self, name: str, mechanism: str) -> ScramCredential | None:
        return self._stored.get((name, mechanism))


CREDENTIALS = Credentials({"alice": "alice-secret", "a,b=c": "odd-secret"})


def plain(message: bytes) -> PlainServer:
    server = PlainServer(lambda u, p: verify_plain(CREDENTIALS, u, p))
    server.evaluate(message)
    return server


def test_plain_checks_the_password_against_the_stored_scram_credential() -> None:
    server = plain(PlainClient("alice", "alice-secret").first())
    assert server.complete and server.principal == user("alice")
    assert plain(b"alice\0alice\0alice-secret").principal == user("alice")


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"\0alice\0wrong", "Invalid username or password"),
        (b"\0mallory\0alice-secret", "Invalid username or password"),
        (b"bob\0alice\0alice-secret", "authorization id that is different"),
        (b"\0\0alice-secret", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"alice-secret", "expected 3 tokens"),
        (b"\xff\0alice\0x", "not UTF-8"),
    ],
)
def test_plain_refuses_with_kafkas_messages(message: bytes, reason: str) -> None:
    with pytest.raises(SaslAuthenticationFailed, match=reason) as info:
        plain(message)
    assert "alice-secret" not in str(info.value)


def exchange(server: ScramServer, client: ScramClient) -> None:
    answer = client.evaluate(server.evaluate(client.first()))
    assert answer is not None
    assert client.evaluate(server.evaluate(answer)) is None


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_scram_authenticates_and_each_side_proves_the_credential(mechanism: str) -> None:
    server = ScramServer(mechanism, CREDENTIALS)
    exchange(server, ScramClient(mechanism, "alice", "alice-secret"))
    assert server.complete and server.principal == user("alice")


def test_scram_user_names_with_saslname_escapes() -> None:
    server = ScramServer("SCRAM-SHA-256", CREDENTIALS)
    exchange(server, ScramClient("SCRAM-SHA-256", "a,b=c", "odd-secret"))
    assert server.principal == user("a,b=c")


@pytest.mark.parametrize(("name", "password"), [("alice", "wrong"), ("mallory", "alice-secret")])
def test_scram_says_the_same_for_an_unknown_user_and_a_wrong_password(
    name: str, password: str
) -> None:
    server = ScramServer("SCRAM-SHA-512", CREDENTIALS)
    client = ScramClient("SCRAM-SHA-512", name, password)
    with pytest.raises(SaslAuthenticationFailed) as info:
        exchange(server, client)
    assert str(info.value) == (
        "Authentication failed during authentication due to invalid credentials with SASL"
        " mechanism SCRAM-SHA-512"
    )
    assert not server.complete


def client_final(client_first_bare: str, server_first: str, nonce: str, password: str) -> str:
    """A SCRAM-SHA-256 client-final message for `nonce`, proved over the messages as sent
    (what librdkafka 2.0 computes): RFC 5802's formulas, in the test alone."""
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def test_scram_takes_the_client_nonce_before_the_servers_as_librdkafka_2_0_sends_it() -> None:
    """librdkafka 2.0 (Debian's kcat) repeats its own nonce before the combined one; Kafka's
    server has accepted that. The proof is over the message as sent, so it still binds."""
    bare = "n=alice,r=clientnonce"
    server = ScramServer("SCRAM-SHA-256", CREDENTIALS)
    server_first = server.evaluate(f"n,,{bare}".encode()).decode()
    combined = server_first.split(",")[0].removeprefix("r=")
    final = client_final(bare, server_first, f"clientnonce{combined}", "alice-secret")
    assert server.evaluate(final.encode()).startswith(b"v=")
    assert server.complete
    # A nonce that does not end with the server's is refused, however it is proved.
    other = ScramServer("SCRAM-SHA-256", CREDENTIALS)
    server_first = other.evaluate(f"n,,{bare}".encode()).decode()
    combined = server_first.split(",")[0].removeprefix("r=")
    final = client_final(bare, server_first, f"{combined}x", "alice-secret")
    with pytest.raises(SaslAuthenticationFailed):
        other.evaluate(final.encode())


def test_a_scram_server_that_cannot_prove_the_credential_is_refused_by_our_client() -> None:
    impostor = ScramServer("SCRAM-SHA-256", Credentials({"alice": "not-her-password"}))
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    with pytest.raises(SaslAuthenticationFailed):
        exchange(impostor, client)

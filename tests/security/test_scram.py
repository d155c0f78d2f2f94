"""SCRAM credentials made as RFC 5802/7677 and Kafka make them, and PLAIN checked
against them."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from herdless.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    CredentialNotFound,
    ScramCredential,
    UnacceptableCredential,
    altered_config,
    credential_from_salted_password,
    credentials_of,
    make_credential,
    mechanism_of_type,
    password_matches,
    salted_password,
    verify_plain,
)

# RFC 7677, section 3: user "user", password "pencil".
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_AUTH_MESSAGE = (
    b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
)
RFC7677_CLIENT_PROOF = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC7677_SERVER_SIGNATURE = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_a_credential_made_from_the_rfc_7677_password_checks_the_rfcs_exchange() -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil", RFC7677_SALT, 4096)
    # The server's side of RFC 5802: the proof gives back the client key, whose hash
    # must be the stored key; the server signs with the server key.
    signature = hmac.digest(credential.stored_key, RFC7677_AUTH_MESSAGE, "sha256")
    client_key = bytes(a ^ b for a, b in zip(RFC7677_CLIENT_PROOF, signature, strict=True))
    assert hashlib.sha256(client_key).digest() == credential.stored_key
    assert (
        hmac.digest(credential.server_key, RFC7677_AUTH_MESSAGE, "sha256")
        == RFC7677_SERVER_SIGNATURE
    )
    assert credential.salt == RFC7677_SALT and credential.iterations == 4096


def test_the_wrong_password_does_not_make_the_rfcs_keys() -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil!", RFC7677_SALT, 4096)
    signature = hmac.digest(credential.stored_key, RFC7677_AUTH_MESSAGE, "sha256")
    client_key = bytes(a ^ b for a, b in zip(RFC7677_CLIENT_PROOF, signature, strict=True))
    assert hashlib.sha256(client_key).digest() != credential.stored_key


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_client_salted_password_makes_the_same_credential(mechanism: str) -> None:
    # What kafka-python's admin client sends in AlterUserScramCredentials.
    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    salted = hashlib.pbkdf2_hmac(name, b"s3cret", b"salt-salt", 8192)
    assert salted == salted_password(mechanism, "s3cret", b"salt-salt", 8192)
    from_client = credential_from_salted_password(mechanism, b"salt-salt", salted, 8192)
    assert from_client == make_credential(mechanism, "s3cret", b"salt-salt", 8192)
    assert (
        len(from_client.stored_key) == len(from_client.server_key) == hashlib.new(name).digest_size
    )


def test_kafkas_iteration_bounds() -> None:
    make_credential("SCRAM-SHA-512", "pw", b"salt", MIN_ITERATIONS)
    make_credential("SCRAM-SHA-512", "pw", b"salt", MAX_ITERATIONS)
    with pytest.raises(UnacceptableCredential, match="Too few iterations"):
        make_credential("SCRAM-SHA-512", "pw", b"salt", MIN_ITERATIONS - 1)
    with pytest.raises(UnacceptableCredential, match="Too many iterations"):
        make_credential("SCRAM-SHA-512", "pw", b"salt", MAX_ITERATIONS + 1)
    assert DEFAULT_ITERATIONS == 4096


def test_mechanisms_by_their_admin_api_types() -> None:
    assert mechanism_of_type(1) == "SCRAM-SHA-256"
    assert mechanism_of_type(2) == "SCRAM-SHA-512"
    assert mechanism_of_type(0) is None and mechanism_of_type(3) is None


def test_the_text_form_round_trips_as_kafka_writes_it() -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil", RFC7677_SALT, 4096)
    text = credential.to_kafka()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_kafka(text) == credential
    for bad in ["", "salt=x", "salt=!!,stored_key=a,server_key=a,iterations=1", text + "x"]:
        with pytest.raises(ValueError, match="not a SCRAM credential"):
            ScramCredential.from_kafka(bad)


def test_a_credential_shows_no_key() -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil", RFC7677_SALT, 4096)
    shown = repr(credential) + str(credential)
    assert base64.b64encode(credential.stored_key).decode() not in shown
    assert str(credential.stored_key) not in shown


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_plain_is_checked_against_the_stored_credential(mechanism: str) -> None:
    credential = make_credential(mechanism, "correct horse", b"0123456789abcdef", 4096)
    assert password_matches(credential, mechanism, "correct horse")
    assert not password_matches(credential, mechanism, "correct horse ")
    assert not password_matches(credential, mechanism, "")


class Cache:
    def __init__(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        self.users = users

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)


def test_verify_plain_takes_any_mechanism_the_user_has() -> None:
    cache = Cache(
        {
            "alice": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "a-pw", b"s1")},
            "bob": {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "b-pw", b"s2")},
            "carol": {
                "SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "c-pw", b"s3"),
                "SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "c-pw", b"s4"),
            },
        }
    )
    assert verify_plain(cache, "alice", "a-pw")
    assert verify_plain(cache, "bob", "b-pw")
    assert verify_plain(cache, "carol", "c-pw")
    assert not verify_plain(cache, "alice", "b-pw")
    assert not verify_plain(cache, "nobody", "a-pw")
    assert not verify_plain(cache, "nobody", "")


def test_a_users_config_holds_credentials_beside_other_settings() -> None:
    first = make_credential("SCRAM-SHA-256", "pw", b"salt")
    config = altered_config({"producer_byte_rate": "1024"}, {"SCRAM-SHA-256": first}, ())
    assert config == {"producer_byte_rate": "1024", "SCRAM-SHA-256": first.to_kafka()}
    assert credentials_of(config) == {"SCRAM-SHA-256": first}
    second = make_credential("SCRAM-SHA-512", "pw", b"salt")
    both = altered_config(config, {"SCRAM-SHA-512": second}, ())
    assert credentials_of(both) == {"SCRAM-SHA-256": first, "SCRAM-SHA-512": second}
    assert altered_config(both, {}, ["SCRAM-SHA-256", "SCRAM-SHA-512"]) == {
        "producer_byte_rate": "1024"
    }
    with pytest.raises(CredentialNotFound):
        altered_config(config, {}, ["SCRAM-SHA-512"])
    with pytest.raises(ValueError, match="SCRAM-SHA-512"):
        credentials_of({"SCRAM-SHA-512": "salt=nonsense"})

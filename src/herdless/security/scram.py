"""SCRAM credentials (RFC 5802, RFC 7677) as Kafka stores them: a salt, the stored and
server keys and the iteration count, never the password.

A credential is made from a password, or from the salted password a client sends in
AlterUserScramCredentials (KIP-554: the password itself never leaves the client). As in
Kafka (ScramFormatter.normalize) and its clients, the password's UTF-8 bytes are hashed
as they are, without SASLprep: a client that logs in hashes them the same way.

A user's credentials are entries of the user's config (`/config/users/<user>` in
ZooKeeper), keyed by mechanism name beside any other setting (quotas) the user has.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

# Kafka's mechanisms, by SASL name, and the type each has in the admin APIs
# (org.apache.kafka.clients.admin.ScramMechanism; 0 is UNKNOWN).
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's bounds (ScramMechanism.minIterations/maxIterations) and its tools' default.
MIN_ITERATIONS = 4096
DEFAULT_ITERATIONS = 4096
MAX_ITERATIONS = 16384
# Bytes of a new salt; Kafka's tools make about 17 (a 130-bit random number in base 36).
SALT_BYTES = 32


class UnacceptableCredential(ValueError):
    """A credential Kafka refuses to store (UNACCEPTABLE_CREDENTIAL)."""


class CredentialNotFound(LookupError):
    """A credential to delete that the user does not have."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        # Keys are as good as the password to whoever can see them: keep them out of logs.
        return f"ScramCredential(iterations={self.iterations})"

    def to_kafka(self) -> str:
        """Kafka's text form, as in /config/users/<user>: salt=...,stored_key=...,..."""
        fields = {
            "salt": base64.b64encode(self.salt).decode(),
            "stored_key": base64.b64encode(self.stored_key).decode(),
            "server_key": base64.b64encode(self.server_key).decode(),
            "iterations": str(self.iterations),
        }
        return ",".join(f"{k}={v}" for k, v in fields.items())

    @classmethod
    def from_kafka(cls, text: str) -> ScramCredential:
        """Kafka's text form back; ValueError if it is not one."""
        fields = dict(part.partition("=")[::2] for part in text.split(","))
        try:
            return cls(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError, binascii.Error) as exc:
            # The message names the field, never the text (which holds the keys).
            raise ValueError(f"not a SCRAM credential: {type(exc).__name__} {exc}") from None


class CredentialCache(Protocol):
    """The credentials SASL checks against, held in memory as Kafka's CredentialCache is
    (kept current from where they are stored, so a login never waits on a disk or on
    ZooKeeper)."""

    def scram(self, user: str, mechanism: str) -> ScramCredential | None: ...


def mechanism_of_type(mechanism_type: int) -> str | None:
    """The mechanism an admin API names by its type; None for UNKNOWN or any other."""
    for name, number in MECHANISM_TYPES.items():
        if number == mechanism_type:
            return name
    return None


def check_iterations(iterations: int) -> None:
    """UnacceptableCredential, in Kafka's words, if outside Kafka's bounds."""
    if iterations < MIN_ITERATIONS:
        raise UnacceptableCredential("Too few iterations")
    if iterations > MAX_ITERATIONS:
        raise UnacceptableCredential("Too many iterations")


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's SaltedPassword, Hi(password, salt, i): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(
    mechanism: str, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """What the server keeps of a salted password (Kafka's ScramFormatter.generateCredential):
    StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword,
    "Server Key")."""
    name = _hash(mechanism)
    client_key = hmac.digest(salted, b"Client Key", name)
    return ScramCredential(
        salt=bytes(salt),
        stored_key=hashlib.new(name, client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", name),
        iterations=iterations,
    )


def make_credential(
    mechanism: str, password: str, salt: bytes, iterations: int = DEFAULT_ITERATIONS
) -> ScramCredential:
    """A new credential for `password`; `salt` should be SALT_BYTES from os.urandom.
    UnacceptableCredential if the iterations are out of Kafka's bounds."""
    check_iterations(iterations)
    if not salt:
        raise UnacceptableCredential("The salt must not be empty")
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


def password_matches(credential: ScramCredential, mechanism: str, password: str) -> bool:
    """Whether `password` is the one the credential was made from: its stored key again,
    from the stored salt and iterations, compared in constant time."""
    salted = salted_password(mechanism, password, credential.salt, credential.iterations)
    again = credential_from_salted_password(
        mechanism, credential.salt, salted, credential.iterations
    )
    return hmac.compare_digest(again.stored_key, credential.stored_key)


# Checked when a user has no credential, so that an unknown user costs what a known one
# does and the time of an answer does not tell whether the user exists.
_NOBODY = ScramCredential(b"\0" * SALT_BYTES, b"\0" * 64, b"", DEFAULT_ITERATIONS)


def verify_plain(credentials: CredentialCache, user: str, password: str) -> bool:
    """SASL/PLAIN's check: the password against the user's stored SCRAM credential (the
    stronger mechanism's, when the user has both)."""
    for mechanism in reversed(SCRAM_MECHANISMS):
        credential = credentials.scram(user, mechanism)
        if credential is not None:
            return password_matches(credential, mechanism, password)
    password_matches(_NOBODY, SCRAM_MECHANISMS[-1], password)
    return False


def credentials_of(config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials in a user's config, by mechanism; ValueError names the
    mechanism whose entry is not a credential."""
    found = {}
    for mechanism in SCRAM_MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            found[mechanism] = ScramCredential.from_kafka(text)
        except ValueError as exc:
            raise ValueError(f"{mechanism}: {exc}") from None
    return found


def altered_config(
    config: Mapping[str, str],
    upsertions: Mapping[str, ScramCredential],
    deletions: Collection[str],
) -> dict[str, str]:
    """A user's config with credentials deleted, then set (as Kafka applies an
    AlterUserScramCredentials request); the user's other settings are kept.
    CredentialNotFound if a credential to delete is not there."""
    changed = dict(config)
    for mechanism in deletions:
        if mechanism not in changed:
            raise CredentialNotFound("Attempt to delete a user credential that does not exist")
        del changed[mechanism]
    for mechanism, credential in upsertions.items():
        changed[mechanism] = credential.to_kafka()
    return changed


def _hash(mechanism: str) -> str:
    try:
        return _HASHES[mechanism]
    except KeyError:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r}") from None

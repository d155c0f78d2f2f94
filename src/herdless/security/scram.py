"""SCRAM credentials (RFC 5802, RFC 7677) as Kafka stores them: a salt, the stored and
server keys and the iteration count, never the password."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Protocol

# Kafka's mechanisms and their hash functions, by SASL name.
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's least and default iteration counts (ScramMechanism.minIterations, the tools').
MIN_ITERATIONS = 4096
DEFAULT_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

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
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


class CredentialCache(Protocol):
    """The credentials SASL checks against, held in memory as Kafka's CredentialCache is
    (kept current from where they are stored, so a login never waits on a disk or on
    ZooKeeper)."""

    def scram(self, user: str, mechanism: str) -> ScramCredential | None: ...

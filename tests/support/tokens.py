"""OAUTHBEARER tokens for tests: unsecured JWTs as librdkafka builds them, and JWTs signed
by keys of a test identity provider whose JWKS a test writes to a file or serves."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm


def _part(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def unsecured_token(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    return f"{_part(header or {'alg': 'none'})}.{_part(claims)}."


def claims(sub: str, now_s: float, lifetime_s: float = 3600, **more: Any) -> dict[str, Any]:
    return {"sub": sub, "iat": int(now_s), "exp": int(now_s + lifetime_s), **more}


class SigningKey:
    """A key of the test identity provider: it signs tokens, and its public half goes in
    the JWKS."""

    # 2048-bit RSA keys take a while to make: a test run makes a few and keeps them.
    _made: dict[tuple[str, str], SigningKey] = {}

    def __init__(self, kid: str, kind: str = "RSA") -> None:
        self.kid = kid
        self.kind = kind
        if kind == "RSA":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.algorithm = "RS256"
            self.jwk = RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            self.algorithm = "ES256"
            self.jwk = ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        self.jwk |= {"kid": kid, "use": "sig"}

    @classmethod
    def named(cls, kid: str, kind: str = "RSA") -> SigningKey:
        key = cls._made.get((kid, kind))
        if key is None:
            key = cls._made[kid, kind] = cls(kid, kind)
        return key

    def sign(self, claims: dict[str, Any], *, kid: str | None = "own", alg: str = "") -> str:
        headers = {} if kid is None else {"kid": self.kid if kid == "own" else kid}
        return jwt.encode(claims, self.private, algorithm=alg or self.algorithm, headers=headers)


def jwks(*keys: SigningKey) -> dict[str, Any]:
    return {"keys": [key.jwk for key in keys]}


def write_jwks(path: Path, *keys: SigningKey) -> Path:
    # Written whole then renamed: a refresh never reads half a file.
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(jwks(*keys)))
    partial.replace(path)
    return path

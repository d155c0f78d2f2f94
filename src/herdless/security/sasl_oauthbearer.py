"""SASL/OAUTHBEARER (RFC 7628, KIP-255) on the broker's side, as Kafka's
OAuthBearerSaslServer serves it.

The client's one message is a GS2 header, then key=value pairs each ended by 0x01, the
last pair followed by one more 0x01:

    n,[a=<authzid>],^Aauth=Bearer <token>^A[<extension>=<value>^A...]^A

A validator (security/oauthbearer_unsecured.py, security/oauthbearer_jwt.py) decides on
the token. A refused token is answered with RFC 7628's JSON error challenge, e.g.
`{"status":"invalid_token"}`, and no error; the client answers that with the single
byte 0x01, and only then does the exchange fail (SASL_AUTHENTICATION_FAILED, with the
JSON as the message). Extensions (KIP-342) are accepted as both of Kafka's validators
accept them: all of them.

The session lasts as long as the token (KIP-368): `session_lifetime_ms` is the time from
now to its exp, so the broker ends the session, or has the client re-authenticate, when
the token expires.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from herdless.security.oauthbearer_token import InvalidToken, OAuthBearerToken, TokenValidator
from herdless.security.principal import KafkaPrincipal, user
from herdless.security.sasl import SaslAuthenticationFailed

OAUTHBEARER = "OAUTHBEARER"

SEPARATOR = "\x01"
# RFC 7628 §3.1, as Kafka's OAuthBearerClientInitialResponse reads it.
# Any ASCII but NUL, ',' and '=', which are escaped as =2C and =3D.
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{SEPARATOR}"
    rf"(?P<pairs>(?:{_KEY}={_VALUE}{SEPARATOR})*){SEPARATOR}"
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
AUTH_KEY = "auth"

# What the client is told of a message that cannot be read: nothing of what it held.
INVALID_CREDENTIALS = (
    "Authentication failed during authentication due to invalid credentials with SASL"
    f" mechanism {OAUTHBEARER}"
)


class InitialResponse:
    """The client's message: its token, the authorization id it asks for ("" if none)
    and its SASL extensions."""

    def __init__(self, token: str, authorization_id: str, extensions: dict[str, str]) -> None:
        self.token = token
        self.authorization_id = authorization_id
        self.extensions = extensions

    def __repr__(self) -> str:
        return f"InitialResponse(authorization_id={self.authorization_id!r}, token=...)"


def parse_initial_response(message: bytes) -> InitialResponse:
    """The client's message; ValueError says what is wrong with it (never its token)."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("Invalid OAUTHBEARER client first message: not UTF-8") from None
    match = _INITIAL_RESPONSE.fullmatch(text)
    if match is None:
        raise ValueError("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for pair in match["pairs"].split(SEPARATOR)[:-1]:
        key, _, value = pair.partition("=")
        pairs[key] = value
    auth = pairs.pop(AUTH_KEY, None)
    if auth is None:
        raise ValueError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    bearer = _AUTH.fullmatch(auth)
    if bearer is None:
        raise ValueError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if bearer["scheme"].lower() != "bearer":
        raise ValueError(f"Invalid scheme in OAUTHBEARER client first message: {bearer['scheme']}")
    # RFC 5801's saslname escapes; Kafka compares the escaped form, which differs only
    # for a principal with ',' or '=' in its name.
    authzid = (match["authzid"] or "").replace("=2C", ",").replace("=3D", "=")
    return InitialResponse(bearer["token"], authzid, pairs)


def error_challenge(error: InvalidToken) -> bytes:
    """RFC 7628 §3.2.2's JSON, written as Kafka writes it."""
    fields = {"status": error.status}
    if error.scope is not None:
        fields["scope"] = error.scope
    return json.dumps(fields, separators=(", ", ":")).encode()


class OAuthBearerServer:
    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator, wall_ms: Callable[[], int]) -> None:
        """`wall_ms()`: the time tokens' dates are compared with (ms since the epoch)."""
        self._validator = validator
        self._wall_ms = wall_ms
        self._token: OAuthBearerToken | None = None
        self._completed_at_ms = 0
        # The challenge sent for a refused token, and why it was refused, until the
        # client acknowledges it with 0x01.
        self._error: bytes | None = None
        self._reason = ""
        self.extensions: dict[str, str] = {}

    def evaluate(self, response: bytes) -> bytes:
        if self._error is not None and response == SEPARATOR.encode():
            raise SaslAuthenticationFailed(self._error.decode(), reason=self._reason)
        self._error = None
        if self._token is not None:
            raise SaslAuthenticationFailed("OAUTHBEARER takes one message; the exchange is over")
        try:
            initial = parse_initial_response(response)
        except ValueError as exc:
            raise SaslAuthenticationFailed(INVALID_CREDENTIALS, reason=str(exc)) from None
        now_ms = self._wall_ms()
        try:
            token = self._validator.validate(initial.token, now_ms)
        except InvalidToken as exc:
            self._error, self._reason = error_challenge(exc), f"invalid token: {exc.reason}"
            return self._error
        if initial.authorization_id and initial.authorization_id != token.principal_name:
            raise SaslAuthenticationFailed(
                f"Authentication failed: Client requested an authorization id"
                f" ({initial.authorization_id}) that is different from the token's principal"
                f" name ({token.principal_name})"
            )
        self.extensions = initial.extensions
        self._token, self._completed_at_ms = token, now_ms
        return b""

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def principal(self) -> KafkaPrincipal:
        assert self._token is not None, "OAUTHBEARER has not completed"
        return user(self._token.principal_name)

    @property
    def session_lifetime_ms(self) -> int | None:
        """Until the token's exp. At least 1 ms: a token accepted within the clock skew
        after its exp still ends its session at once, never leaves it unending."""
        if self._token is None:
            return None
        return max(1, self._token.lifetime_ms - self._completed_at_ms)

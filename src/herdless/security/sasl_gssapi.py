"""SASL/GSSAPI (RFC 4752): Kerberos V5 on the broker's side, as Kafka serves it through
Java's SASL server (GssKrb5Server).

The exchange:
1. The client's GSS-API context tokens (its AP-REQ) are accepted with the broker's keys
   from its keytab; the answer (the AP-REP of mutual authentication) goes back.
2. Once the context is established the broker sends, wrapped (signed, not encrypted),
   four bytes: the security layers it offers (Kafka offers none, only "no protection")
   and the largest buffer it takes (Java's default, 65536, which Kafka sends too). A
   client that still had a token answered must first send an empty message.
3. The client answers, wrapped, with the layer it chose, its own buffer size and an
   authorization id. The session's principal is the client's Kerberos name, whatever
   that id says: Kafka authorizes every id and keeps the authenticated name, and
   kafka-python and aiokafka send the service's name (`kafka@host`) there, so refusing a
   different id, as PLAIN does, would lock them out.
The Kerberos name becomes a Kafka user through sasl.kerberos.principal.to.local.rules
(herdless.security.kerberos_names): `alice@EXAMPLE.COM` is User:alice by default.

The GSS calls are blocking C calls, and quick: an acceptor with a keytab never asks the
KDC anything; accepting a token reads the keytab and writes the replay cache (a file,
KRB5RCACHEDIR), no more.

`gssapi` (python-gssapi, built against MIT Kerberos) is the optional extra
`herdless[gssapi]`: it is imported only when a listener enables GSSAPI.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from herdless.security.kerberos_names import KerberosName, KerberosNameError, KerberosShortNamer
from herdless.security.principal import KafkaPrincipal, user
from herdless.security.sasl import SaslAuthenticationFailed, invalid_credentials

GSSAPI = "GSSAPI"

# RFC 4752's security layer bits; Kafka offers (and accepts) no layer but "none".
NO_SECURITY_LAYER = 0x01
# The largest message the broker takes: Java SASL's default, which Kafka leaves alone.
MAX_BUFFER_SIZE = 65536


class GssapiMissing(Exception):
    """The gssapi package is not installed; the message says how to install it."""


class GssapiSetupError(ValueError):
    """The broker's own Kerberos identity cannot be used (no such key in the keytab, an
    unreadable keytab, ...); the message says which."""


def load_gssapi() -> Any:
    try:
        import gssapi
    except ImportError:
        raise GssapiMissing(
            "SASL GSSAPI needs the gssapi package: pip install 'herdless[gssapi]' (it builds"
            " against MIT Kerberos: apt-get install -y libkrb5-dev gcc)"
        ) from None
    return gssapi


def gss_message(error: Exception) -> str:
    """A GSS error in one line: its minor (Kerberos) message when it has one, which says
    what the major one ("Unspecified GSS failure") does not."""
    gen_message = getattr(error, "gen_message", None)
    text = re.sub(r"\s+", " ", gen_message() if callable(gen_message) else str(error)).strip()
    minor = re.search(r"Minor \(\d+\): (.+)$", text)
    if minor is not None and minor.group(1).strip(" ,.") not in ("", "Success"):
        return minor.group(1)
    return text


def default_realm() -> str:
    """krb5.conf's default_realm, as Kafka's DEFAULT rule reads it ("" when there is none)."""
    gssapi = load_gssapi()
    try:
        name = gssapi.Name("x", gssapi.NameType.kerberos_principal)
        canonical = str(name.canonicalize(gssapi.MechType.kerberos))
    except gssapi.exceptions.GSSError:
        return ""
    return canonical.partition("@")[2]


@dataclass(frozen=True)
class GssapiAcceptor:
    """What one listener accepts: tickets for its service principal, decrypted with the
    keys of its keytab, from clients whom its rules name."""

    service_principal: str
    short_namer: KerberosShortNamer
    # gssapi.Credentials: the broker's accepting credentials
    credentials: Any

    @classmethod
    def from_keytab(
        cls, principal: str, keytab: str | None, rules: list[str] | None
    ) -> GssapiAcceptor:
        """The acceptor for `principal` with the keys of `keytab` (None: Kerberos's default
        keytab). GssapiSetupError when the keytab has no key for it; KerberosNameError when
        the rules cannot be read."""
        gssapi = load_gssapi()
        short_namer = KerberosShortNamer.from_rules(default_realm(), rules)
        try:
            name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
            credentials = gssapi.Credentials(
                name=name,
                usage="accept",
                store=None if keytab is None else {"keytab": keytab},
            )
        except gssapi.exceptions.GSSError as exc:
            where = "the default keytab" if keytab is None else f"keytab {keytab}"
            raise GssapiSetupError(
                f"cannot accept tickets for {principal} with {where}: {gss_message(exc)}"
            ) from None
        return cls(principal, short_namer, credentials)


class _Stage(enum.Enum):
    CONTEXT = "establishing the security context"
    OFFER = "waiting for an empty message before offering security layers"
    ANSWER = "waiting for the client's choice of security layer"
    COMPLETE = "complete"


class GssapiServer:
    mechanism = GSSAPI

    def __init__(self, acceptor: GssapiAcceptor) -> None:
        self._gssapi = load_gssapi()
        self._acceptor = acceptor
        self._context = self._gssapi.SecurityContext(creds=acceptor.credentials, usage="accept")
        self._stage = _Stage.CONTEXT
        # The client's Kerberos name, once the context is established.
        self._client: str | None = None
        self._principal: KafkaPrincipal | None = None

    def evaluate(self, response: bytes) -> bytes | None:
        GSSError = self._gssapi.exceptions.GSSError
        try:
            if self._stage is _Stage.CONTEXT:
                return self._accept(response)
            if self._stage is _Stage.OFFER:
                if response:
                    raise invalid_credentials(
                        GSSAPI, "the client sent data where an empty message was due"
                    )
                return self._offer()
            if self._stage is _Stage.ANSWER:
                return self._answer(response)
        except GSSError as exc:
            self._stage = _Stage.COMPLETE
            raise invalid_credentials(GSSAPI, self._why(gss_message(exc))) from None
        except SaslAuthenticationFailed:
            self._stage = _Stage.COMPLETE
            raise
        raise SaslAuthenticationFailed("GSSAPI: the exchange is already over")

    def _accept(self, token: bytes) -> bytes | None:
        if not token:
            # python-gssapi would take it for "no token yet", which only initiators have.
            raise invalid_credentials(GSSAPI, "an empty message where a GSS-API token was due")
        answer = self._context.step(token)
        if not self._context.complete:
            return answer or b""
        self._client = str(self._context.initiator_name)
        if answer:
            self._stage = _Stage.OFFER
            return answer
        return self._offer()

    def _offer(self) -> bytes:
        offer = bytes([NO_SECURITY_LAYER]) + MAX_BUFFER_SIZE.to_bytes(3, "big")
        self._stage = _Stage.ANSWER
        return self._context.wrap(offer, False).message

    def _answer(self, message: bytes) -> None:
        choice = self._context.unwrap(message).message
        if len(choice) < 4:
            raise invalid_credentials(
                GSSAPI, self._why("the final handshake message is shorter than 4 bytes")
            )
        if not choice[0] & NO_SECURITY_LAYER:
            raise invalid_credentials(
                GSSAPI, self._why(f"the client chose a security layer not offered ({choice[0]})")
            )
        try:
            choice[4:].decode("utf-8")  # the authorization id: see the module's docstring
        except UnicodeDecodeError:
            raise invalid_credentials(
                GSSAPI, self._why("the authorization id is not UTF-8")
            ) from None
        assert self._client is not None
        try:
            name = self._acceptor.short_namer.short_name(KerberosName.parse(self._client))
        except KerberosNameError as exc:
            raise invalid_credentials(
                GSSAPI, f"{exc} (sasl.kerberos.principal.to.local.rules)"
            ) from None
        self._principal = user(name)
        self._stage = _Stage.COMPLETE
        # Java's server has nothing to say at the end: in the unframed v0 flow, nothing is sent.
        return None

    def _why(self, problem: str) -> str:
        return problem if self._client is None else f"{self._client}: {problem}"

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def principal(self) -> KafkaPrincipal:
        assert self._principal is not None, "GSSAPI has not completed"
        return self._principal

    @property
    def session_lifetime_ms(self) -> int | None:
        # As Kafka: a Kerberos session is not ended when its ticket expires.
        return None

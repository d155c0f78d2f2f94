"""TLS contexts for a listener, from Kafka's ssl.* settings, that follow their files.

`server_context` is what a TLS listener accepts with; `client_context` what a broker
connects to another broker's TLS listener with. Settings are read for the listener
(`listener.name.<l>.ssl.*` before `ssl.*`):

- the keystore and truststore (herdless.broker.auth.tls_stores);
- `ssl.client.auth`: required, requested or none (Kafka's default). On a SASL_SSL
  listener only the listener's own setting counts, as in Kafka, where SASL authenticates;
- `ssl.enabled.protocols` (TLSv1.2,TLSv1.3) and, for a client, `ssl.protocol` (TLSv1.3)
  as the highest version it offers;
- `ssl.cipher.suites` by their IANA names, as Java and Kafka write them. Python's ssl
  module can restrict TLS 1.2's suites but not TLS 1.3's: naming no TLS 1.3 suite turns
  TLS 1.3 off, as it does in Java; naming some but not all of them is refused rather than
  silently allowing the others;
- `ssl.endpoint.identification.algorithm` (client): https checks the broker's host name
  against its certificate, empty does not.

Certificates are reloaded without a restart, as Kafka does on a dynamic update of the
same keystore path: `ReloadingContext` notices that the keystore or truststore file
changed (inode, size, modification time; at most every few seconds, or when asked) and
builds a fresh context from it. asyncio's and uvloop's servers keep the one context
they were started with. Loading a new certificate into that context does reach new
handshakes on both loops (OpenSSL copies it into each connection as it is made), but a
context's trust store can only grow and a load that fails half-way leaves it half
changed; so the server's context hands each new connection the current one from its
SNI callback, which OpenSSL
calls on every ClientHello, with or without a server name (SSL_set_SSL_CTX: the
certificate, key and trust store of the new context; the verify mode, protocols and
ciphers, equal in both, stay). Connections already open keep theirs. A new file that
cannot be read, or whose certificate changes the subject or drops a subject alternative
name (Kafka's ssl.allow.dn.changes and ssl.allow.san.changes, false by default), leaves
the previous context in use and logs one line.
"""

from __future__ import annotations

import enum
import logging
import os
import secrets
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from herdless.broker.auth.tls_stores import (
    KeyStore,
    ListenerSettings,
    keystore_location,
    read_keystore,
    read_truststore,
    truststore_location,
)
from herdless.broker.clock import monotonic_ms
from herdless.broker.config import ConfigError
from herdless.protocol.config_values import InvalidConfigValue, parse_boolean
from herdless.security.listeners import SecurityProtocol
from herdless.security.principal import KafkaPrincipal
from herdless.security.principal_mapping import (
    PrincipalMappingError,
    SslPrincipalMapper,
    principal_from_certificate,
)
from herdless.security.settings import SecuritySettings

log = logging.getLogger(__name__)

DEFAULT_CHECK_INTERVAL_MS = 5_000
DEFAULT_ENABLED_PROTOCOLS = "TLSv1.2,TLSv1.3"
DEFAULT_PROTOCOL = "TLSv1.3"

CLIENT_AUTH = {
    "required": ssl.CERT_REQUIRED,
    "requested": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
}
PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
# ssl.protocol also takes TLS: any version that ssl.enabled.protocols allows.
_ANY_PROTOCOL = "TLS"

# TLS 1.3 suites keep their IANA names in OpenSSL.
TLS13_SUITES = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)
# TLS 1.2 suites with certificates, IANA (Java, Kafka) name to OpenSSL's, from
# `openssl ciphers -stdname`. PSK, SRP, anonymous, NULL and export suites are left out:
# a Kafka listener authenticates with certificates.
CIPHER_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_DSS_WITH_AES_256_GCM_SHA384": "DHE-DSS-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256": "DHE-DSS-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CCM": "ECDHE-ECDSA-AES256-CCM",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CCM": "ECDHE-ECDSA-AES128-CCM",
    "TLS_DHE_RSA_WITH_AES_256_CCM": "DHE-RSA-AES256-CCM",
    "TLS_DHE_RSA_WITH_AES_128_CCM": "DHE-RSA-AES128-CCM",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA256": "DHE-DSS-AES256-SHA256",
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA256": "DHE-DSS-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA": "DHE-DSS-AES256-SHA",
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA": "DHE-DSS-AES128-SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CCM": "AES256-CCM",
    "TLS_RSA_WITH_AES_128_CCM": "AES128-CCM",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
}
# A signalling value Java lists among suites; it is no suite, and OpenSSL sends it anyway.
_RENEGOTIATION_SCSV = "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"


class Side(enum.Enum):
    SERVER = "server"
    CLIENT = "client"


def server_context(
    settings: SecuritySettings,
    listener: str,
    security_protocol: SecurityProtocol = SecurityProtocol.SSL,
) -> ssl.SSLContext:
    """The context a TLS listener accepts connections with. ConfigError names what
    cannot be used."""
    return _build(ListenerSettings(settings, listener), Side.SERVER, security_protocol).context


def client_context(settings: SecuritySettings, listener: str) -> ssl.SSLContext:
    """The context a broker connects to another broker's TLS `listener` with."""
    return _build(ListenerSettings(settings, listener), Side.CLIENT).context


def principal_mapper(settings: SecuritySettings, listener: str) -> SslPrincipalMapper:
    """The listener's `ssl.principal.mapping.rules`, or ConfigError naming a bad rule."""
    try:
        return SslPrincipalMapper.from_rules(
            settings.get("ssl.principal.mapping.rules", listener=listener)
        )
    except PrincipalMappingError as exc:
        raise ConfigError(str(exc)) from None


def peer_principal(ssl_object: ssl.SSLObject, mapper: SslPrincipalMapper) -> KafkaPrincipal:
    """The principal of a TLS connection's client, once its handshake is done: its
    certificate's subject through the rules, or User:ANONYMOUS if it sent none.
    PrincipalMappingError when no rule maps it: Kafka fails that authentication."""
    return principal_from_certificate(ssl_object.getpeercert(binary_form=True), mapper)


class ReloadingContext:
    """A listener's TLS context that follows its keystore and truststore files.

    A server passes `context` to create_server: every new connection is handed the
    latest context at its ClientHello. A client wraps each new connection with
    `current()`. `check()` looks at the files now; otherwise they are looked at when a
    connection starts, at most every `check_interval_ms`.
    """

    def __init__(
        self,
        settings: SecuritySettings,
        listener: str,
        side: Side,
        security_protocol: SecurityProtocol = SecurityProtocol.SSL,
        *,
        check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self._settings = ListenerSettings(settings, listener)
        self._side = side
        self._protocol = security_protocol
        self._interval_ms = check_interval_ms
        self._clock = clock
        self._loaded = _build(self._settings, side, security_protocol)  # ConfigError at start
        self._checked_at = clock()
        self._refused: tuple[_Stamp, ...] | None = None
        self.context = self._loaded.context
        if side is Side.SERVER:
            self.context.sni_callback = self._hand_over

    def current(self) -> ssl.SSLContext:
        if self._clock() - self._checked_at >= self._interval_ms:
            self.check()
        return self._loaded.context

    def check(self) -> bool:
        """Reload if a file changed since it was read; True if a new context is in use."""
        self._checked_at = self._clock()
        stamps = _stamps(self._loaded.files)
        if stamps == self._loaded.stamps or stamps == self._refused:
            return False
        try:
            loaded = _build(self._settings, self._side, self._protocol)
            _ensure_compatible(self._loaded.leaf, loaded.leaf, self._settings)
        except ConfigError as exc:
            self._refused = stamps
            log.warning(
                "listener %s: its TLS files changed but cannot be used, so it keeps the"
                " previous ones: %s",
                self._settings.listener,
                exc,
            )
            return False
        self._loaded = loaded
        self._refused = None
        log.info("listener %s: TLS keystore and truststore reloaded", self._settings.listener)
        return True

    def validate(self, settings: SecuritySettings) -> None:
        """ConfigError if the listener's TLS could not be built from these settings (a
        dynamic broker config about to be stored)."""
        changed = ListenerSettings(settings, self._settings.listener)
        loaded = _build(changed, self._side, self._protocol)
        _ensure_compatible(self._loaded.leaf, loaded.leaf, changed)

    def reconfigure(self, settings: SecuritySettings) -> None:
        """The listener's TLS settings changed (a dynamic broker config, Kafka's
        listener.name.<l>.ssl.*): new connections get a context built from them. One
        that cannot be built leaves the previous in use (ConfigError)."""
        changed = ListenerSettings(settings, self._settings.listener)
        loaded = _build(changed, self._side, self._protocol)
        _ensure_compatible(self._loaded.leaf, loaded.leaf, changed)
        self._settings, self._loaded, self._refused = changed, loaded, None
        self._checked_at = self._clock()
        log.info("listener %s: TLS settings changed and reloaded", changed.listener)

    def _hand_over(
        self, ssl_object: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext
    ) -> None:
        # Called by OpenSSL inside the handshake: an exception here would fail the
        # client's handshake with an internal error, so nothing may escape.
        try:
            latest = self.current()
            if latest is not context:
                ssl_object.context = latest
        except Exception:
            log.exception(
                "listener %s: could not hand over the TLS context", self._settings.listener
            )


# The stamp of a file: None when it cannot be looked at.
_Stamp = tuple[int, int, int, int] | None


@dataclass(frozen=True)
class _Loaded:
    context: ssl.SSLContext
    leaf: x509.Certificate | None
    files: tuple[Path, ...]
    stamps: tuple[_Stamp, ...]  # of `files`, taken before they were read


def _build(
    settings: ListenerSettings,
    side: Side,
    security_protocol: SecurityProtocol = SecurityProtocol.SSL,
) -> _Loaded:
    files = tuple(p for p in (keystore_location(settings), truststore_location(settings)) if p)
    stamps = _stamps(files)
    keystore = read_keystore(settings)
    truststore = read_truststore(settings)
    for flag in ("ssl.allow.dn.changes", "ssl.allow.san.changes"):
        _flag(settings, flag)  # read now so that a bad value fails the start, not a reload
    if side is Side.SERVER:
        if keystore is None:
            raise ConfigError(
                f"listener {settings.listener} serves TLS but has no keystore: set"
                " ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain)"
            )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.verify_mode = _client_auth(settings, security_protocol)
        verifies = context.verify_mode != ssl.CERT_NONE
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = _checks_host_name(settings)
        verifies = True
    _set_protocols_and_ciphers(context, settings, side)
    if keystore is not None:
        _load_keystore(context, keystore, settings)
    if verifies:
        if truststore is None:
            # Kafka falls back on the JVM's trusted CAs; herdless on the system's.
            context.load_default_certs(
                ssl.Purpose.CLIENT_AUTH if side is Side.SERVER else ssl.Purpose.SERVER_AUTH
            )
        else:
            pem = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in truststore)
            context.load_verify_locations(cadata=pem)
    return _Loaded(context, keystore.chain[0] if keystore else None, files, stamps)


def _client_auth(settings: ListenerSettings, security_protocol: SecurityProtocol) -> ssl.VerifyMode:
    if security_protocol is SecurityProtocol.SASL_SSL:
        value = settings.own("ssl.client.auth") or "none"
    else:
        value = settings.get("ssl.client.auth") or "none"
    mode = CLIENT_AUTH.get(value.lower())
    if mode is None:
        raise ConfigError(
            f"{settings.name('ssl.client.auth')} must be required, requested or none, not {value!r}"
        )
    return mode


def _checks_host_name(settings: ListenerSettings) -> bool:
    value = settings.get("ssl.endpoint.identification.algorithm", "https") or ""
    if value.lower() not in ("https", ""):
        raise ConfigError(
            f"{settings.name('ssl.endpoint.identification.algorithm')} must be https"
            f" or empty, not {value!r}"
        )
    return value.lower() == "https"


def _set_protocols_and_ciphers(
    context: ssl.SSLContext, settings: ListenerSettings, side: Side
) -> None:
    enabled_key = settings.name("ssl.enabled.protocols")
    enabled = settings.get_list("ssl.enabled.protocols", DEFAULT_ENABLED_PROTOCOLS)
    unknown = [p for p in enabled if p not in PROTOCOLS]
    if unknown:
        raise ConfigError(
            f"{enabled_key}: {', '.join(unknown)} cannot be served; choose from"
            f" {', '.join(PROTOCOLS)}"
        )
    versions = sorted({PROTOCOLS[p] for p in enabled})
    if not versions:
        raise ConfigError(f"{enabled_key} enables no protocol")
    ladder = list(PROTOCOLS.values())
    if ladder.index(versions[-1]) - ladder.index(versions[0]) + 1 != len(versions):
        raise ConfigError(f"{enabled_key} must be a range of versions, without gaps")
    lowest, highest = versions[0], versions[-1]
    protocol = settings.get("ssl.protocol", DEFAULT_PROTOCOL) or DEFAULT_PROTOCOL
    if protocol != _ANY_PROTOCOL and protocol not in PROTOCOLS:
        raise ConfigError(
            f"{settings.name('ssl.protocol')} must be one of {_ANY_PROTOCOL},"
            f" {', '.join(PROTOCOLS)}, not {protocol!r}"
        )
    if side is Side.CLIENT and protocol in PROTOCOLS:
        highest = min(highest, PROTOCOLS[protocol])
    lowest, highest = _apply_cipher_suites(context, settings, lowest, highest)
    if lowest > highest:
        raise ConfigError(
            f"{enabled_key}, ssl.protocol and ssl.cipher.suites together leave no protocol"
        )
    context.minimum_version = lowest
    context.maximum_version = highest


def _apply_cipher_suites(
    context: ssl.SSLContext,
    settings: ListenerSettings,
    lowest: ssl.TLSVersion,
    highest: ssl.TLSVersion,
) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """Restrict the context to `ssl.cipher.suites`; the protocol range that leaves."""
    key = settings.name("ssl.cipher.suites")
    suites = [s for s in settings.get_list("ssl.cipher.suites") if s != _RENEGOTIATION_SCSV]
    if not suites:
        return lowest, highest
    unknown = [s for s in suites if s not in CIPHER_SUITES and s not in TLS13_SUITES]
    if unknown:
        raise ConfigError(f"{key}: unknown cipher suites {', '.join(unknown)}")
    tls12 = [CIPHER_SUITES[s] for s in suites if s in CIPHER_SUITES]
    tls13 = {s for s in suites if s in TLS13_SUITES}
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise ConfigError(f"{key}: none of these is available in this OpenSSL") from None
        available = {c["name"] for c in context.get_ciphers()}
        missing = [s for s in suites if s in CIPHER_SUITES and CIPHER_SUITES[s] not in available]
        if missing:
            raise ConfigError(f"{key}: {', '.join(missing)} not available in this OpenSSL")
    else:
        lowest = max(lowest, ssl.TLSVersion.TLSv1_3)
    if tls13:
        offered = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.3"}
        if tls13 != offered:
            raise ConfigError(
                f"{key}: TLS 1.3 cannot be restricted to some of its suites here (Python's"
                f" ssl module cannot choose them); name all of {', '.join(sorted(offered))},"
                " or none to leave TLS 1.3 off"
            )
    else:
        highest = min(highest, ssl.TLSVersion.TLSv1_2)
    return lowest, highest


def _load_keystore(context: ssl.SSLContext, keystore: KeyStore, settings: ListenerSettings) -> None:
    """Load a key and chain read by herdless: ssl takes them only from a file, so they
    are written, the key encrypted under a one-time password, to an anonymous memory
    file (a private temporary file where there is none) and loaded from there."""
    password = secrets.token_bytes(32)
    pem = keystore.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password),
    ) + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in keystore.chain)
    try:
        if hasattr(os, "memfd_create"):
            descriptor = os.memfd_create("herdless-keystore", os.MFD_CLOEXEC)
            try:
                os.write(descriptor, pem)
                context.load_cert_chain(f"/proc/self/fd/{descriptor}", password=password)
            finally:
                os.close(descriptor)
        else:
            with tempfile.TemporaryDirectory() as directory:
                path = Path(directory, "keystore.pem")
                path.write_bytes(pem)
                context.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"listener {settings.listener}: OpenSSL refuses the keystore: {exc.reason or exc}"
        ) from None


def _ensure_compatible(
    old: x509.Certificate | None, new: x509.Certificate | None, settings: ListenerSettings
) -> None:
    """Kafka's rule for a keystore replaced while running: same subject, and every
    subject alternative name kept, unless ssl.allow.dn.changes / ssl.allow.san.changes."""
    if old is None or new is None:
        return
    if not _flag(settings, "ssl.allow.dn.changes") and old.subject != new.subject:
        raise ConfigError(
            f"the new certificate's subject {new.subject.rfc4514_string()} is not the"
            f" previous {old.subject.rfc4514_string()} (ssl.allow.dn.changes is false)"
        )
    if not _flag(settings, "ssl.allow.san.changes"):
        dropped = _alternative_names(old) - _alternative_names(new)
        if dropped:
            raise ConfigError(
                "the new certificate drops subject alternative names"
                f" {', '.join(sorted(str(n.value) for n in dropped))}"
                " (ssl.allow.san.changes is false)"
            )


def _flag(settings: ListenerSettings, key: str) -> bool:
    try:
        return parse_boolean(settings.name(key), settings.get(key) or "false")
    except InvalidConfigValue as exc:
        raise ConfigError(str(exc)) from None


def _alternative_names(certificate: x509.Certificate) -> set[x509.GeneralName]:
    try:
        extension = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return set(extension.value)


def _stamps(files: tuple[Path, ...]) -> tuple[_Stamp, ...]:
    return tuple(_stamp(path) for path in files)


def _stamp(path: Path) -> _Stamp:
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)

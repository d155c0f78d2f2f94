"""Keystores and truststores as Kafka's settings name them, read into keys and certificates.

`ssl.keystore.type` PEM (one file holding the private key and its certificate chain, or
the two given inline in `ssl.keystore.key` and `ssl.keystore.certificate.chain`) and
PKCS12; `ssl.truststore.type` PEM (a file, or inline `ssl.truststore.certificates`) and
PKCS12. Kafka's default type is JKS, a Java format Python cannot read: a store whose type
is not set is read as what its content is, and a JKS store is refused with the advice to
convert it. The combinations Kafka refuses (a PEM store with a store password, a key
without its chain, a location and inline content together) are refused here too.

Every error is a ConfigError naming the setting (as given: `listener.name.<l>.ssl...` when
that is where the value came from) and the file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from herdless.broker.config import ConfigError
from herdless.security.settings import SecuritySettings

PEM = "PEM"
PKCS12 = "PKCS12"
JKS = "JKS"

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n.*?-----END \1-----", re.DOTALL)
_JKS_MAGIC = b"\xfe\xed\xfe\xed"


@dataclass(frozen=True)
class ListenerSettings:
    """The security settings as one listener sees them, able to say where each came from."""

    settings: SecuritySettings
    listener: str

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.settings.get(key, default, listener=self.listener)

    def get_list(self, key: str, default: str = "") -> list[str]:
        return self.settings.get_list(key, default, listener=self.listener)

    def own(self, key: str) -> str | None:
        """Only the listener's own `listener.name.<l>.<key>`, not the broker-wide one."""
        value = self.settings.raw.get(f"listener.name.{self.listener.lower()}.{key}")
        return None if value is None else value.strip()

    def name(self, key: str) -> str:
        """The key the value of `key` comes from, for messages."""
        specific = f"listener.name.{self.listener.lower()}.{key}"
        return specific if self.settings.raw.get(specific) is not None else key


@dataclass(frozen=True)
class KeyStore:
    key: PrivateKeyTypes
    chain: tuple[x509.Certificate, ...]  # the certificate first, then its issuers


def keystore_location(settings: ListenerSettings) -> Path | None:
    location = settings.get("ssl.keystore.location")
    return Path(location) if location else None


def truststore_location(settings: ListenerSettings) -> Path | None:
    location = settings.get("ssl.truststore.location")
    return Path(location) if location else None


def read_keystore(settings: ListenerSettings) -> KeyStore | None:
    """The listener's key and certificate chain; None if it has none."""
    inline_key = settings.get("ssl.keystore.key")
    inline_chain = settings.get("ssl.keystore.certificate.chain")
    location = keystore_location(settings)
    store_type = _store_type(settings, "ssl.keystore.type")
    store_password = settings.get("ssl.keystore.password")
    key_password = settings.get("ssl.key.password")
    if inline_key:
        key_name = settings.name("ssl.keystore.key")
        if store_type not in (None, PEM):
            raise ConfigError(
                f"{key_name} is only read with ssl.keystore.type=PEM, not {store_type}"
            )
        if not inline_chain:
            raise ConfigError(f"{key_name} is set but ssl.keystore.certificate.chain is not")
        if location is not None:
            raise ConfigError(f"set {key_name} or ssl.keystore.location, not both")
        if store_password:
            raise ConfigError("a PEM keystore takes ssl.key.password, not ssl.keystore.password")
        key = _pem_key(inline_key.encode(), key_password, key_name)
        chain = _pem_certificates(
            inline_chain.encode(), settings.name("ssl.keystore.certificate.chain")
        )
        return _checked(KeyStore(key, chain), key_name)
    if inline_chain:
        raise ConfigError(
            f"{settings.name('ssl.keystore.certificate.chain')} is set but ssl.keystore.key is not"
        )
    if location is None:
        return None
    where = f"{settings.name('ssl.keystore.location')} {location}"
    data = _read(location, where)
    store_type = store_type or _sniffed_type(data)
    if store_type == PEM:
        if store_password:
            raise ConfigError(
                f"{where}: a PEM keystore takes ssl.key.password, not ssl.keystore.password"
            )
        return _checked(
            KeyStore(_pem_key(data, key_password, where), _pem_certificates(data, where)), where
        )
    if store_type == PKCS12:
        if not store_password:
            raise ConfigError(f"{where}: a PKCS12 keystore needs ssl.keystore.password")
        try:
            key, certificate, more = pkcs12.load_key_and_certificates(data, store_password.encode())
        except ValueError:
            raise ConfigError(
                f"{where} cannot be read as PKCS12 with ssl.keystore.password"
            ) from None
        if key is None or certificate is None:
            raise ConfigError(f"{where} holds no private key with its certificate")
        return _checked(KeyStore(key, (certificate, *more)), where)
    raise _unreadable_type(store_type, where, "ssl.keystore.type")


def read_truststore(settings: ListenerSettings) -> tuple[x509.Certificate, ...] | None:
    """The certificates the listener trusts; None if it names none (the system's then)."""
    inline = settings.get("ssl.truststore.certificates")
    location = truststore_location(settings)
    store_type = _store_type(settings, "ssl.truststore.type")
    password = settings.get("ssl.truststore.password")
    if inline:
        name = settings.name("ssl.truststore.certificates")
        if store_type not in (None, PEM):
            raise ConfigError(f"{name} is only read with ssl.truststore.type=PEM, not {store_type}")
        if location is not None:
            raise ConfigError(f"set {name} or ssl.truststore.location, not both")
        if password:
            raise ConfigError("a PEM truststore takes no ssl.truststore.password")
        return _pem_certificates(inline.encode(), name)
    if location is None:
        return None
    where = f"{settings.name('ssl.truststore.location')} {location}"
    data = _read(location, where)
    store_type = store_type or _sniffed_type(data)
    if store_type == PEM:
        if password:
            raise ConfigError(f"{where}: a PEM truststore takes no ssl.truststore.password")
        return _pem_certificates(data, where)
    if store_type == PKCS12:
        try:
            store = pkcs12.load_pkcs12(data, password.encode() if password else None)
        except ValueError:
            raise ConfigError(
                f"{where} cannot be read as PKCS12 with ssl.truststore.password"
            ) from None
        certificates = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certificates.insert(0, store.cert.certificate)
        if not certificates:
            raise ConfigError(f"{where} holds no certificate")
        return tuple(certificates)
    raise _unreadable_type(store_type, where, "ssl.truststore.type")


def _store_type(settings: ListenerSettings, key: str) -> str | None:
    value = settings.get(key)
    if not value:
        return None
    store_type = value.upper()
    if store_type not in (PEM, PKCS12, JKS):
        raise ConfigError(f"{settings.name(key)} must be PEM or PKCS12, not {value!r}")
    return store_type


def _sniffed_type(data: bytes) -> str:
    if data.startswith(_JKS_MAGIC):
        return JKS
    return PEM if b"-----BEGIN " in data else PKCS12


def _unreadable_type(store_type: str, where: str, key: str) -> ConfigError:
    return ConfigError(
        f"{where} is a {store_type} store, which herdless cannot read: convert it to PEM"
        f" or PKCS12 (keytool -importkeystore -deststoretype PKCS12) and set {key} to match"
    )


def _read(path: Path, where: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {where}: {exc.strerror or exc}") from None


def _pem_blocks(data: bytes, wanted: Sequence[str]) -> list[bytes]:
    return [m.group(0) for m in _PEM_BLOCK.finditer(data) if m.group(1).decode() in wanted]


def _pem_key(data: bytes, password: str | None, where: str) -> PrivateKeyTypes:
    blocks = _pem_blocks(
        data, ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY")
    )
    if not blocks:
        raise ConfigError(f"{where} holds no PEM private key")
    if len(blocks) > 1:
        raise ConfigError(f"{where} holds {len(blocks)} private keys where one belongs")
    try:
        return serialization.load_pem_private_key(
            blocks[0], password.encode() if password else None
        )
    except TypeError:
        # cryptography says TypeError when a password is missing or was not wanted.
        if password:
            raise ConfigError(
                f"{where}: the private key is not encrypted, but ssl.key.password is set"
            ) from None
        raise ConfigError(f"{where}: the private key is encrypted; set ssl.key.password") from None
    except ValueError:
        raise ConfigError(
            f"{where}: the private key cannot be read"
            + (" with ssl.key.password" if password else "")
        ) from None


def _pem_certificates(data: bytes, where: str) -> tuple[x509.Certificate, ...]:
    blocks = _pem_blocks(data, ("CERTIFICATE",))
    if not blocks:
        raise ConfigError(f"{where} holds no PEM certificate")
    try:
        return tuple(x509.load_pem_x509_certificate(block) for block in blocks)
    except ValueError:
        raise ConfigError(f"{where} holds a certificate that cannot be read") from None


def _checked(store: KeyStore, where: str) -> KeyStore:
    public = store.chain[0].public_key()
    if _public_der(public) != _public_der(store.key.public_key()):
        raise ConfigError(f"{where}: the private key does not belong to the first certificate")
    return store


def _public_der(key: object) -> bytes:
    return key.public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )

"""Throw-away certificates: a CA and the broker and client certificates it signs.

What `herdless certs` writes, and what tests and the pytest plugin start secured brokers
with. Keys are ECDSA P-256: every client herdless serves (librdkafka, Python's ssl under
kafka-python and aiokafka, Java) takes them, and they are made in a millisecond. The
certificates carry the extensions strict verifiers ask for (basic constraints, key usage,
subject and authority key identifiers), so that OpenSSL's X509_STRICT accepts them too.

The time is the caller's: these functions read no clock.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_DAYS = 365
# A certificate is valid from a little before it was made, so that a peer whose clock is
# a few minutes behind accepts it.
_BACKDATE = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class Issued:
    """A private key and its certificate, with the certificates of its issuers."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate
    issuers: tuple[x509.Certificate, ...] = ()

    @property
    def certificate_der(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.DER)

    def key_pem(self, password: bytes | None = None) -> bytes:
        """The key as PKCS#8 PEM, the form Kafka reads; encrypted if a password is given."""
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password)
            if password
            else serialization.NoEncryption()
        )
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )

    def chain_pem(self) -> bytes:
        """The certificate and then its issuers', as a TLS peer sends them."""
        return b"".join(
            c.public_bytes(serialization.Encoding.PEM) for c in (self.certificate, *self.issuers)
        )

    def keystore_pem(self, password: bytes | None = None) -> bytes:
        """Key and chain in one file: a PEM keystore for `ssl.keystore.location`."""
        return self.key_pem(password) + self.chain_pem()


@dataclass(frozen=True)
class Authority(Issued):
    """A CA that signs certificates."""

    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        common_name: str,
        now: datetime.datetime,
        *,
        hosts: Iterable[str] = (),
        server: bool = False,
        client: bool = False,
        organizational_unit: str | None = None,
        days: int = DEFAULT_DAYS,
    ) -> Issued:
        """A certificate for `common_name`; `hosts` (names or IP addresses) become its
        subject alternative names, which TLS clients check the server's address against."""
        attributes = []
        if organizational_unit is not None:
            attributes.append(
                x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, organizational_unit)
            )
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        key = ec.generate_private_key(ec.SECP256R1())
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server + [
            ExtendedKeyUsageOID.CLIENT_AUTH
        ] * client
        builder = (
            _builder(x509.Name(attributes), self.certificate.subject, key, now, days)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(digital_signature=True), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        names = [_general_name(host) for host in dict.fromkeys(hosts)]
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        return Issued(key, certificate, (self.certificate, *self.issuers))


def new_authority(common_name: str, now: datetime.datetime, days: int = DEFAULT_DAYS) -> Authority:
    """A self-signed CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        _builder(name, name, key, now, days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Authority(key, certificate)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    now: datetime.datetime,
    days: int,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def _key_usage(
    *, digital_signature: bool = False, key_cert_sign: bool = False, crl_sign: bool = False
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)

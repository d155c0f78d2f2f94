"""Certificate subjects as Java's X500Principal.getName() writes them, which is what
Kafka's principal mapping rules match. Each expected string is OpenJDK 25's output for
the same certificate (java.security.cert.X509Certificate.getSubjectX500Principal())."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from herdless.security.distinguished_name import subject_name

A = x509.NameAttribute
RDN = x509.RelativeDistinguishedName

CASES = [
    (
        [A(NameOID.COUNTRY_NAME, "US"), A(NameOID.ORGANIZATION_NAME, "Org"),
         A(NameOID.ORGANIZATIONAL_UNIT_NAME, "ServiceUsers"), A(NameOID.COMMON_NAME, "Duke")],
        "CN=Duke,OU=ServiceUsers,O=Org,C=US",
    ),
    # Java escapes = and # anywhere, where RFC 4514 (and cryptography) do not
    ([A(NameOID.COMMON_NAME, 'Tkac, Adam+x=y;z<a>b"c\\d#e')],
     'CN=Tkac\\, Adam\\+x\\=y\\;z\\<a\\>b\\"c\\\\d\\#e'),
    ([A(NameOID.COMMON_NAME, "a=b#c")], "CN=a\\=b\\#c"),
    ([A(NameOID.COMMON_NAME, "#lead "), A(NameOID.ORGANIZATION_NAME, " sp")],
     "O=\\ sp,CN=\\#lead\\ "),
    # every leading and trailing space, not only the first and last
    ([A(NameOID.COMMON_NAME, "  two  ")], "CN=\\ \\ two\\ \\ "),
    ([A(NameOID.COMMON_NAME, " ")], "CN=\\ "),
    ([A(NameOID.COMMON_NAME, "a\x00b\x01c\x7fd")], "CN=a\\00b\x01c\x7fd"),
    # attributes without an RFC 2253 keyword: the OID and the value's DER in hex
    ([A(NameOID.COMMON_NAME, "alice"), A(NameOID.EMAIL_ADDRESS, "alice@example.com")],
     "1.2.840.113549.1.9.1=#1611616c696365406578616d706c652e636f6d,CN=alice"),
    ([A(NameOID.SERIAL_NUMBER, "1234"), A(NameOID.TITLE, "boss"), A(NameOID.GIVEN_NAME, "G"),
      A(NameOID.SURNAME, "S"), A(NameOID.COMMON_NAME, "x")],
     "CN=x,2.5.4.4=#0c0153,2.5.4.42=#0c0147,2.5.4.12=#0c04626f7373,2.5.4.5=#130431323334"),
    ([A(NameOID.DOMAIN_COMPONENT, "com"), A(NameOID.DOMAIN_COMPONENT, "example"),
      A(NameOID.USER_ID, "u1"), A(NameOID.STREET_ADDRESS, "Main St"),
      A(NameOID.STATE_OR_PROVINCE_NAME, "MD"), A(NameOID.LOCALITY_NAME, "Fulton")],
     "L=Fulton,ST=MD,STREET=Main St,UID=u1,DC=example,DC=com"),
    ([RDN([A(NameOID.COMMON_NAME, "b"), A(NameOID.ORGANIZATIONAL_UNIT_NAME, "a")]),
      RDN([A(NameOID.COMMON_NAME, "z")])],
     "CN=z,CN=b+OU=a"),
    ([A(NameOID.COMMON_NAME, "Jürgen Ölé 日本")], "CN=Jürgen Ölé 日本"),
    ([A(NameOID.COMMON_NAME, "plain", _ASN1Type.PrintableString),
      A(NameOID.ORGANIZATION_NAME, "t61 é", _ASN1Type.BMPString)],
     "O=t61 é,CN=plain"),
    ([A(NameOID.COMMON_NAME, "ia5", _ASN1Type.IA5String), A(NameOID.DOMAIN_COMPONENT, "dc1")],
     "DC=dc1,CN=ia5"),
]  # fmt: skip


def _certificate(subject: list[x509.NameAttribute] | list[x509.RelativeDistinguishedName]) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(subject)
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(x509.Name([A(NameOID.COMMON_NAME, "issuer")]))
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.DER)


@pytest.mark.parametrize(("subject", "java"), CASES)
def test_subject_as_java_writes_it(subject: list, java: str) -> None:
    assert subject_name(_certificate(subject)) == java


def test_not_a_certificate() -> None:
    with pytest.raises(ValueError):
        subject_name(b"\x30\x03\x02\x01\x01")

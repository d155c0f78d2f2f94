"""A certificate's subject written as Java's X500Principal.getName() writes it.

Kafka's principal mapping rules match this text, so herdless must produce it character
for character. It is RFC 2253's form, the last RDN first (`CN=Duke,OU=ServiceUsers,O=Org,
C=US`), as cryptography's `Name.rfc4514_string()` is too, but Java differs in ways that
decide whether a rule matches:

- it escapes `=` and `#` wherever they appear, and every leading and trailing space
  (and carriage return), where RFC 4514 escapes only a first `#` or space and a last space;
- only CN, C, L, ST, O, OU, STREET, DC and UID are written by name; any other attribute
  (emailAddress, serialNumber, title, ...) is its dotted OID with its value as `#` and the
  hex of its DER encoding: `1.2.840.113549.1.9.1=#1611616c69...`, never the text;
- values of types Java does not read as strings are hex the same way.

The subject is read from the certificate's own DER (its attribute types and the exact
bytes of each value), not from a re-encoding. Checked against OpenJDK 25's output.
"""

from __future__ import annotations

from cryptography import x509

# The attribute types Java writes by keyword in RFC 2253 form.
_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}

# The string types Java writes as text, and how it decodes each.
_STRING_TYPES = {
    0x0C: "utf-8",  # UTF8String
    0x13: "latin-1",  # PrintableString
    0x14: "latin-1",  # TeletexString
    0x16: "latin-1",  # IA5String
    0x1B: "latin-1",  # GeneralString
    0x1E: "utf-16-be",  # BMPString
}

_ESCAPED = frozenset(',=+<>#;"\\')
_SEQUENCE, _SET, _OID, _VERSION = 0x30, 0x31, 0x06, 0xA0


def subject_name(certificate_der: bytes) -> str:
    """The subject of a DER certificate as X500Principal.getName() gives it."""
    certificate = x509.load_der_x509_certificate(certificate_der)  # ValueError if it is none
    tbs = certificate.tbs_certificate_bytes
    _, start, _ = _tlv(tbs, 0, _SEQUENCE)
    fields = _children(tbs, start, len(tbs))
    if fields and tbs[fields[0][0]] == _VERSION:
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    offset, _ = fields[4]
    return name_from_der(tbs[offset : _tlv(tbs, offset, _SEQUENCE)[2]])


def name_from_der(name_der: bytes) -> str:
    """A DER-encoded X.501 Name (a SEQUENCE of RDN SETs) in Java's RFC 2253 form."""
    _, start, end = _tlv(name_der, 0, _SEQUENCE)
    rdns = []
    for rdn_offset, _ in _children(name_der, start, end):
        _, rdn_start, rdn_end = _tlv(name_der, rdn_offset, _SET)
        attributes = []
        for ava_offset, _ in _children(name_der, rdn_start, rdn_end):
            _, ava_start, ava_end = _tlv(name_der, ava_offset, _SEQUENCE)
            (oid_offset, _), (value_offset, value_end) = _children(name_der, ava_start, ava_end)
            _, oid_start, oid_end = _tlv(name_der, oid_offset, _OID)
            oid = _dotted(name_der[oid_start:oid_end])
            attributes.append(_attribute(oid, name_der[value_offset:value_end]))
        rdns.append("+".join(attributes))
    return ",".join(reversed(rdns))


def _attribute(oid: str, value_tlv: bytes) -> str:
    keyword = _KEYWORDS.get(oid)
    encoding = _STRING_TYPES.get(value_tlv[0])
    if keyword is None or encoding is None:
        return f"{keyword or oid}=#{value_tlv.hex()}"
    _, start, end = _tlv(value_tlv, 0)
    return f"{keyword}={_escape(value_tlv[start:end].decode(encoding, errors='replace'))}"


def _escape(value: str) -> str:
    escaped = "".join(
        "\\" + char if char in _ESCAPED else "\\00" if char == "\0" else char for char in value
    )
    # Then every leading and trailing space or carriage return, of the escaped text.
    lead = len(escaped) - len(escaped.lstrip(" \r"))
    trail = len(escaped.rstrip(" \r"))
    return "".join(
        "\\" + char if i < lead or i >= trail else char for i, char in enumerate(escaped)
    )


def _tlv(data: bytes, offset: int, tag: int | None = None) -> tuple[int, int, int]:
    """(tag, content start, end) of the DER element at offset."""
    if offset + 2 > len(data):
        raise ValueError("truncated DER")
    found = data[offset]
    if tag is not None and found != tag:
        raise ValueError(f"DER tag {found:#x} where {tag:#x} belongs")
    length = data[offset + 1]
    start = offset + 2
    if length & 0x80:
        size = length & 0x7F
        if size == 0 or size > 4 or start + size > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[start : start + size], "big")
        start += size
    if start + length > len(data):
        raise ValueError("truncated DER")
    return found, start, start + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """(offset, end) of each element between start and end."""
    children = []
    while start < end:
        _, _, child_end = _tlv(data, start)
        children.append((start, child_end))
        start = child_end
    return children


def _dotted(content: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        raise ValueError("empty OID")
    first = min(arcs[0] // 40, 2)
    return ".".join(map(str, [first, arcs[0] - 40 * first, *arcs[1:]]))

"""Random valid Kafka messages built from their schemas, and a reference writer for frames
with unknown tagged fields, which kafka-python's own encoder leaves out."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import strategies as st
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
# Tag numbers above any a schema uses.
UNKNOWN_TAGS = st.dictionaries(
    st.integers(20, 300).map(lambda tag: f"_{tag}"), st.binary(max_size=20), max_size=2
)


def _primitive(type_str: str) -> st.SearchStrategy[Any]:
    if type_str in _INTS:
        low, high = _INTS[type_str]
        return st.integers(low, high)
    if type_str == "float64":
        return st.floats(allow_nan=False)
    if type_str == "bool":
        return st.booleans()
    if type_str == "uuid":
        return st.uuids().filter(lambda u: u.int != 0)
    if type_str == "string":
        return st.text(max_size=12)
    if type_str in ("bytes", "records"):
        return st.binary(max_size=40)
    if type_str == "bitfield":
        return st.sets(st.integers(0, 31), max_size=4).filter(lambda bits: bits != {31})
    raise AssertionError(f"no strategy for {type_str}")


def _value(f: Any, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if f.is_struct_array():
        value = st.lists(_struct(f.array_of, version, flexible), max_size=3)
    elif f.is_array():
        value = st.lists(_primitive(f.array_of.type_str), max_size=3)
    elif f.is_struct():
        value = _struct(f, version, flexible)
    else:
        value = _primitive(f.type_str)
    if f.nullable_for_version_q(version) or f.type_str == "uuid":
        value = st.none() | value
    return value


@st.composite
def _built(draw: st.DrawFn, struct_field: Any, version: int, flexible: bool, cls: Any) -> Any:
    values: dict[str, Any] = {}
    for f in struct_field._fields:
        if not f.for_version_q(version):
            continue
        if f.tagged_field_q(version) and draw(st.booleans()):
            continue  # left out: its default
        values[f.name] = draw(_value(f, version, flexible))
    if flexible:
        values.update(draw(UNKNOWN_TAGS))
    return cls(**values)


# Strategies per (schema struct, version); schema fields compare equal without hashing.
_STRATEGIES: dict[tuple[int, int], st.SearchStrategy[Any]] = {}


def _struct(
    struct_field: Any, version: int, flexible: bool, cls: Any = None
) -> st.SearchStrategy[Any]:
    key = (id(struct_field), version)
    strategy = _STRATEGIES.get(key)
    if strategy is None:
        data_class = struct_field.data_class if cls is None else cls
        strategy = _STRATEGIES[key] = _built(struct_field, version, flexible, data_class)
    return strategy


def messages(message: type[ApiMessage], version: int) -> st.SearchStrategy[Any]:
    """Valid messages of this class and version: nulls only where the schema allows them,
    tagged fields present or not, unknown tagged fields in flexible versions."""
    flexible = message.flexible_version_q(version)
    return _struct(message._struct, version, flexible, message[None])


def tree(value: Any) -> Any:
    """A message as plain data, tags and unknown tags included, for comparing decoders."""
    if hasattr(value, "_struct"):
        fields = value._struct._fields
        version = value._version
        out = {
            "class": type(value).__name__,
            "version": version,
            "tags": value.tags,
            "unknown_tags": value.unknown_tags,
        }
        for f in fields:
            if version is None or f.for_version_q(version):
                out[f.name] = tree(getattr(value, f.name))
        header = getattr(value, "_header", None)
        if header is not None:
            out["header"] = tree(header)
        return out
    if isinstance(value, list):
        return [tree(item) for item in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return value


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _write_struct(struct_field: Any, item: Any, version: int, unknown: bool) -> bytes:
    out = bytearray()
    for f in struct_field.untagged_fields(version):
        out += _write_field(f, getattr(item, f.name), version, unknown)
    tags = [
        (f.tag, _write_field(f, getattr(item, f.name), version, unknown=False))
        for f in struct_field.tagged_fields(version)._fields
        if getattr(item, f.name) != f.default
    ]
    if unknown and item.unknown_tags:
        tags += [(int(name[1:]), data) for name, data in item.unknown_tags.items()]
    out += _uvarint(len(tags))
    for tag, data in sorted(tags):
        out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


def _write_field(f: Any, value: Any, version: int, unknown: bool) -> bytes:
    if f.is_array():
        if value is None:
            return b"\x00"
        head = _uvarint(len(value) + 1)
        if f.is_struct_array():
            return head + b"".join(
                _write_struct(f.array_of, item, version, unknown) for item in value
            )
        return head + b"".join(f.array_of.encode(item, compact=True) for item in value)
    if f.is_struct():
        body = _write_struct(f, value, version, unknown) if value is not None else b""
        if f.nullable_for_version_q(version):
            return b"\xff" if value is None else b"\x01" + body
        return body
    return bytes(f.encode(value, version=version, compact=True))


def flexible_request_frame(
    request: Any,
    version: int,
    correlation_id: int,
    client_id: str | None,
    header_tags: dict[str, bytes],
    *,
    unknown: bool = True,
) -> bytes:
    """A flexible version's request frame (header v2, no size prefix) written field by field
    from the schema, with every struct's unknown tags in its tag section (unless not
    `unknown`: then as kafka-python writes it)."""
    header = struct.pack(">hhi", request.API_KEY, version, correlation_id)
    header += RequestHeader._struct.fields["client_id"].encode(client_id, compact=False)
    tags = sorted((int(name[1:]), data) for name, data in header_tags.items())
    header += _uvarint(len(tags))
    for tag, data in tags:
        header += _uvarint(tag) + _uvarint(len(data)) + data
    return header + _write_struct(request._struct, request, version, unknown)

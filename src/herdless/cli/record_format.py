"""How `herdless consume` prints a record: a kcat-style format string, or a JSON object.

The format string takes kcat's `-f` tokens: %t topic, %p partition, %o offset,
%k key, %s value, %K key length, %S value length, %T timestamp (ms, -1 if none),
%h headers (`k=v,k2=v2`), %% a percent sign; and the escapes \\n, \\t, \\r, \\\\.
Keys and values are written as their bytes; a missing key prints as nothing
(its length as -1), as kcat prints it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\"}


class RecordLike(Protocol):
    """What a consumed record offers (confluent_kafka.Message has these)."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def headers(self) -> list[tuple[str, bytes | None]] | None: ...


def _headers(record: RecordLike) -> bytes:
    return b",".join(
        name.encode() + b"=" + (value or b"") for name, value in record.headers() or ()
    )


def _timestamp(record: RecordLike) -> int:
    kind, ms = record.timestamp()
    return ms if kind else -1  # kind 0: the record carries no timestamp


def _length(data: bytes | None) -> bytes:
    return str(-1 if data is None else len(data)).encode()


_FIELDS: dict[str, Callable[[RecordLike], bytes]] = {
    "t": lambda r: (r.topic() or "").encode(),
    "p": lambda r: str(r.partition()).encode(),
    "o": lambda r: str(r.offset()).encode(),
    "k": lambda r: r.key() or b"",
    "s": lambda r: r.value() or b"",
    "K": lambda r: _length(r.key()),
    "S": lambda r: _length(r.value()),
    "T": lambda r: str(_timestamp(r)).encode(),
    "h": _headers,
}


def compile_format(text: str) -> Callable[[RecordLike], bytes]:
    """The format as a function from a record to the bytes to print; ValueError names
    a token it does not know."""
    parts: list[bytes | Callable[[RecordLike], bytes]] = []
    literal = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        following = text[i + 1] if i + 1 < len(text) else ""
        if char == "%" and following == "%":
            literal += b"%"
        elif char == "%":
            if following not in _FIELDS:
                raise ValueError(
                    f"unknown format token %{following} (known: %{' %'.join(_FIELDS)})"
                )
            if literal:
                parts.append(bytes(literal))
                literal.clear()
            parts.append(_FIELDS[following])
        elif char == "\\" and following in _ESCAPES:
            literal += _ESCAPES[following]
        else:
            literal += char.encode()
            i += 1
            continue
        i += 2
    if literal:
        parts.append(bytes(literal))

    def render(record: RecordLike) -> bytes:
        return b"".join(part if isinstance(part, bytes) else part(record) for part in parts)

    return render


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def as_json(record: RecordLike) -> dict[str, Any]:
    """A record as one JSON object; keys, values and header values as UTF-8 text
    (bytes that are not UTF-8 replaced by U+FFFD), null when absent."""
    return {
        "topic": record.topic(),
        "partition": record.partition(),
        "offset": record.offset(),
        "timestamp": _timestamp(record),
        "key": _text(record.key()),
        "value": _text(record.value()),
        "headers": [{"key": k, "value": _text(v)} for k, v in record.headers() or ()],
    }


def json_line(record: RecordLike) -> bytes:
    return json.dumps(as_json(record)).encode() + b"\n"

"""How the message browser shows a record's key, value and header values.

Each field is shown as text when its bytes are UTF-8, pretty JSON when they
parse as a JSON object or array, and hex otherwise; a format the user picks
overrides that guess for every record of the page. What is shown is cut at a
bound so that a page of large records stays small, and "show all" raises the
bound for one record, never past WHOLE_BYTES.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass

# The bytes of a field shown on a page; beyond, it is cut.
SHOWN_BYTES = 1024
# The bytes of a field shown when one record is shown whole.
WHOLE_BYTES = 1024 * 1024


class Format(enum.Enum):
    AUTO = "auto"
    TEXT = "text"
    JSON = "json"
    HEX = "hex"


@dataclass(frozen=True, slots=True)
class FieldView:
    format: Format  # what it is shown as: TEXT, JSON or HEX
    text: str
    size: int  # the field's bytes
    cut: bool  # whether text shows only the first bytes
    note: str | None = None  # why the format asked for is not the one shown


def view(data: bytes, asked: Format = Format.AUTO, limit: int = SHOWN_BYTES) -> FieldView:
    """`data` as `asked` (AUTO: the guess above), cut after `limit` bytes: of the text
    shown, or for hex of the field (each shown as two digits and a space)."""
    utf8 = _utf8(data)
    if asked is Format.HEX or (asked is Format.AUTO and utf8 is None):
        return _hex(data, limit)
    if asked in (Format.JSON, Format.AUTO):
        pretty = _pretty_json(utf8, strict=asked is Format.AUTO)
        if pretty is not None:
            return _cut(Format.JSON, pretty, len(data), limit)
        if asked is Format.JSON:
            return dataclasses.replace(view(data, Format.AUTO, limit), note="not JSON")
    if utf8 is None:
        # Text was asked for bytes that are not UTF-8: what they decode to, marked.
        shown = data[:limit].decode("utf-8", errors="replace")
        return FieldView(Format.TEXT, shown, len(data), len(data) > limit, "not UTF-8")
    return _cut(Format.TEXT, utf8, len(data), limit)


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _pretty_json(text: str | None, strict: bool) -> str | None:
    """Pretty JSON; when guessing (`strict`), only of an object or an array: a bare
    number or word reads the same as text."""
    if text is None or (strict and text.lstrip()[:1] not in ("{", "[")):
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return json.dumps(parsed, indent=2, ensure_ascii=False)


def _cut(shown_as: Format, text: str, size: int, limit: int) -> FieldView:
    encoded = text.encode()
    if len(encoded) <= limit:
        return FieldView(shown_as, text, size, cut=False)
    # Cut on a character boundary: a partial last character is dropped.
    return FieldView(shown_as, encoded[:limit].decode("utf-8", errors="ignore"), size, cut=True)


def _hex(data: bytes, limit: int) -> FieldView:
    shown = data[:limit]
    return FieldView(Format.HEX, shown.hex(" "), len(data), cut=len(shown) < len(data))

"""How the message browser shows a field, and what its query string may say: pure logic."""

from __future__ import annotations

import json

import pytest

from herdless.console.record_view import SHOWN_BYTES, Format, view
from herdless.console.records import (
    DEFAULT_PAGE_SIZE,
    BadRequest,
    Browse,
    parse_browse,
    timestamp_text,
)


def test_the_guess_text_json_or_hex() -> None:
    assert view(b"plain words").format is Format.TEXT
    shown = view(b'{"a": [1, 2]}')
    assert (shown.format, shown.text) == (Format.JSON, json.dumps({"a": [1, 2]}, indent=2))
    # A bare number or string is JSON too, but reads the same as text.
    assert view(b"42").format is Format.TEXT
    assert view(b"{not json").format is Format.TEXT
    assert (view(b"\xff\x00").format, view(b"\xff\x00").text) == (Format.HEX, "ff 00")
    assert view("héllo ✓".encode()).text == "héllo ✓"


def test_a_format_asked_for_overrides_the_guess() -> None:
    assert view(b"ab", Format.HEX).text == "61 62"
    assert view(b'{"a": 1}', Format.TEXT).text == '{"a": 1}'
    assert view(b"7", Format.JSON).format is Format.JSON
    not_json = view(b"words", Format.JSON)
    assert (not_json.format, not_json.note) == (Format.TEXT, "not JSON")
    not_utf8 = view(b"a\xffb", Format.TEXT)
    assert (not_utf8.format, not_utf8.text, not_utf8.note) == (Format.TEXT, "a\ufffdb", "not UTF-8")


def test_large_fields_are_cut_on_a_character_boundary() -> None:
    shown = view(b"x" * (SHOWN_BYTES + 10))
    assert (shown.text, shown.cut, shown.size) == ("x" * SHOWN_BYTES, True, SHOWN_BYTES + 10)
    # A two-byte character across the bound is left out whole, never split.
    shown = view(b"x" * (SHOWN_BYTES - 1) + "é".encode())
    assert shown.text == "x" * (SHOWN_BYTES - 1) and shown.cut
    assert not view(b"x" * SHOWN_BYTES).cut
    hex_shown = view(bytes(range(256)) * 8, Format.HEX, limit=4)
    assert (hex_shown.text, hex_shown.cut) == ("00 01 02 03", True)
    assert view(b"x" * 5000, limit=10_000).text == "x" * 5000


def test_the_query_string() -> None:
    assert parse_browse({}) == Browse()
    browse = parse_browse(
        {"from": [" 12 "], "size": ["20"], "isolation": ["read_uncommitted"], "value": ["HEX"]}
    )
    assert (browse.offset, browse.size, browse.isolation) == (12, 20, "read_uncommitted")
    assert browse.formats["value"] is Format.HEX and browse.formats["key"] is Format.AUTO
    # Links carry the size, isolation and formats; the page's own position is replaced.
    assert browse.query(**{"from": None}, before=30) == (
        "before=30&size=20&isolation=read_uncommitted&value=hex"
    )
    # A form sends its empty fields: they say nothing.
    assert parse_browse({"from": [""], "size": ["50"]}).size == DEFAULT_PAGE_SIZE
    # From an offset, or else from a time.
    assert parse_browse({"from": ["2026-01-01T00:00:01Z"]}).time_ms == 1767225601000
    assert parse_browse({"from": ["2026-01-01T01:00:01+01:00"]}).time_ms == 1767225601000
    assert parse_browse({"from": ["2026-01-01"]}).time_ms == 1767225600000
    assert parse_browse({"from": ["2026"]}).offset == 2026


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"from": ["-3"]}, "from is an offset .0 or more. or an ISO time"),
        ({"before": ["x"]}, "before is a whole number"),
        ({"from": ["1"], "before": ["2"]}, "not both"),
        ({"size": ["501"]}, "size is records a page, 1 to 500"),
        ({"from": ["1969-12-31T23:59:59Z"]}, "from is a time after 1970"),
        ({"from": ["soon"]}, "from is an offset .0 or more. or an ISO time"),
        ({"whole": ["x"]}, "whole is a whole number"),
        ({"headers": ["yaml"]}, "headers is shown as one of auto, text, json, hex"),
        ({"isolation": ["none"]}, "isolation is read_committed or read_uncommitted"),
    ],
)
def test_bad_queries_name_the_parameter(query: dict[str, list[str]], named: str) -> None:
    with pytest.raises(BadRequest, match=named):
        parse_browse(query)


def test_timestamps_read_in_utc_to_the_millisecond() -> None:
    assert timestamp_text(1767225601234) == "2026-01-01 00:00:01.234"
    assert timestamp_text(None) == "none"

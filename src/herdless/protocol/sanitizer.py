"""Kafka's Sanitizer: user names and client ids as Kafka writes them into znode names and
metric names, and back."""

from __future__ import annotations

from urllib.parse import unquote_plus

# What java.net.URLEncoder leaves as it is; Kafka's Sanitizer then writes '*' as %2A.
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_")


def sanitize(name: str) -> str:
    """A name as Kafka's Sanitizer writes it into a znode name: UTF-8, percent-encoded
    but for letters, digits and `.-_` (a space is %20)."""
    return "".join(
        c if c in _UNRESERVED else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in name
    )


def desanitize(name: str) -> str:
    """A znode name back to the name (java.net.URLDecoder: '+' is a space)."""
    return unquote_plus(name, errors="strict")

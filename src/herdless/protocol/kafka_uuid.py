"""Kafka's text form of a Uuid (topic ids): the one spelling every layer shares."""

from __future__ import annotations

import base64
import binascii
import uuid


def kafka_uuid_str(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """The Uuid Kafka's Uuid.toString wrote as `text`; ValueError if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raw = b""
    if len(text) != 22 or len(raw) != 16:
        raise ValueError(f"not a Kafka uuid: {text!r}")
    return uuid.UUID(bytes=raw)

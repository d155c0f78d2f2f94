"""Kafka's text form of a Uuid (topic ids): the one spelling every layer shares."""

from __future__ import annotations

import base64
import uuid


def kafka_uuid_str(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")

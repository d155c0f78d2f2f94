"""Kafka's rules for a topic's name (Topic.validate), for every layer that checks one:
storage where topics are created, the coordinator where a group config names a topic."""

from __future__ import annotations

import re

# Kafka's limit: a partition directory name plus a deletion suffix must fit in 255 bytes.
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_problem(name: str) -> str | None:
    """Which of Kafka's rules `name` breaks, in words; None for a legal name."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is {len(name)} characters long; the limit is {MAX_TOPIC_NAME_LENGTH}"
    if not _LEGAL_NAME.fullmatch(name):
        return f"topic name {name!r} may contain only ASCII letters, digits, '.', '_' and '-'"
    return None

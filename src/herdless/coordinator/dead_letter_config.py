"""A share group's dead-letter topic (KIP-1191), as group configs with Kafka's names:
`errors.deadletterqueue.topic.name` (blank, the default: none) and
`errors.deadletterqueue.copy.record.enable` (false: a dead letter carries the context
headers alone, as in Kafka; true: the record's key, value and headers besides).

The name is checked where it is set: a legal topic name, not an internal one (Kafka
reserves names starting `__` for the brokers' own topics), and starting with the
broker's `errors.deadletterqueue.topic.name.prefix` ("dlq." by default; empty: any
name), so that a group cannot make the broker write into a business topic its
members could not write to themselves.
"""

from __future__ import annotations

from collections.abc import Mapping

from herdless.protocol.topic_names import topic_name_problem

DEAD_LETTER_TOPIC_NAME = "errors.deadletterqueue.topic.name"
DEAD_LETTER_COPY_RECORD_ENABLE = "errors.deadletterqueue.copy.record.enable"
DEFAULT_DEAD_LETTER_TOPIC_PREFIX = "dlq."
# Kafka's prefix of the topics only brokers write to.
INTERNAL_TOPIC_PREFIX = "__"


class InvalidDeadLetterTopic(ValueError):
    """A dead-letter topic name the group may not have, saying why."""


def check_dead_letter_topic(name: str, prefix: str) -> None:
    """InvalidDeadLetterTopic unless `name` is blank (no dead-letter topic) or a topic the
    broker may write dead letters to."""
    if not name.strip():
        return
    problem = topic_name_problem(name)
    if problem is not None:
        raise InvalidDeadLetterTopic(
            f"Invalid value {name} for configuration {DEAD_LETTER_TOPIC_NAME}: {problem}"
        )
    if name.startswith(INTERNAL_TOPIC_PREFIX):
        raise InvalidDeadLetterTopic(
            f"Invalid value {name} for configuration {DEAD_LETTER_TOPIC_NAME}: a dead-letter"
            f" topic cannot be an internal topic (a name starting {INTERNAL_TOPIC_PREFIX!r})"
        )
    if prefix and not name.startswith(prefix):
        raise InvalidDeadLetterTopic(
            f"Invalid value {name} for configuration {DEAD_LETTER_TOPIC_NAME}: a dead-letter"
            f" topic name must start with {prefix!r}"
            " (the broker's errors.deadletterqueue.topic.name.prefix)"
        )


def dead_letter_topic(explicit: Mapping[str, str]) -> str | None:
    """The group's dead-letter topic, None when it names none."""
    name = explicit.get(DEAD_LETTER_TOPIC_NAME, "").strip()
    return name or None

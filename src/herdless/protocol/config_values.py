"""Config values read from text as Kafka's ConfigDef reads them.

Every setting reaches herdless as text: a properties file, `herdless serve --set`, an
AlterConfigs or IncrementalAlterConfigs request (the protocol carries every config value
as a string), a client's settings or a Spark option. Broker settings, topic configs,
group configs and client settings are parsed here, so that each accepts the spellings
Kafka accepts and refuses the rest in Kafka's words.
"""

from __future__ import annotations


class InvalidConfigValue(ValueError):
    """Kafka's ConfigException for one value: the message names the setting and the value."""

    def __init__(self, name: str, value: str, reason: str) -> None:
        super().__init__(f"Invalid value {value} for configuration {name}: {reason}")
        self.name = name
        self.value = value


def parse_boolean(name: str, value: str) -> bool:
    """A BOOLEAN setting: true or false in any case, surrounding white space ignored;
    anything else is an InvalidConfigValue naming `name`."""
    trimmed = value.strip().lower()
    if trimmed == "true":
        return True
    if trimmed == "false":
        return False
    raise InvalidConfigValue(name, value, "Expected value to be either true or false")


def format_boolean(value: bool) -> str:
    """A BOOLEAN setting as Kafka writes it back (DescribeConfigs, defaults)."""
    return "true" if value else "false"

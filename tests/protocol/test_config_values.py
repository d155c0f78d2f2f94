"""Config values read as Kafka's ConfigDef reads them."""

from __future__ import annotations

import pytest

from herdless.protocol.config_values import InvalidConfigValue, format_boolean, parse_boolean


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("false", False), ("TRUE", True), ("False", False), (" true\t", True)],
)
def test_a_boolean_is_true_or_false_in_any_case_and_white_space(text: str, value: bool) -> None:
    assert parse_boolean("log.cleaner.enable", text) is value


@pytest.mark.parametrize("text", ["yes", "1", "", "truee", "t"])
def test_anything_else_is_refused_in_kafkas_words(text: str) -> None:
    with pytest.raises(InvalidConfigValue) as refused:
        parse_boolean("log.cleaner.enable", text)
    assert str(refused.value) == (
        f"Invalid value {text} for configuration log.cleaner.enable:"
        " Expected value to be either true or false"
    )
    assert (refused.value.name, refused.value.value) == ("log.cleaner.enable", text)


def test_a_boolean_is_written_back_as_kafka_writes_it() -> None:
    assert (format_boolean(True), format_boolean(False)) == ("true", "false")

"""sasl.jaas.config as Kafka writes it, and errors that never repeat a secret."""

from __future__ import annotations

import pytest

from herdless.security.jaas import JaasConfigError, parse_jaas_config


def test_a_login_module_with_quoted_options() -> None:
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.scram.ScramLoginModule required\n"
        '    username="broker" password="p@ss \\"word\\";";'
    )
    assert entry.login_module == "org.apache.kafka.common.security.scram.ScramLoginModule"
    assert entry.flag == "required"
    assert entry.options == {"username": "broker", "password": 'p@ss "word";'}
    assert "p@ss" not in repr(entry)


def test_bare_word_values_as_oauthbearer_options_are_written() -> None:
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule Required"
        " unsecuredLoginStringClaim_sub=admin;"
    )
    assert entry.flag == "required"
    assert entry.options == {"unsecuredLoginStringClaim_sub": "admin"}


@pytest.mark.parametrize(
    "text",
    [
        'Module required username="a"',  # no semicolon
        'Module always username="a";',  # no such flag
        'Module required username "secret-value";',  # no =
        '"Module" required;',
        "Module required username=;",
    ],
)
def test_unreadable_configs_say_so_without_their_values(text: str) -> None:
    with pytest.raises(JaasConfigError) as info:
        parse_jaas_config(text)
    assert "secret-value" not in str(info.value)

"""ssl.principal.mapping.rules, case for case after Kafka's SslPrincipalMapperTest."""

from __future__ import annotations

import datetime

import pytest

from herdless.security.certificates import new_authority
from herdless.security.principal import ANONYMOUS, user
from herdless.security.principal_mapping import (
    PrincipalMappingError,
    SslPrincipalMapper,
    principal_from_certificate,
)


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_valid_rules(rules: str) -> None:
    SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(PrincipalMappingError, match="invalid rule"):
        SslPrincipalMapper.from_rules(rules)


def test_first_matching_rule_wins_with_its_case() -> None:
    mapper = SslPrincipalMapper.from_rules(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert (
        mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    )


@pytest.mark.parametrize(
    ("expected", "rules"),
    [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        (
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
        ),
        # empty rules are ignored
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        # escape sequences
        ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
        ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
        # rules rule
        (
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT,"
            " /DEFAULT, DEFAULT]",
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT,"
            " /DEFAULT/,DEFAULT",
        ),
    ],
)
def test_rules_splitting(expected: str, rules: str) -> None:
    assert str(SslPrincipalMapper.from_rules(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_with_whitespace() -> None:
    mapper = SslPrincipalMapper.from_rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_no_setting_is_default_and_an_empty_one_maps_nothing() -> None:
    assert SslPrincipalMapper.from_rules(None).name("CN=a,O=b") == "CN=a,O=b"
    with pytest.raises(PrincipalMappingError, match="no rule of ssl.principal.mapping.rules"):
        SslPrincipalMapper.from_rules("").name("CN=a")


@pytest.mark.parametrize(
    ("replacement", "expected"),
    [
        ("$1", "duke"),
        ("$0!", "CN=duke,O=x!"),
        ("$12", "duke2"),  # Java reads digits only while they name a group
        ("$1@$5", "duke@$5"),  # no group 5: literal, as Kafka escapes it
        ("\\$1", "$1"),
        ("${who}", "duke"),
    ],
)
def test_replacements_read_as_java_reads_them(replacement: str, expected: str) -> None:
    mapper = SslPrincipalMapper.from_rules(f"RULE:^CN=(?P<who>[^,]*),O=(.*)$/{replacement}/")
    assert mapper.name("CN=duke,O=x") == expected


def test_kafkas_misplaced_escape_of_a_second_missing_group() -> None:
    # Kafka escapes the second `$5` one character early, so it names group 5 after all
    # and the rule fails; herdless refuses the rule when it reads it.
    with pytest.raises(PrincipalMappingError, match="no group 5"):
        SslPrincipalMapper.from_rules("RULE:^CN=(.*)$/$5@$5/")


@pytest.mark.parametrize(
    ("rules", "words"),
    [
        ("RULE:^CN=(.*$/$1/", "not a regular expression"),
        ("RULE:^CN=.*$/$1/", "no group 1"),
        ("RULE:^CN=(.*)$/$x/", "is no group"),
        ("RULE:^CN=(.*)$/a\\/", "invalid rule"),
        ("RULE:^CN=(.*)$/${nope}/", "no group named 'nope'"),
    ],
)
def test_unusable_rules_are_named(rules: str, words: str) -> None:
    with pytest.raises(PrincipalMappingError, match=words):
        SslPrincipalMapper.from_rules(rules)


def test_no_certificate_is_anonymous() -> None:
    assert principal_from_certificate(None, SslPrincipalMapper.from_rules(None)) == ANONYMOUS
    assert principal_from_certificate(b"", SslPrincipalMapper.from_rules(None)) == ANONYMOUS


def test_principal_from_a_certificate_through_the_rules() -> None:
    now = datetime.datetime.now(datetime.UTC)
    ca = new_authority("test CA", now)
    client = ca.issue("Duke", now, organizational_unit="ServiceUsers", client=True)
    der = client.certificate_der
    assert principal_from_certificate(der, SslPrincipalMapper.from_rules(None)) == user(
        "CN=Duke,OU=ServiceUsers"
    )
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT")
    assert principal_from_certificate(der, mapper) == user("duke")

"""sasl.kerberos.principal.to.local.rules: the cases of Kafka's KerberosNameTest and
KerberosRuleTest, then how the setting is split."""

from __future__ import annotations

import pytest

from herdless.security.kerberos_names import (
    KerberosName,
    KerberosNameError,
    KerberosShortNamer,
    NoMatchingRule,
    replace_parameters,
    split_rules,
)


def short(rules: list[str] | None, principal: str, realm: str = "REALM.COM") -> str:
    return KerberosShortNamer.from_rules(realm, rules).short_name(KerberosName.parse(principal))


def test_a_name_parses_into_service_host_and_realm() -> None:
    assert KerberosName.parse("App.service-name/example.com@REALM.COM") == KerberosName(
        "App.service-name", "example.com", "REALM.COM"
    )
    assert KerberosName.parse("App.service-name@REALM.COM") == KerberosName(
        "App.service-name", None, "REALM.COM"
    )
    assert KerberosName.parse("user/host@REALM.COM") == KerberosName("user", "host", "REALM.COM")
    assert str(KerberosName.parse("user/host@REALM.COM")) == "user/host@REALM.COM"
    # Without a realm a name is simple, slashes and all.
    assert KerberosName.parse("user/host") == KerberosName("user/host")
    with pytest.raises(KerberosNameError, match="Malformed Kerberos name"):
        KerberosName.parse("a/b/c@REALM.COM")


def test_rules_map_service_and_user_names() -> None:
    rules = [
        r"RULE:[1:$1](App\..*)s/App\.(.*)/$1/g",
        r"RULE:[2:$1](App\..*)s/App\.(.*)/$1/g",
        "DEFAULT",
    ]
    assert short(rules, "App.service-name/example.com@REALM.COM") == "service-name"
    assert short(rules, "App.service-name@REALM.COM") == "service-name"
    assert short(rules, "user/host@REALM.COM") == "user"


def test_the_default_rule_maps_the_default_realm_alone() -> None:
    assert short(None, "alice@REALM.COM") == "alice"
    assert short(None, "kafka/broker1.example.com@REALM.COM") == "kafka"
    assert short(None, "alice") == "alice"
    with pytest.raises(NoMatchingRule, match="No rules apply to alice@OTHER.COM"):
        short(None, "alice@OTHER.COM")
    with pytest.raises(NoMatchingRule):
        short([], "alice@REALM.COM")


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("L", ["user", "test", "xyz_user_xyz", "service-name", "user"]),
        ("U", ["USER", "TEST", "XYZ_USER_XYZ", "SERVICE-NAME", "USER"]),
    ],
)
def test_rules_lower_or_upper_case_their_result(flag: str, expected: list[str]) -> None:
    rules = [
        f"RULE:[1:$1]/{flag}",
        f"RULE:[2:$1](Test.*)s/ABC///{flag}",
        f"RULE:[2:$1](ABC.*)s/ABC/XYZ/g/{flag}",
        rf"RULE:[2:$1](App\..*)s/App\.(.*)/$1/g/{flag}",
        f"RULE:[2:$1]/{flag}",
        "DEFAULT",
    ]
    principals = [
        "User@REALM.COM",
        "TestABC/host@FOO.COM",
        "ABC_User_ABC/host@FOO.COM",
        "App.SERVICE-name/example.com@REALM.COM",
        "User/root@REALM.COM",
    ]
    assert [short(rules, p) for p in principals] == expected


def test_without_g_only_the_first_match_is_replaced() -> None:
    assert short(["RULE:[2:$1](ABC.*)s/ABC/XYZ/"], "ABC_ABC/host@FOO.COM") == "XYZ_ABC"
    assert short(["RULE:[2:$1](ABC.*)s/ABC/XYZ/g"], "ABC_ABC/host@FOO.COM") == "XYZ_XYZ"


def test_the_format_reaches_every_component_and_the_realm() -> None:
    rules = [
        r"RULE:[2:$1@$0](kafka@EXAMPLE\.COM)s/@.*//",
        r"RULE:[1:$1@$0](.*@EXAMPLE\.COM)s/@.*//",
    ]
    assert short(rules, "kafka/broker1@EXAMPLE.COM") == "kafka"
    assert short(rules, "alice@EXAMPLE.COM") == "alice"
    with pytest.raises(NoMatchingRule):
        short(rules, "zookeeper/host@EXAMPLE.COM")
    assert short(["RULE:[2:$2.$1]"], "alice/admin@EXAMPLE.COM") == "admin.alice"


def test_a_rule_that_leaves_a_slash_or_at_refuses_the_name() -> None:
    with pytest.raises(NoMatchingRule, match="Non-simple name alice@EXAMPLE.COM"):
        short(["RULE:[1:$1@$0]", "DEFAULT"], "alice@EXAMPLE.COM", realm="EXAMPLE.COM")


@pytest.mark.parametrize(
    "rule",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/g",
        "rule:[1:$1]",
        "rule:[1:$1]/L/U",
        "rule:[1:$1]/U/L",
        "rule:[1:$1]/LU",
        "RULE:[1:$1/L",
        "RULE:[1:$1]/l",
        "RULE:[2:$1](ABC.*)s/ABC/XYZ/L/g",
        # beyond Kafka's cases: what Java would refuse only when a client connects
        "RULE:[:$1]",
        "RULE:[1:$1](a(b)",
        "RULE:[1:$1](.*)s/(a)/$2/",
        "",
    ],
)
def test_invalid_rules_are_refused_when_read(rule: str) -> None:
    with pytest.raises(KerberosNameError, match="Invalid rule"):
        KerberosShortNamer.from_rules("REALM.COM", [rule])


def test_parameters_are_replaced_without_recursion() -> None:
    many = ["too", "many", "parameters", "are", "ok"]
    assert replace_parameters("", []) == ""
    assert replace_parameters("hello", []) == "hello"
    assert replace_parameters("", many) == ""
    assert replace_parameters("hello", many) == "hello"
    assert replace_parameters("hello $0", many) == "hello too"
    assert replace_parameters("hello $0", ["no recursion $1"]) == "hello no recursion $1"
    with pytest.raises(KerberosNameError, match="outside of the valid range"):
        replace_parameters("$0", [])
    with pytest.raises(KerberosNameError, match="bad format"):
        replace_parameters("hello $a", ["does not matter"])


def test_the_setting_splits_as_kafkas_list_type() -> None:
    assert split_rules(None) is None
    assert split_rules("") == []
    assert split_rules(" RULE:[1:$1] , DEFAULT ") == ["RULE:[1:$1]", "DEFAULT"]
    assert split_rules("DEFAULT,,DEFAULT") == ["DEFAULT", "", "DEFAULT"]

"""The authorizer's decisions, case by case after Kafka's AclAuthorizerTest: deny beats
allow, prefixed and wildcard patterns, the principal and host wildcards, implied
operations, super users, and allow.everyone.if.no.acl.found."""

from __future__ import annotations

import pytest

from herdless.security.acls import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from herdless.security.authorizer import (
    AclCache,
    Authorizer,
    AuthorizerSettings,
    authorizer_settings,
)
from herdless.security.principal import KafkaPrincipal, parse_principal, user
from herdless.security.settings import SecuritySettings

ALICE, BOB = user("alice"), user("bob")
HOST, OTHER_HOST = "192.168.0.1", "192.168.0.2"
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def acl(
    principal: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    host: str = "*",
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, permission)


def authorizer(
    acls: dict[tuple[ResourceType, str, PatternType], list[AccessControlEntry]],
    *,
    super_users: tuple[str, ...] = (),
    allow_everyone: bool = False,
) -> Authorizer:
    cache = AclCache()
    for (resource_type, name, pattern_type), entries in acls.items():
        cache.put(ResourcePattern(resource_type, name, pattern_type), entries)
    settings = AuthorizerSettings(frozenset(map(parse_principal, super_users)), allow_everyone)
    return Authorizer(settings, cache)


def allowed(
    auth: Authorizer,
    principal: KafkaPrincipal,
    operation: AclOperation,
    name: str,
    resource_type: ResourceType = TOPIC,
    host: str = HOST,
) -> bool:
    return auth.authorize(principal, host, operation, resource_type, name)


def test_without_acls_nothing_is_allowed() -> None:
    assert not allowed(authorizer({}), ALICE, Op.READ, "orders")


def test_an_allow_grants_its_principal_its_operation_on_its_resource_only() -> None:
    auth = authorizer({(TOPIC, "orders", LITERAL): [acl("User:alice", Op.READ)]})
    assert allowed(auth, ALICE, Op.READ, "orders")
    assert not allowed(auth, BOB, Op.READ, "orders")
    assert not allowed(auth, ALICE, Op.WRITE, "orders")
    assert not allowed(auth, ALICE, Op.READ, "orders2")
    assert not allowed(auth, ALICE, Op.READ, "orders", resource_type=GROUP)


def test_deny_beats_allow() -> None:
    auth = authorizer(
        {
            (TOPIC, "orders", LITERAL): [
                acl("User:alice", Op.ALL),
                acl("User:alice", Op.READ, DENY),
            ]
        }
    )
    assert not allowed(auth, ALICE, Op.READ, "orders")
    assert allowed(auth, ALICE, Op.WRITE, "orders")


def test_a_deny_from_one_host_refuses_only_that_host() -> None:
    auth = authorizer(
        {
            (TOPIC, "orders", LITERAL): [
                acl("User:alice", Op.READ),
                acl("User:alice", Op.READ, DENY, host=OTHER_HOST),
            ]
        }
    )
    assert allowed(auth, ALICE, Op.READ, "orders", host=HOST)
    assert not allowed(auth, ALICE, Op.READ, "orders", host=OTHER_HOST)


def test_an_allow_from_one_host_grants_only_that_host() -> None:
    auth = authorizer({(TOPIC, "orders", LITERAL): [acl("User:alice", Op.READ, host=HOST)]})
    assert allowed(auth, ALICE, Op.READ, "orders", host=HOST)
    assert not allowed(auth, ALICE, Op.READ, "orders", host=OTHER_HOST)


def test_the_principal_wildcard_matches_every_principal() -> None:
    auth = authorizer({(TOPIC, "orders", LITERAL): [acl("User:*", Op.READ)]})
    assert allowed(auth, ALICE, Op.READ, "orders")
    assert allowed(auth, KafkaPrincipal("Group", "ops"), Op.READ, "orders")
    assert not allowed(auth, ALICE, Op.WRITE, "orders")


def test_a_deny_for_every_principal_beats_an_allow_for_one() -> None:
    auth = authorizer(
        {
            (TOPIC, "orders", LITERAL): [
                acl("User:alice", Op.READ),
                acl("User:*", Op.READ, DENY),
            ]
        }
    )
    assert not allowed(auth, ALICE, Op.READ, "orders")


def test_the_wildcard_resource_applies_to_every_name() -> None:
    auth = authorizer({(TOPIC, "*", LITERAL): [acl("User:alice", Op.READ)]})
    assert allowed(auth, ALICE, Op.READ, "orders")
    assert allowed(auth, ALICE, Op.READ, "anything")
    assert allowed(auth, ALICE, Op.READ, "")
    assert not allowed(auth, ALICE, Op.READ, "orders", resource_type=GROUP)


def test_a_deny_on_the_wildcard_resource_beats_an_allow_on_the_name() -> None:
    auth = authorizer(
        {
            (TOPIC, "orders", LITERAL): [acl("User:alice", Op.READ)],
            (TOPIC, "*", LITERAL): [acl("User:alice", Op.READ, DENY)],
        }
    )
    assert not allowed(auth, ALICE, Op.READ, "orders")


def test_a_prefixed_acl_applies_to_the_names_it_begins() -> None:
    auth = authorizer({(TOPIC, "logs-", PREFIXED): [acl("User:alice", Op.WRITE)]})
    assert allowed(auth, ALICE, Op.WRITE, "logs-")
    assert allowed(auth, ALICE, Op.WRITE, "logs-app")
    assert not allowed(auth, ALICE, Op.WRITE, "logs")
    assert not allowed(auth, ALICE, Op.WRITE, "app-logs-")


def test_a_prefixed_deny_beats_a_literal_allow() -> None:
    auth = authorizer(
        {
            (TOPIC, "logs-secret", LITERAL): [acl("User:alice", Op.READ)],
            (TOPIC, "logs-", PREFIXED): [acl("User:alice", Op.READ, DENY)],
        }
    )
    assert not allowed(auth, ALICE, Op.READ, "logs-secret")


def test_prefixes_of_several_lengths_all_apply() -> None:
    auth = authorizer(
        {
            (TOPIC, "a", PREFIXED): [acl("User:alice", Op.READ)],
            (TOPIC, "abc", PREFIXED): [acl("User:bob", Op.READ)],
            (TOPIC, "abcdef", PREFIXED): [acl("User:alice", Op.READ, DENY)],
        }
    )
    assert allowed(auth, ALICE, Op.READ, "abc")
    assert allowed(auth, BOB, Op.READ, "abcd")
    assert not allowed(auth, BOB, Op.READ, "ab")
    assert not allowed(auth, ALICE, Op.READ, "abcdefg")
    assert allowed(auth, BOB, Op.READ, "abcdefg")


def test_a_prefix_that_loses_its_acls_no_longer_applies() -> None:
    auth = authorizer({(TOPIC, "logs-", PREFIXED): [acl("User:alice", Op.READ)]})
    auth.cache.put(ResourcePattern(TOPIC, "logs-", PREFIXED), [])
    assert not allowed(auth, ALICE, Op.READ, "logs-app")
    assert auth.cache.patterns() == []


@pytest.mark.parametrize(
    ("granted", "implied"),
    [
        (Op.READ, {Op.READ, Op.DESCRIBE}),
        (Op.WRITE, {Op.WRITE, Op.DESCRIBE}),
        (Op.DELETE, {Op.DELETE, Op.DESCRIBE}),
        (Op.ALTER, {Op.ALTER, Op.DESCRIBE}),
        (Op.DESCRIBE, {Op.DESCRIBE}),
        (Op.ALTER_CONFIGS, {Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}),
        (Op.DESCRIBE_CONFIGS, {Op.DESCRIBE_CONFIGS}),
        (Op.CREATE, {Op.CREATE}),
        (Op.ALL, {o for o in AclOperation if o.value > Op.ALL}),
    ],
)
def test_what_allowing_an_operation_implies(
    granted: AclOperation, implied: set[AclOperation]
) -> None:
    auth = authorizer({(TOPIC, "orders", LITERAL): [acl("User:alice", granted)]})
    concrete = {o for o in AclOperation if o.value > Op.ALL}
    assert {o for o in concrete if allowed(auth, ALICE, o, "orders")} == implied


@pytest.mark.parametrize(
    ("denied", "refused"),
    [
        (Op.READ, {Op.READ}),
        (Op.DESCRIBE, {Op.DESCRIBE}),
        (Op.ALTER_CONFIGS, {Op.ALTER_CONFIGS}),
        (Op.ALL, {o for o in AclOperation if o.value > Op.ALL}),
    ],
)
def test_a_deny_refuses_only_its_operation(
    denied: AclOperation, refused: set[AclOperation]
) -> None:
    """A DENY is not implied onwards: denying READ leaves DESCRIBE to the allow."""
    auth = authorizer(
        {(TOPIC, "orders", LITERAL): [acl("User:alice", Op.ALL), acl("User:alice", denied, DENY)]}
    )
    concrete = {o for o in AclOperation if o.value > Op.ALL}
    assert {o for o in concrete if not allowed(auth, ALICE, o, "orders")} == refused


def test_super_users_may_do_anything_even_when_denied() -> None:
    auth = authorizer(
        {(TOPIC, "orders", LITERAL): [acl("User:admin", Op.ALL, DENY)]},
        super_users=("User:admin", "Group:ops"),
    )
    assert allowed(auth, user("admin"), Op.DELETE, "orders")
    assert allowed(auth, user("admin"), Op.ALTER, "kafka-cluster", resource_type=CLUSTER)
    assert allowed(auth, KafkaPrincipal("Group", "ops"), Op.READ, "anything")
    assert not allowed(auth, user("ops"), Op.READ, "anything")


def test_allow_everyone_if_no_acl_found_applies_only_where_no_acl_applies() -> None:
    auth = authorizer(
        {
            (TOPIC, "orders", LITERAL): [acl("User:bob", Op.READ)],
            (TOPIC, "logs-", PREFIXED): [acl("User:bob", Op.READ)],
        },
        allow_everyone=True,
    )
    assert allowed(auth, ALICE, Op.READ, "payments")
    assert allowed(auth, ALICE, Op.ALTER, "anything", resource_type=GROUP)
    # An ACL for someone else on the resource, literal or by prefix: ALICE has none.
    assert not allowed(auth, ALICE, Op.READ, "orders")
    assert not allowed(auth, ALICE, Op.READ, "logs-app")


def test_allow_everyone_if_no_acl_found_yields_to_a_wildcard_acl() -> None:
    auth = authorizer({(TOPIC, "*", LITERAL): [acl("User:bob", Op.READ)]}, allow_everyone=True)
    assert not allowed(auth, ALICE, Op.READ, "payments")


def test_authorized_names_filters_many_topics_at_once() -> None:
    auth = authorizer(
        {
            (TOPIC, "logs-", PREFIXED): [acl("User:alice", Op.READ)],
            (TOPIC, "orders", LITERAL): [acl("User:alice", Op.WRITE)],
            (TOPIC, "logs-secret", LITERAL): [acl("User:alice", Op.ALL, DENY)],
        }
    )
    names = ["orders", "logs-a", "logs-secret", "payments", "logs-b"]
    assert auth.authorized_names(ALICE, HOST, Op.DESCRIBE, TOPIC, names) == [
        "orders",
        "logs-a",
        "logs-b",
    ]
    assert auth.authorized_names(BOB, HOST, Op.DESCRIBE, TOPIC, names) == []
    with_no_topic_acls = authorizer({(GROUP, "g", LITERAL): [acl("User:bob", Op.READ)]})
    assert with_no_topic_acls.authorized_names(BOB, HOST, Op.DESCRIBE, TOPIC, names) == []


def test_authorize_by_resource_type_needs_one_allow_not_covered_by_a_deny() -> None:
    def by_type(auth: Authorizer, principal: KafkaPrincipal = ALICE) -> bool:
        return auth.authorize_by_resource_type(principal, HOST, Op.WRITE, TOPIC)

    assert not by_type(authorizer({}))
    assert by_type(authorizer({}, allow_everyone=True))
    assert by_type(authorizer({}, super_users=("User:alice",)))
    assert by_type(authorizer({(TOPIC, "t", LITERAL): [acl("User:alice", Op.WRITE)]}))
    assert by_type(authorizer({(TOPIC, "p-", PREFIXED): [acl("User:*", Op.ALL)]}))
    # READ does not imply WRITE, and another principal's ACL does not count.
    assert not by_type(authorizer({(TOPIC, "t", LITERAL): [acl("User:alice", Op.READ)]}))
    assert not by_type(authorizer({(TOPIC, "t", LITERAL): [acl("User:bob", Op.WRITE)]}))
    # A deny on the literal name, on a shorter prefix, or on every topic.
    denied_literal = {
        (TOPIC, "t", LITERAL): [acl("User:alice", Op.WRITE), acl("User:alice", Op.WRITE, DENY)]
    }
    assert not by_type(authorizer(denied_literal))
    denied_prefix = {
        (TOPIC, "abc", LITERAL): [acl("User:alice", Op.WRITE)],
        (TOPIC, "ab", PREFIXED): [acl("User:alice", Op.WRITE, DENY)],
    }
    assert not by_type(authorizer(denied_prefix))
    denied_all = {
        (TOPIC, "t", LITERAL): [acl("User:alice", Op.WRITE)],
        (TOPIC, "*", LITERAL): [acl("User:alice", Op.WRITE, DENY)],
    }
    assert not by_type(authorizer(denied_all, allow_everyone=True))
    # A deny elsewhere leaves the allow standing.
    elsewhere = {
        (TOPIC, "abc", LITERAL): [acl("User:alice", Op.WRITE)],
        (TOPIC, "xy", PREFIXED): [acl("User:alice", Op.WRITE, DENY)],
    }
    assert by_type(authorizer(elsewhere))


def test_settings_turn_the_authorizer_on_by_kafkas_class_names() -> None:
    assert authorizer_settings(SecuritySettings()) is None
    assert authorizer_settings(SecuritySettings({"authorizer.class.name": ""})) is None
    for name in (
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "acls",
    ):
        settings = authorizer_settings(SecuritySettings({"authorizer.class.name": name}))
        assert settings == AuthorizerSettings(frozenset(), False)
    settings = authorizer_settings(
        SecuritySettings(
            {
                "authorizer.class.name": "acls",
                "super.users": "User:admin; User:CN=broker,O=x ;",
                "allow.everyone.if.no.acl.found": "TRUE",
            }
        )
    )
    assert settings == AuthorizerSettings(frozenset({user("admin"), user("CN=broker,O=x")}), True)


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"authorizer.class.name": "com.example.Mine"}, "authorizer.class.name"),
        ({"authorizer.class.name": "acls", "super.users": "admin"}, "super.users"),
        (
            {"authorizer.class.name": "acls", "allow.everyone.if.no.acl.found": "yes"},
            "allow.everyone.if.no.acl.found",
        ),
    ],
)
def test_bad_settings_are_named(settings: dict[str, str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        authorizer_settings(SecuritySettings(settings))

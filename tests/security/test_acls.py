"""ACL values and filters with Kafka's rules: which patterns and entries a filter matches,
which bindings Kafka refuses, and the names Kafka writes."""

from __future__ import annotations

import pytest

from herdless.security.acls import (
    ANY_ENTRY,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    check_binding,
    check_filter,
    deletion_targets,
)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ANY, MATCH = PatternType.ANY, PatternType.MATCH
READ_BY_ALICE = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)


def test_wire_codes_and_kafka_names() -> None:
    assert [int(t) for t in ResourceType] == list(range(8))
    assert [int(t) for t in PatternType] == list(range(5))
    assert [int(o) for o in AclOperation] == list(range(15))
    assert [int(p) for p in AclPermissionType] == list(range(4))
    assert ResourceType.TRANSACTIONAL_ID.kafka_name == "TransactionalId"
    assert AclOperation.IDEMPOTENT_WRITE.kafka_name == "IdempotentWrite"
    assert AclPermissionType.ALLOW.kafka_name == "Allow"
    for text in ("IdempotentWrite", "IDEMPOTENT_WRITE", "idempotent-write", "idempotentwrite"):
        assert AclOperation.parse(text) is AclOperation.IDEMPOTENT_WRITE
    with pytest.raises(ValueError, match="known"):
        AclOperation.parse("Fly")
    assert ResourceType.from_code(99) is ResourceType.UNKNOWN


@pytest.mark.parametrize(
    ("pattern_filter", "literal", "prefixed", "wildcard"),
    [
        # name, type: (matches "orders" literal, "ord" prefixed, "*" literal)
        (ResourcePatternFilter(TOPIC, "orders", LITERAL), True, False, False),
        (ResourcePatternFilter(TOPIC, "ord", PREFIXED), False, True, False),
        (ResourcePatternFilter(TOPIC, "orders", ANY), True, False, False),
        (ResourcePatternFilter(TOPIC, "ord", ANY), False, True, False),
        (ResourcePatternFilter(TOPIC, "orders", MATCH), True, True, True),
        (ResourcePatternFilter(TOPIC, "other", MATCH), False, False, True),
        (ResourcePatternFilter(TOPIC, None, ANY), True, True, True),
        (ResourcePatternFilter(TOPIC, None, LITERAL), True, False, True),
        (ResourcePatternFilter(ResourceType.ANY, None, ANY), True, True, True),
        (ResourcePatternFilter(GROUP, None, ANY), False, False, False),
    ],
)
def test_pattern_filters_match_as_kafkas(
    pattern_filter: ResourcePatternFilter, literal: bool, prefixed: bool, wildcard: bool
) -> None:
    assert pattern_filter.matches(ResourcePattern(TOPIC, "orders", LITERAL)) is literal
    assert pattern_filter.matches(ResourcePattern(TOPIC, "ord", PREFIXED)) is prefixed
    assert pattern_filter.matches(ResourcePattern(TOPIC, "*", LITERAL)) is wildcard


def test_entry_filters_match_on_what_they_name() -> None:
    assert ANY_ENTRY.matches(READ_BY_ALICE)
    by_alice = AccessControlEntryFilter("User:alice", None, AclOperation.ANY, AclPermissionType.ANY)
    assert by_alice.matches(READ_BY_ALICE)
    by_bob = AccessControlEntryFilter("User:bob", None, AclOperation.ANY, AclPermissionType.ANY)
    assert not by_bob.matches(READ_BY_ALICE)
    writes = AccessControlEntryFilter(None, None, AclOperation.WRITE, AclPermissionType.ANY)
    assert not writes.matches(READ_BY_ALICE)
    denies = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.DENY)
    assert not denies.matches(READ_BY_ALICE)
    from_host = AccessControlEntryFilter(None, "10.0.0.1", AclOperation.ANY, AclPermissionType.ANY)
    assert not from_host.matches(READ_BY_ALICE)


@pytest.mark.parametrize(
    ("binding", "words"),
    [
        (AclBinding(ResourcePattern(TOPIC, "t", MATCH), READ_BY_ALICE), "MATCH"),
        (AclBinding(ResourcePattern(TOPIC, "t", ANY), READ_BY_ALICE), "ANY"),
        (AclBinding(ResourcePattern(TOPIC, "t", PatternType.UNKNOWN), READ_BY_ALICE), "unknown"),
        (AclBinding(ResourcePattern(ResourceType.ANY, "t", LITERAL), READ_BY_ALICE), "ANY"),
        (AclBinding(ResourcePattern(ResourceType.UNKNOWN, "t", LITERAL), READ_BY_ALICE), "unknown"),
        (AclBinding(ResourcePattern(TOPIC, "", LITERAL), READ_BY_ALICE), "empty"),
        (AclBinding(ResourcePattern(TOPIC, "a/b", LITERAL), READ_BY_ALICE), "a/b"),
        (
            AclBinding(ResourcePattern(ResourceType.CLUSTER, "c", LITERAL), READ_BY_ALICE),
            "kafka-cluster",
        ),
        (
            AclBinding(
                ResourcePattern(TOPIC, "t", LITERAL),
                AccessControlEntry("alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            ),
            "Type:name",
        ),
        (
            AclBinding(
                ResourcePattern(TOPIC, "t", LITERAL),
                AccessControlEntry("User:a", "*", AclOperation.ANY, AclPermissionType.ALLOW),
            ),
            "operation",
        ),
        (
            AclBinding(
                ResourcePattern(TOPIC, "t", LITERAL),
                AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ANY),
            ),
            "permissionType",
        ),
    ],
)
def test_bindings_kafka_refuses(binding: AclBinding, words: str) -> None:
    with pytest.raises(InvalidAcl, match=words):
        check_binding(binding)


def test_filters_with_unknown_elements_are_refused() -> None:
    check_filter(AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, ANY), ANY_ENTRY))
    with pytest.raises(InvalidAcl, match="UNKNOWN"):
        check_filter(
            AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN, None, ANY), ANY_ENTRY)
        )


def test_deletion_reaches_patterns_not_seen_yet_when_a_filter_names_one() -> None:
    known = [ResourcePattern(TOPIC, "seen", LITERAL)]
    exact = AclBindingFilter(ResourcePatternFilter(TOPIC, "unseen", ANY), ANY_ENTRY)
    every = AclBindingFilter(ResourcePatternFilter(TOPIC, None, ANY), ANY_ENTRY)
    targets = deletion_targets([(0, exact), (1, every)], known)
    assert targets == {
        ResourcePattern(TOPIC, "seen", LITERAL): [(1, every)],
        ResourcePattern(TOPIC, "unseen", LITERAL): [(0, exact), (1, every)],
        ResourcePattern(TOPIC, "unseen", PREFIXED): [(0, exact), (1, every)],
    }

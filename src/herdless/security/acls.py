"""Kafka's ACLs as values: what an ACL names (a resource pattern) and what it grants or
refuses (an access control entry), and the filters DescribeAcls and DeleteAcls match
them with. The codes are Kafka's wire codes; the names, Kafka's (KIP-290 for pattern
types, org.apache.kafka.common.acl and .resource for the rest).

Filters follow Kafka's matching rules: null (None) matches anything, ANY matches any
value, and a MATCH pattern filter matches every pattern that would apply to the named
resource (the literal name, the literal wildcard `*`, and every prefix of it).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Self

from herdless.security.principal import parse_principal

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
# The one principal wildcard Kafka knows: every user.
WILDCARD_PRINCIPAL = "User:*"
# The only name the CLUSTER resource has.
CLUSTER_NAME = "kafka-cluster"


class _KafkaEnum(enum.IntEnum):
    @property
    def kafka_name(self) -> str:
        """Kafka's PascalCase name (SecurityUtils.toPascalCase): TransactionalId,
        IdempotentWrite, Allow; as ZooKeeper paths, znode JSON and tools write them."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def parse(cls, text: str) -> Self:
        """A member by any spelling of its name Kafka's tools take (Read, READ, read,
        IdempotentWrite, idempotent-write); ValueError lists the names."""
        key = text.strip().replace("-", "").replace("_", "").upper()
        for member in cls:
            if member.name.replace("_", "") == key:
                return member
        known = ", ".join(m.kafka_name for m in cls if m.name not in ("UNKNOWN",))
        raise ValueError(f"no {cls.__name__} {text!r}; known: {known}")

    @classmethod
    def from_code(cls, code: int) -> Self:
        """The member with this wire code; UNKNOWN for a code Kafka has none for."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def specific(self) -> bool:
        """A pattern an ACL can have (the others are only for filters)."""
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The resource types an ACL may name (Kafka's AclEntry.ResourceTypes).
CONCRETE_RESOURCE_TYPES = tuple(
    t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)
)

# What each resource type is checked for (Kafka's AclEntry.supportedOperations); ALL
# covers each. kafka-acls.sh refuses an ACL for another operation; the broker keeps it.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}


class InvalidAcl(ValueError):
    """An ACL or filter Kafka refuses with INVALID_REQUEST; the message says why."""


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"{self.resource_type.kafka_name}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    # As written: `Type:name` (User:alice, User:*).
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"{self.principal} has {self.permission_type.kafka_name} permission for"
            f" operations: {self.operation.kafka_name} from hosts: {self.host}"
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if (
            self.resource_type is not ResourceType.ANY
            and self.resource_type != pattern.resource_type
        ):
            return False
        if (
            self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
            and self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that would apply to the resource named.
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)

    def indefinite_field(self) -> str | None:
        """What keeps this filter from naming one pattern exactly, if anything."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return f"Resource type is {self.resource_type.name}."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type in (PatternType.MATCH, PatternType.UNKNOWN):
            return f"Resource pattern type is {self.pattern_type.name}."
        return None

    def exact_patterns(self) -> list[ResourcePattern]:
        """The patterns a filter that names at most one resource can match, whether or
        not they hold ACLs (Kafka's filterToResources); [] for any other filter."""
        if self.indefinite_field() is not None:
            return []
        assert self.name is not None
        types = (
            (PatternType.LITERAL, PatternType.PREFIXED)
            if self.pattern_type is PatternType.ANY
            else (self.pattern_type,)
        )
        return [ResourcePattern(self.resource_type, self.name, t) for t in types]


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is AclOperation.ANY or self.operation == entry.operation)
            and (
                self.permission_type is AclPermissionType.ANY
                or self.permission_type == entry.permission_type
            )
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)


ANY_PATTERN = ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY)
ANY_ENTRY = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)
ANY_BINDING = AclBindingFilter(ANY_PATTERN, ANY_ENTRY)


def check_binding(binding: AclBinding) -> None:
    """What Kafka refuses in a CreateAcls creation, as InvalidAcl."""
    pattern, entry = binding.pattern, binding.entry
    unknown = (
        pattern.resource_type is ResourceType.UNKNOWN
        or pattern.pattern_type is PatternType.UNKNOWN
        or entry.operation is AclOperation.UNKNOWN
        or entry.permission_type is AclPermissionType.UNKNOWN
    )
    if unknown:
        raise InvalidAcl("ACL binding contains unknown elements")
    if pattern.resource_type is ResourceType.ANY:
        raise InvalidAcl("resourceType must not be ANY")
    if not pattern.pattern_type.specific:
        raise InvalidAcl(f"patternType must not be {pattern.pattern_type.name}")
    if entry.operation is AclOperation.ANY:
        raise InvalidAcl("operation must not be ANY")
    if entry.permission_type is AclPermissionType.ANY:
        raise InvalidAcl("permissionType must not be ANY")
    if not pattern.name:
        raise InvalidAcl("Invalid empty resource name")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    # Each pattern is a znode named by the resource name (in ZooKeeper as Kafka keeps
    # them): a name ZooKeeper cannot take as one path element is refused everywhere.
    if "/" in pattern.name or "\x00" in pattern.name or pattern.name in (".", ".."):
        raise InvalidAcl(f"ACL binding contains invalid resource name: {pattern.name}")
    try:
        parse_principal(entry.principal)
    except ValueError as exc:
        raise InvalidAcl(str(exc)) from None
    if not entry.host:
        raise InvalidAcl("an ACL's host must not be empty ('*' is every host)")


def check_filter(binding_filter: AclBindingFilter) -> None:
    """What Kafka refuses in a DescribeAcls or DeleteAcls filter: UNKNOWN anywhere."""
    unknown = (
        binding_filter.pattern.resource_type is ResourceType.UNKNOWN
        or binding_filter.pattern.pattern_type is PatternType.UNKNOWN
        or binding_filter.entry.operation is AclOperation.UNKNOWN
        or binding_filter.entry.permission_type is AclPermissionType.UNKNOWN
    )
    if unknown:
        raise InvalidAcl(f"the filter contains UNKNOWN elements: {binding_filter}")


def by_pattern(
    bindings: Iterable[tuple[int, AclBinding]],
) -> dict[ResourcePattern, list[tuple[int, AccessControlEntry]]]:
    """Creations grouped by the pattern they add to, each with its index in the request:
    each pattern is then written once (one znode update per resource, as Kafka)."""
    grouped: dict[ResourcePattern, list[tuple[int, AccessControlEntry]]] = {}
    for index, binding in bindings:
        grouped.setdefault(binding.pattern, []).append((index, binding.entry))
    return grouped


def deletion_targets(
    filters: Sequence[tuple[int, AclBindingFilter]], known: Iterable[ResourcePattern]
) -> dict[ResourcePattern, list[tuple[int, AclBindingFilter]]]:
    """Which patterns DeleteAcls filters (each with its index in the request) may remove
    ACLs from, with the filters that match each: every pattern known to hold ACLs, and
    the exact patterns of filters naming one resource (so that ACLs another broker wrote
    and this one has not seen yet are deleted too, as Kafka's authorizer does)."""
    candidates = dict.fromkeys(known)
    for _, binding_filter in filters:
        candidates.update(dict.fromkeys(binding_filter.pattern.exact_patterns()))
    targets: dict[ResourcePattern, list[tuple[int, AclBindingFilter]]] = {}
    for pattern in candidates:
        matching = [(i, f) for i, f in filters if f.pattern.matches(pattern)]
        if matching:
            targets[pattern] = matching
    return targets


def first_matching(
    entry: AccessControlEntry, filters: Sequence[tuple[int, AclBindingFilter]]
) -> int | None:
    """The index of the first filter whose entry part matches `entry`, if one does: the
    filter a deleted ACL is reported under."""
    for index, binding_filter in filters:
        if binding_filter.entry.matches(entry):
            return index
    return None

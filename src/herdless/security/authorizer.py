"""The ACL authorizer's decisions, with Kafka's AclAuthorizer semantics.

A request is allowed when
- its principal is a super user (`super.users`), or
- no ACL at all applies to the resource (none on its literal name, on the literal
  wildcard `*`, or on a prefix of its name, whoever they name) and
  `allow.everyone.if.no.acl.found` is true, or
- no DENY ACL for the operation (or ALL) matches the principal (or User:*) and host (or
  `*`), and an ALLOW ACL does, for the operation, ALL, or one implying it: READ, WRITE,
  DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS.

DENY beats ALLOW wherever they come from: a DENY on a prefix or on `*` refuses what an
ALLOW on the literal name grants. Implication only grants: a DENY of READ does not deny
DESCRIBE.

The ACLs are held in memory, indexed for a lookup per request: by resource type and
name for literal patterns, and for prefixed ones by name under the set of prefix
lengths in use, so that finding the prefixes of a name costs one dictionary lookup per
distinct length rather than a scan of every prefix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from herdless.protocol.config_values import parse_boolean
from herdless.security.acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from herdless.security.principal import KafkaPrincipal, parse_principal
from herdless.security.settings import SecuritySettings

# `authorizer.class.name` values that turn the ACL authorizer on: Kafka's ZooKeeper-era
# and KRaft authorizers, whose semantics are the same, and herdless's short name.
AUTHORIZER_CLASSES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # herdless's own name for it, for a command line: --set authorizer.class.name=acls
        "acls",
    }
)

# What allowing each operation also allows (Kafka's AclAuthorizer.authorizeAction).
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.ALL,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.ALL}
    ),
}

Entries = frozenset[AccessControlEntry]
_NONE: Entries = frozenset()


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    super_users: frozenset[KafkaPrincipal] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def authorizer_settings(settings: SecuritySettings) -> AuthorizerSettings | None:
    """The authorizer the broker's settings ask for; None when `authorizer.class.name`
    is unset or empty (everything is allowed). ValueError names a bad setting."""
    class_name = settings.get("authorizer.class.name") or ""
    if not class_name:
        return None
    if class_name not in AUTHORIZER_CLASSES:
        known = ", ".join(sorted(AUTHORIZER_CLASSES))
        raise ValueError(f"authorizer.class.name: no authorizer {class_name!r}; known: {known}")
    super_users = set()
    for text in (settings.get("super.users") or "").split(";"):
        if text.strip():
            try:
                super_users.add(parse_principal(text))
            except ValueError as exc:
                raise ValueError(f"super.users: {exc}") from None
    allow = settings.get("allow.everyone.if.no.acl.found") or "false"
    return AuthorizerSettings(
        frozenset(super_users), parse_boolean("allow.everyone.if.no.acl.found", allow)
    )


class AclCache:
    """Every ACL the broker knows, by resource pattern, indexed for decisions."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._literal: dict[ResourceType, dict[str, Entries]] = {}
        self._prefixed: dict[ResourceType, dict[str, Entries]] = {}
        # How many prefixed patterns of each type have each name length; the lengths
        # in use, longest first, are where a name's prefixes can be.
        self._lengths: dict[ResourceType, Counter[int]] = {}
        self._length_order: dict[ResourceType, tuple[int, ...]] = {}

    def get(self, pattern: ResourcePattern) -> Entries:
        return (
            self._table(pattern.pattern_type)
            .get(pattern.resource_type, {})
            .get(pattern.name, _NONE)
        )

    def put(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Make `entries` the pattern's ACLs; none removes the pattern."""
        entries = frozenset(entries)
        by_name = self._table(pattern.pattern_type).setdefault(pattern.resource_type, {})
        had = pattern.name in by_name
        if entries:
            by_name[pattern.name] = entries
        else:
            by_name.pop(pattern.name, None)
        if pattern.pattern_type is PatternType.PREFIXED and had != bool(entries):
            lengths = self._lengths.setdefault(pattern.resource_type, Counter())
            lengths[len(pattern.name)] += 1 if entries else -1
            self._length_order[pattern.resource_type] = tuple(
                sorted((n for n, count in lengths.items() if count > 0), reverse=True)
            )

    def replace_all(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        self._clear()
        for pattern, entries in acls.items():
            self.put(pattern, entries)

    def patterns(self) -> list[ResourcePattern]:
        return [
            ResourcePattern(resource_type, name, pattern_type)
            for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
            for resource_type, by_name in self._table(pattern_type).items()
            for name in by_name
        ]

    def bindings(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs that match a DescribeAcls or DeleteAcls filter."""
        found = []
        for pattern in self.patterns():
            if binding_filter.pattern.matches(pattern):
                for entry in self.get(pattern):
                    if binding_filter.entry.matches(entry):
                        found.append(AclBinding(pattern, entry))
        return found

    def of_type(
        self, resource_type: ResourceType, pattern_type: PatternType
    ) -> Mapping[str, Entries]:
        return self._table(pattern_type).get(resource_type, {})

    def applying_to(self, resource_type: ResourceType, name: str) -> list[Entries]:
        """The ACLs of every pattern that applies to a resource: its literal name, the
        literal wildcard, and each prefix of its name."""
        found = []
        literal = self._literal.get(resource_type)
        if literal:
            entries = literal.get(name)
            if entries:
                found.append(entries)
            if name != WILDCARD_RESOURCE:
                entries = literal.get(WILDCARD_RESOURCE)
                if entries:
                    found.append(entries)
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            size = len(name)
            for length in self._length_order[resource_type]:
                if length <= size:
                    entries = prefixed.get(name[:length])
                    if entries:
                        found.append(entries)
        return found

    def has_type(self, resource_type: ResourceType) -> bool:
        return bool(self._literal.get(resource_type) or self._prefixed.get(resource_type))

    def _table(self, pattern_type: PatternType) -> dict[ResourceType, dict[str, Entries]]:
        if pattern_type is PatternType.LITERAL:
            return self._literal
        if pattern_type is PatternType.PREFIXED:
            return self._prefixed
        raise ValueError(f"an ACL's pattern is LITERAL or PREFIXED, not {pattern_type.name}")


class Authorizer:
    """Decisions from the ACLs in an AclCache (kept current by its owner) and the
    authorizer's settings. Pure and quick: call it for every request."""

    def __init__(self, settings: AuthorizerSettings, cache: AclCache | None = None) -> None:
        self.settings = settings
        self.cache = cache if cache is not None else AclCache()

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return principal in self.settings.super_users

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """May `principal`, connected from `host`, do `operation` on the resource?"""
        return self.checker(principal, host, operation, resource_type)(name)

    def checker(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> Callable[[str], bool]:
        """authorize() for one principal, host, operation and resource type, for many
        names (Metadata's topics): what does not depend on the name is decided once."""
        if self.is_super_user(principal):
            return _always
        allow_everyone = self.settings.allow_everyone_if_no_acl_found
        cache = self.cache
        if not cache.has_type(resource_type):
            return _always if allow_everyone else _never
        principals = frozenset({str(principal), WILDCARD_PRINCIPAL})
        hosts = frozenset({host, WILDCARD_HOST})
        denied_by = frozenset({operation, AclOperation.ALL})
        allowed_by = _IMPLIED_BY.get(operation, denied_by)
        deny, allow = AclPermissionType.DENY, AclPermissionType.ALLOW

        def decide(name: str) -> bool:
            applying = cache.applying_to(resource_type, name)
            if not applying:
                return allow_everyone
            allowed = False
            for entries in applying:
                for entry in entries:
                    if entry.principal not in principals or entry.host not in hosts:
                        continue
                    if entry.permission_type is deny:
                        if entry.operation in denied_by:
                            return False
                    elif entry.permission_type is allow and entry.operation in allowed_by:
                        allowed = True
            return allowed

        return decide

    def authorized_names(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
    ) -> list[str]:
        """The names among `names` the principal may do `operation` on, in their order."""
        allowed = self.checker(principal, host, operation, resource_type)
        return [name for name in names if allowed(name)]

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """May the principal do `operation` on at least one resource of the type, as
        Kafka's authorizeByResourceType decides (InitProducerId without a transactional
        id asks it of WRITE on topics): an ALLOW for the operation or ALL, on a literal
        name or a prefix that no DENY covers. Implied operations do not count here.

        Scans the patterns of the type: for the few requests that ask it, not per topic.
        """
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"a concrete resource type, not {resource_type.name}")
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"a concrete operation, not {operation.name}")
        if self.is_super_user(principal):
            return True
        principals = frozenset({str(principal), WILDCARD_PRINCIPAL})
        hosts = frozenset({host, WILDCARD_HOST})
        operations = frozenset({operation, AclOperation.ALL})

        def names(pattern_type: PatternType, permission: AclPermissionType) -> set[str]:
            return {
                name
                for name, entries in self.cache.of_type(resource_type, pattern_type).items()
                if any(
                    e.permission_type is permission
                    and e.principal in principals
                    and e.host in hosts
                    and e.operation in operations
                    for e in entries
                )
            }

        deny_literals = names(PatternType.LITERAL, AclPermissionType.DENY)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.settings.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(PatternType.PREFIXED, AclPermissionType.DENY)
        allow_literals = names(PatternType.LITERAL, AclPermissionType.ALLOW)
        allow_prefixes = names(PatternType.PREFIXED, AclPermissionType.ALLOW)

        def dominated(name: str) -> bool:
            return any(name[:length] in deny_prefixes for length in range(1, len(name) + 1))

        return any(not dominated(prefix) for prefix in allow_prefixes) or any(
            literal == WILDCARD_RESOURCE
            or (literal not in deny_literals and not dominated(literal))
            for literal in allow_literals
        )


def _always(_name: str) -> bool:
    return True


def _never(_name: str) -> bool:
    return False

"""Where Kafka 3.x keeps ACLs in ZooKeeper and what its znodes hold (ZkData.scala's
ZkAclStore, ResourceZNode, ZkAclChangeStore). Pure: paths and bytes, as layout.py.

- LITERAL patterns: `/kafka-acl/<ResourceType>/<name>`; PREFIXED ones:
  `/kafka-acl-extended/prefixed/<ResourceType>/<name>`. Each holds
  `{"version":1,"acls":[{"principal":..,"permissionType":..,"operation":..,"host":..}]}`
  with Kafka's PascalCase names (Allow, DescribeConfigs); the resource type in the path
  is PascalCase too (Topic, TransactionalId).
- A change to a pattern's ACLs is announced by a persistent sequential znode
  `acl_changes_<seq>`: under `/kafka-acl-changes` for a literal pattern, holding
  `TOPIC:name` (Java's ResourceType.toString, then the name), and under
  `/kafka-acl-extended-changes` for a prefixed one, holding
  `{"version":1,"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"}`.
  Every broker watches both and re-reads the pattern a notification names; any broker
  deletes notifications older than 15 minutes.
"""

from __future__ import annotations

import json
from contextlib import suppress
from typing import Any

from herdless.cluster.errors import MalformedZNode
from herdless.security.acls import (
    CONCRETE_RESOURCE_TYPES,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

LITERAL_ACLS_PATH = "/kafka-acl"
EXTENDED_ACLS_PATH = "/kafka-acl-extended"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_PATHS = (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH)
# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
ACLS_VERSION = 1
CHANGE_EVENT_VERSION = 1
STORED_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)


def acls_root(pattern_type: PatternType) -> str:
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACLS_PATH
    if pattern_type is PatternType.PREFIXED:
        return f"{EXTENDED_ACLS_PATH}/{pattern_type.name.lower()}"
    raise ValueError(f"no ACLs are stored for pattern type {pattern_type.name}")


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{acls_root(pattern_type)}/{resource_type.kafka_name}"


def resource_path(pattern: ResourcePattern) -> str:
    return f"{resource_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def changes_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES_PATH if pattern_type is PatternType.LITERAL else EXTENDED_CHANGES_PATH


def paths_to_create() -> list[str]:
    """What Kafka's createAclPaths creates: each store's root and a znode per resource
    type under it, and the two change paths."""
    paths = []
    for pattern_type in STORED_PATTERN_TYPES:
        paths.append(acls_root(pattern_type))
        paths.extend(resource_type_path(pattern_type, t) for t in CONCRETE_RESOURCE_TYPES)
    paths.extend(CHANGE_PATHS)
    return paths


def resource_type_of_path_name(name: str) -> ResourceType | None:
    """The resource type a child of an ACL store's root names; None for one Kafka would
    ignore (it logs "Ignoring unknown ResourceType")."""
    for resource_type in CONCRETE_RESOURCE_TYPES:
        if name in (resource_type.kafka_name, resource_type.name):
            return resource_type
    return None


def change_sequence(name: str) -> int | None:
    """The sequence number of a change notification's znode name."""
    digits = name.removeprefix(CHANGE_PREFIX)
    if digits == name or not digits.isdigit():
        return None
    return int(digits)


# -- encoding --------------------------------------------------------------------------


def encode_acls(entries: frozenset[AccessControlEntry]) -> bytes:
    ordered = sorted(entries, key=lambda e: (e.principal, e.permission_type, e.operation, e.host))
    return _json(
        {
            "version": ACLS_VERSION,
            "acls": [
                {
                    "principal": e.principal,
                    "permissionType": e.permission_type.kafka_name,
                    "operation": e.operation.kafka_name,
                    "host": e.host,
                }
                for e in ordered
            ],
        }
    )


def decode_acls(pattern: ResourcePattern, data: bytes | None) -> frozenset[AccessControlEntry]:
    """A pattern's ACLs; none for a znode without data (as Kafka's AclEntry.fromBytes)."""
    path = resource_path(pattern)
    if not data:
        return frozenset()
    fields = _object(path, data)
    if fields.get("version") != ACLS_VERSION:
        raise MalformedZNode(path, f"unsupported ACL version {fields.get('version')!r}")
    acls = fields.get("acls")
    if not isinstance(acls, list):
        raise MalformedZNode(path, f"acls is not a list: {acls!r}")
    entries = set()
    for item in acls:
        if not isinstance(item, dict):
            raise MalformedZNode(path, f"an ACL is not an object: {item!r}")
        try:
            entries.add(
                AccessControlEntry(
                    _text(item, "principal"),
                    _text(item, "host"),
                    AclOperation.parse(_text(item, "operation")),
                    AclPermissionType.parse(_text(item, "permissionType")),
                )
            )
        except (KeyError, ValueError) as exc:
            raise MalformedZNode(path, f"bad ACL {item!r}: {exc}") from None
    return frozenset(entries)


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return _json(
        {
            "version": CHANGE_EVENT_VERSION,
            "resourceType": pattern.resource_type.name,
            "name": pattern.name,
            "patternType": pattern.pattern_type.name,
        }
    )


def decode_change(changes_root: str, name: str, data: bytes | None) -> ResourcePattern:
    """The pattern a change notification names. MalformedZNode if it names none."""
    path = f"{changes_root}/{name}"
    if changes_root == LITERAL_CHANGES_PATH:
        try:
            text = (data or b"").decode()
        except UnicodeDecodeError:
            raise MalformedZNode(path, f"not UTF-8: {data!r}") from None
        type_name, sep, resource_name = text.partition(":")
        resource_type = ResourceType.UNKNOWN
        if sep:
            with suppress(ValueError):
                resource_type = ResourceType.parse(type_name)
        if resource_type not in CONCRETE_RESOURCE_TYPES:
            raise MalformedZNode(path, f"expected ResourceType:name, got {text!r}")
        return ResourcePattern(resource_type, resource_name, PatternType.LITERAL)
    fields = _object(path, data)
    version = fields.get("version")
    if not isinstance(version, int) or version > CHANGE_EVENT_VERSION:
        raise MalformedZNode(path, f"unsupported ACL change event version {version!r}")
    try:
        resource_type = ResourceType[_text(fields, "resourceType").upper()]
        pattern_type = PatternType[_text(fields, "patternType")]
        resource_name = _text(fields, "name")
    except (KeyError, ValueError) as exc:
        raise MalformedZNode(path, f"not an ACL change event ({exc}): {data!r}") from None
    if resource_type not in CONCRETE_RESOURCE_TYPES or not pattern_type.specific:
        raise MalformedZNode(path, f"names no stored pattern: {data!r}")
    return ResourcePattern(resource_type, resource_name, pattern_type)


def _json(value: dict[str, Any]) -> bytes:
    # Jackson's output, as layout.py writes it.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _object(path: str, data: bytes | None) -> dict[str, Any]:
    try:
        value = json.loads(data or b"")
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedZNode(path, f"not JSON ({exc}): {(data or b'')[:200]!r}") from None
    if not isinstance(value, dict):
        raise MalformedZNode(path, f"not a JSON object: {(data or b'')[:200]!r}")
    return value


def _text(fields: dict[str, Any], key: str) -> str:
    value = fields[key]
    if not isinstance(value, str):
        raise ValueError(f"{key} is not a string: {value!r}")
    return value

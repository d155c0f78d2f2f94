"""Checks a decoded request against its message schema before any handler sees it.

kafka-python's decoder reads a length of -1 as null whatever the schema says, so a
null group id or a null partition array reaches the handlers, which trust the
schema and fail deep inside. Kafka refuses such a request while parsing it; here
the same rule is applied once, generically, from the schema's nullableVersions. The
decoders written per version (schema_codec.py) find the first such null while they
read, in the same order and with the same path; this serves the other APIs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_message import ApiMessage


@dataclass(frozen=True, slots=True)
class _FieldRule:
    name: str
    nullable: bool
    # Rules for each element of an array of structs, or for a nested struct.
    inner: tuple[_FieldRule, ...] | None
    is_array: bool
    # A primitive array's elements (strings, ints): never null in any schema.
    elements_not_null: bool


def _rules(struct: Any, version: int) -> tuple[_FieldRule, ...]:
    rules = []
    for field in struct._fields:
        # The decoder reads the all-zero UUID, Kafka's "no id", as None.
        if not field.for_version_q(version) or field.type_str == "uuid":
            continue
        inner = None
        if field.is_struct_array() or field.is_struct():
            inner = _rules(field, version)
        rules.append(
            _FieldRule(
                name=field.name,
                # A tagged field may be left out, which decodes as None.
                nullable=field.nullable_for_version_q(version) or field.tagged_field_q(version),
                inner=inner or None,
                is_array=field.is_array(),
                elements_not_null=field.is_array() and not field.is_struct_array(),
            )
        )
    return tuple(rules)


@functools.cache
def _message_rules(cls: type[ApiMessage], version: int) -> tuple[_FieldRule, ...]:
    return _rules(cls._struct, version)


def null_violation(body: ApiMessage, version: int) -> str | None:
    """The path of the first field that is null where this version forbids it, if any."""
    return _check(body, _message_rules(type(body)[None], version), "")


def _check(data: Any, rules: tuple[_FieldRule, ...], prefix: str) -> str | None:
    for rule in rules:
        value = getattr(data, rule.name, None)
        path = prefix + rule.name
        if value is None:
            if not rule.nullable:
                return path
            continue
        if rule.is_array:
            for index, element in enumerate(value):
                if element is None:
                    if rule.elements_not_null or rule.inner is not None:
                        return f"{path}[{index}]"
                elif rule.inner is not None:
                    found = _check(element, rule.inner, f"{path}[{index}].")
                    if found is not None:
                        return found
        elif rule.inner is not None:
            found = _check(value, rule.inner, path + ".")
            if found is not None:
                return found
    return None

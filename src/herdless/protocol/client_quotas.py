"""Client quota entities and quotas as Kafka names them and keeps them (KIP-55, KIP-546).

An entity is a user, a client id, or a user's client id (KIP-55); either part may be
the default, `<default>` in ZooKeeper and null on the wire. Its quotas are the config
at /config/users/<user>, /config/users/<user>/clients/<client-id> or
/config/clients/<client-id>, names sanitized as Kafka's Sanitizer writes them. Which
entity's quota applies to a client is the broker's (broker/quotas/precedence.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from herdless.protocol.sanitizer import desanitize, sanitize

USER = "user"
CLIENT_ID = "client-id"
# Kafka's ConfigEntityName.DEFAULT: the default entity's znode name.
DEFAULT_NAME = "<default>"


class QuotaType(Enum):
    """Each quota, as its config key; what it limits is in the docstring of QuotaKind."""

    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"
    CONTROLLER_MUTATION = "controller_mutation_rate"


# Kafka's config types (QuotaConfigs): byte rates are whole numbers.
WHOLE_NUMBER_QUOTAS = frozenset({QuotaType.PRODUCE.value, QuotaType.FETCH.value})
QUOTA_KEYS = frozenset(q.value for q in QuotaType)


class Default:
    """The default user or client id: the entity's part named by null on the wire."""

    _instance: Default | None = None

    def __new__(cls) -> Default:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return DEFAULT_NAME


DEFAULT = Default()
# A part of an entity: a name, the default, or None when the entity has no such part.
Part = str | Default | None


class InvalidEntity(ValueError):
    """An entity or filter Kafka answers INVALID_REQUEST for; the message is its own."""


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    user: Part = None
    client_id: Part = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise InvalidEntity("Invalid empty client quota entity")
        for kind, part in ((USER, self.user), (CLIENT_ID, self.client_id)):
            if part == "":
                raise InvalidEntity(f"Empty {kind} not supported")

    @property
    def path(self) -> str:
        """The config's path below /config, as change notifications name it."""
        if self.user is None:
            return f"clients/{_znode_name(self.client_id)}"
        user = f"users/{_znode_name(self.user)}"
        return user if self.client_id is None else f"{user}/clients/{_znode_name(self.client_id)}"

    @classmethod
    def from_path(cls, path: str) -> QuotaEntity:
        """The entity of a config path below /config; ValueError if it names none."""
        match path.split("/"):
            case ["users", user]:
                return cls(user=_part_of(user))
            case ["users", user, "clients", client_id]:
                return cls(user=_part_of(user), client_id=_part_of(client_id))
            case ["clients", client_id]:
                return cls(client_id=_part_of(client_id))
        raise ValueError(f"{path!r} is not the config path of a quota entity")

    @classmethod
    def from_wire(cls, components: list[tuple[str, str | None]]) -> QuotaEntity:
        """An entity from (entity type, name or null for the default) pairs."""
        parts: dict[str, Part] = {}
        for entity_type, name in components:
            if entity_type not in (USER, CLIENT_ID):
                raise InvalidEntity(f"Unhandled client quota entity type: {entity_type}")
            if entity_type in parts:
                raise InvalidEntity(f"Duplicate {entity_type} entity type")
            parts[entity_type] = DEFAULT if name is None else name
        return cls(user=parts.get(USER), client_id=parts.get(CLIENT_ID))

    def to_wire(self) -> list[tuple[str, str | None]]:
        return [
            (entity_type, None if part is DEFAULT else str(part))
            for entity_type, part in ((USER, self.user), (CLIENT_ID, self.client_id))
            if part is not None
        ]

    def describe(self) -> str:
        """As kafka-configs.sh names it: user-principal 'alice', client-id 'default'."""
        names = []
        for kind, part in (("user-principal", self.user), ("client-id", self.client_id)):
            if part is not None:
                names.append(f"{kind} {'default' if part is DEFAULT else repr(part)}")
        return ", ".join(names)


def _znode_name(part: Part) -> str:
    if part is DEFAULT:
        return DEFAULT_NAME
    assert isinstance(part, str)
    return sanitize(part)


def _part_of(name: str) -> Part:
    return DEFAULT if name == DEFAULT_NAME else desanitize(name)


def quota_value(key: str, value: float) -> str:
    """A quota as Kafka writes it into a config: byte rates as whole numbers.
    InvalidEntity (INVALID_REQUEST) for an unknown key or a value that cannot be one."""
    if key not in QUOTA_KEYS:
        raise InvalidEntity(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value < 0:
        raise InvalidEntity(f"Configuration {key} must be a non-negative number")
    if key in WHOLE_NUMBER_QUOTAS:
        whole = int(value + 1e-6)
        if abs(whole - value) > 1e-6:
            raise InvalidEntity(f"Configuration {key} must be a LONG value")
        return str(whole)
    return repr(float(value))


def quotas_of(config: Mapping[str, str]) -> dict[str, float]:
    """The quotas in an entity's config, leaving out its other settings (SCRAM credentials)
    and any value that is not a number."""
    found = {}
    for key in QUOTA_KEYS & config.keys():
        try:
            found[key] = float(config[key])
        except ValueError:
            continue
    return found

"""Which quota applies to a client: the first entity in Kafka's order of precedence
(KIP-55) that has the quota set, and whom the client shares its measured rate with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from herdless.protocol.client_quotas import DEFAULT, QuotaEntity

# (user part, client part): which parts of the client name the entity at each level.
# "named" is the client's own user or client id; DEFAULT the default; None: absent.
_NAMED = "named"
QUOTA_PRECEDENCE: tuple[tuple[object, object], ...] = (
    (_NAMED, _NAMED),  # /config/users/<user>/clients/<client-id>
    (_NAMED, DEFAULT),  # /config/users/<user>/clients/<default>
    (_NAMED, None),  # /config/users/<user>
    (DEFAULT, _NAMED),  # /config/users/<default>/clients/<client-id>
    (DEFAULT, DEFAULT),  # /config/users/<default>/clients/<default>
    (DEFAULT, None),  # /config/users/<default>
    (None, _NAMED),  # /config/clients/<client-id>
    (None, DEFAULT),  # /config/clients/<default>
)


@dataclass(frozen=True, slots=True)
class QuotaMatch:
    """The quota that applies to a client, and whom it is shared by: every client with the
    same `sensor` key is measured together, as Kafka's metric tags (user, client-id)."""

    bound: float
    entity: QuotaEntity
    sensor: tuple[str, str]


def applicable_quota(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str
) -> QuotaMatch | None:
    """The first quota `key` set in Kafka's order of precedence for this user and client
    id; None if none is. A quota on a user alone is shared by all the user's clients, one
    on a client id alone by that client id's users (Kafka's DefaultQuotaCallback)."""
    for user_part, client_part in QUOTA_PRECEDENCE:
        user_named = user if user_part is _NAMED else user_part
        client_named = client_id if client_part is _NAMED else client_part
        if user_named == "" or client_named == "":
            continue  # an empty name has no entity of its own
        entity = QuotaEntity(user_named, client_named)  # type: ignore[arg-type]
        bound = quotas.get(entity, {}).get(key)
        if bound is not None:
            sensor = (
                user if user_part is not None else "",
                client_id if client_part is not None else "",
            )
            return QuotaMatch(bound, entity, sensor)
    return None

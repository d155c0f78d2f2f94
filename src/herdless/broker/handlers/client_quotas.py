"""DescribeClientQuotas and AlterClientQuotas (KIP-546), with the checks and error codes of
Kafka's ZooKeeper-era brokers (ZkAdminManager): DESCRIBE_CONFIGS or ALTER_CONFIGS on the
cluster, INVALID_REQUEST for a bad entity, filter or key, each entry of an alteration
answered on its own."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import REFUSALS, authorize_cluster
from herdless.cluster.errors import ClusterUnavailable, StateVersionConflict
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.client_quotas import (
    CLIENT_ID,
    DEFAULT,
    USER,
    InvalidEntity,
    QuotaEntity,
    quota_value,
)
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType
from herdless.storage import StorageError

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

IP = "ip"
# DescribeClientQuotas match types.
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class UnsupportedFilter(ValueError):
    """A filter on an entity type Kafka does not know: UNSUPPORTED_VERSION."""


def parse_filter(components: list[Any]) -> dict[str, tuple[int, str | None]] | None:
    """The filter's components by entity type, as (match type, name); None when it asks
    for ip quotas only (herdless keeps none). InvalidEntity or UnsupportedFilter."""
    found: dict[str, tuple[int, str | None]] = {}
    for component in components:
        entity_type = component.entity_type
        if entity_type == "":
            raise InvalidEntity("Unexpected empty filter component entity type")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise UnsupportedFilter(f"Custom entity type '{entity_type}' not supported")
        if entity_type in found:
            raise InvalidEntity(f"Duplicate {entity_type} filter component entity type")
        match_type, match = component.match_type, component.match
        if match_type == MATCH_EXACT and match is None:
            raise InvalidEntity(f"Filter component of {entity_type} matches a null name")
        if match_type in (MATCH_DEFAULT, MATCH_SPECIFIED) and match is not None:
            raise InvalidEntity(f"Filter component of {entity_type} has an unused match")
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise InvalidEntity(f"Unknown match type {match_type}")
        found[entity_type] = (match_type, match)
    if IP in found:
        if len(found) > 1:
            raise InvalidEntity(
                "Invalid entity filter component combination, IP filter component should not"
                " be used with user or clientId filter component."
            )
        return None
    return found


def matches(
    entity: QuotaEntity, components: dict[str, tuple[int, str | None]], strict: bool
) -> bool:
    for entity_type, part in ((USER, entity.user), (CLIENT_ID, entity.client_id)):
        component = components.get(entity_type)
        if component is None:
            if strict and part is not None:
                return False
            continue
        match_type, name = component
        if match_type == MATCH_EXACT and part != name:
            return False
        if match_type == MATCH_DEFAULT and part is not DEFAULT:
            return False
        if match_type == MATCH_SPECIFIED and part is None:
            return False
    return True


def _entity_data(cls: Any, entity: QuotaEntity) -> list[Any]:
    return [cls(entity_type=t, entity_name=name) for t, name in entity.to_wire()]


async def handle_describe_client_quotas(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DESCRIBE_CLIENT_QUOTAS)
    Entry = Response.EntryData

    def failed(code: ErrorCode, message: str) -> Any:
        return Response(throttle_time_ms=0, error_code=code, error_message=message, entries=None)

    if not authorize_cluster(context, request, AclOperation.DESCRIBE_CONFIGS):
        return failed(*REFUSALS[ResourceType.CLUSTER])
    body = request.body
    try:
        components = parse_filter(body.components)
    except InvalidEntity as exc:
        return failed(ErrorCode.INVALID_REQUEST, str(exc))
    except UnsupportedFilter as exc:
        return failed(ErrorCode.UNSUPPORTED_VERSION, str(exc))
    entries = []
    if components is not None and context.quotas is not None:
        quotas = context.quotas.quotas()
        for entity in sorted(quotas, key=lambda e: e.path):
            if matches(entity, components, body.strict):
                entries.append(
                    Entry(
                        entity=_entity_data(Entry.EntityData, entity),
                        values=[
                            Entry.ValueData(key=key, value=value)
                            for key, value in sorted(quotas[entity].items())
                        ],
                    )
                )
    return Response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries
    )


def _entity(entry: Any) -> QuotaEntity:
    components = [(e.entity_type, e.entity_name) for e in entry.entity]
    if any(entity_type == IP for entity_type, _ in components):
        raise InvalidEntity("herdless keeps no ip quotas (connection_creation_rate)")
    return QuotaEntity.from_wire(components)


def _change(ops: list[Any]) -> Any:
    """The change an entry's ops make to its entity's config; InvalidEntity for a bad op,
    raised when applied, before anything is written."""
    seen = [op.key for op in ops]
    duplicate = next((key for key in seen if seen.count(key) > 1), None)

    def change(config: dict[str, str]) -> dict[str, str]:
        if duplicate is not None:
            raise InvalidEntity(f"Duplicate quota key {duplicate}")
        changed = dict(config)
        for op in ops:
            if op.remove:
                changed.pop(op.key, None)
            else:
                changed[op.key] = quota_value(op.key, op.value)
        return changed

    return change


async def handle_alter_client_quotas(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.ALTER_CLIENT_QUOTAS)
    Entry = Response.EntryData
    body = request.body
    authorized = authorize_cluster(context, request, AclOperation.ALTER_CONFIGS)
    results = []
    for entry in body.entries:
        code, message = ErrorCode.NONE, None
        try:
            if not authorized:
                code, message = REFUSALS[ResourceType.CLUSTER]
            else:
                entity = _entity(entry)
                change = _change(entry.ops)
                store = context.quota_store
                if store is None:
                    raise ClusterUnavailable("this broker keeps no quotas")
                if body.validate_only:
                    change({})
                else:
                    await store.alter(entity.path, change)
                    log.info("client quotas of %s altered", entity.describe())
        except ValueError as exc:  # InvalidEntity, or a name ZooKeeper cannot hold
            code, message = ErrorCode.INVALID_REQUEST, str(exc)
        except (ClusterUnavailable, StateVersionConflict, StorageError, OSError) as exc:
            log.error("client quotas not altered: %s", exc)
            code, message = ErrorCode.UNKNOWN_SERVER_ERROR, f"not stored: {exc}"
        results.append(
            Entry(
                error_code=code,
                error_message=message,
                entity=[
                    Entry.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ],
            )
        )
    return Response(throttle_time_ms=0, entries=results)

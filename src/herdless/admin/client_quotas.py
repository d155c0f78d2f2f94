"""Client quotas as `herdless quotas` asks for them: DescribeClientQuotas and
AlterClientQuotas (KIP-546) at any broker, each answer's error in words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from herdless.admin.client import refused, send_to_any_broker
from herdless.protocol.client_quotas import QuotaEntity

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

# DescribeClientQuotas's match types.
_EXACT, _DEFAULT, _SPECIFIED = 0, 1, 2


def describe_quotas(
    admin: KafkaAdminClient, entity: QuotaEntity | None
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The quotas of `entity` alone (strict), or of every entity for None, by entity path.
    AdminError for a refusal."""
    from kafka.protocol.admin import DescribeClientQuotasRequest

    Component = DescribeClientQuotasRequest.ComponentData
    components = []
    if entity is not None:
        for entity_type, name in entity.to_wire():
            match_type = _DEFAULT if name is None else _EXACT
            components.append(Component(entity_type=entity_type, match_type=match_type, match=name))
    request = DescribeClientQuotasRequest(components=components, strict=entity is not None)
    response = send_to_any_broker(admin, request)
    refused(response, "describe quotas")
    found = []
    for entry in response.entries or []:
        described = QuotaEntity.from_wire([(e.entity_type, e.entity_name) for e in entry.entity])
        found.append((described, {v.key: v.value for v in entry.values}))
    found.sort(key=lambda item: item[0].path)
    return found


def alter_quotas(
    admin: KafkaAdminClient,
    entity: QuotaEntity,
    added: Mapping[str, float],
    deleted: list[str],
) -> None:
    """Set `added` and remove `deleted` quotas of one entity; AdminError for a refusal."""
    from kafka.protocol.admin import AlterClientQuotasRequest

    Entry = AlterClientQuotasRequest.EntryData
    ops = [Entry.OpData(key=k, value=float(v), remove=False) for k, v in added.items()]
    ops += [Entry.OpData(key=k, value=0.0, remove=True) for k in deleted]
    request = AlterClientQuotasRequest(
        entries=[
            Entry(
                entity=[
                    Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity.to_wire()
                ],
                ops=ops,
            )
        ],
        validate_only=False,
    )
    for entry in send_to_any_broker(admin, request).entries:
        refused(entry, f"alter the quotas of {entity.describe()}")

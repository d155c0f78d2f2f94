"""DescribeClientQuotas and AlterClientQuotas asked of one broker over a raw connection,
whose client id is tests.support.wire's."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

from tests.support.broker import BrokerProcess
from tests.support.wire import Wire


def alter(broker: BrokerProcess, entries: list[Any], validate_only: bool = False) -> list[Any]:
    """AlterClientQuotas of (entity as (type, name) pairs, {key: value, None to remove})
    entries: each entry's (error code, message)."""
    Entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest[1](
        entries=[
            Entry(
                entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=[Entry.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()],
            )
            for entity, ops in entries
        ],
        validate_only=validate_only,
    )
    wire = Wire(broker)
    try:
        response = wire.call(request, AlterClientQuotasResponse[1])
    finally:
        wire.close()
    return [(e.error_code, e.error_message) for e in response.entries]  # type: ignore[attr-defined]


def describe(
    broker: BrokerProcess, components: list[tuple[str, int, str | None]], strict: bool = False
) -> Any:
    Component = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest[1](
        components=[Component(entity_type=t, match_type=m, match=n) for t, m, n in components],
        strict=strict,
    )
    wire = Wire(broker)
    try:
        return wire.call(request, DescribeClientQuotasResponse[1])
    finally:
        wire.close()


def entities(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }

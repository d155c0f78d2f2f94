"""DescribeAcls, CreateAcls and DeleteAcls, as Kafka 3.x answers them (AclApis.scala).

The caller needs DESCRIBE (to describe) or ALTER (to create or delete) on the cluster,
else CLUSTER_AUTHORIZATION_FAILED; a broker without an authorizer answers
SECURITY_DISABLED. A creation or filter Kafka cannot take (UNKNOWN codes anywhere, ANY or
MATCH in a creation, a CLUSTER resource not named kafka-cluster) fails alone with
INVALID_REQUEST. Any broker of a cluster serves all three: the ACLs are in ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import REFUSALS, authorize_cluster
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import (
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
    check_filter,
)

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext


_NOT_CONFIGURED = "No Authorizer is configured on the broker"


def _refusal(
    context: BrokerContext, request: Request, operation: AclOperation
) -> tuple[ErrorCode, str] | None:
    """(error code, message) refusing the whole request, or None to go on."""
    if context.acls is None:
        return ErrorCode.SECURITY_DISABLED, _NOT_CONFIGURED
    if not authorize_cluster(context, request, operation):
        return REFUSALS[ResourceType.CLUSTER]
    return None


async def handle_describe_acls(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DESCRIBE_ACLS)
    refused = _refusal(context, request, AclOperation.DESCRIBE)
    if refused is not None:
        code, message = refused
        return Response(throttle_time_ms=0, error_code=code, error_message=message, resources=[])
    body = request.body
    binding_filter = _filter(body)
    try:
        check_filter(binding_filter)
    except InvalidAcl as exc:
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=str(exc),
            resources=[],
        )
    assert context.acls is not None
    found = context.acls.describe(binding_filter)
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        resources=_resources(Response.DescribeAclsResource, found),
    )


async def handle_create_acls(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.CREATE_ACLS)
    Result = Response.AclCreationResult
    creations = request.body.creations
    refused = _refusal(context, request, AclOperation.ALTER)
    if refused is not None:
        code, message = refused
        return Response(
            throttle_time_ms=0,
            results=[Result(error_code=code, error_message=message) for _ in creations],
        )
    assert context.acls is not None
    bindings = [
        AclBinding(
            ResourcePattern(
                ResourceType.from_code(c.resource_type),
                c.resource_name,
                PatternType.from_code(c.resource_pattern_type),
            ),
            AccessControlEntry(
                c.principal,
                c.host,
                AclOperation.from_code(c.operation),
                AclPermissionType.from_code(c.permission_type),
            ),
        )
        for c in creations
    ]
    failures = await context.acls.create(bindings)
    return Response(
        throttle_time_ms=0,
        results=[
            Result(error_code=ErrorCode.NONE, error_message=None)
            if failure is None
            else Result(error_code=failure.error_code, error_message=failure.message)
            for failure in failures
        ],
    )


async def handle_delete_acls(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DELETE_ACLS)
    Result = Response.DeleteAclsFilterResult
    Matching = Result.DeleteAclsMatchingAcl
    filters = request.body.filters
    refused = _refusal(context, request, AclOperation.ALTER)
    if refused is not None:
        code, message = refused
        return Response(
            throttle_time_ms=0,
            filter_results=[
                Result(error_code=code, error_message=message, matching_acls=[]) for _ in filters
            ],
        )
    assert context.acls is not None
    results = await context.acls.delete([_filter(f) for f in filters])
    answer = []
    for result in results:
        failure = result.failure
        answer.append(
            Result(
                error_code=ErrorCode.NONE if failure is None else failure.error_code,
                error_message=None if failure is None else failure.message,
                matching_acls=[
                    Matching(
                        error_code=ErrorCode.NONE if d.failure is None else d.failure.error_code,
                        error_message=None if d.failure is None else d.failure.message,
                        **_binding_fields(d.binding),
                    )
                    for d in result.deleted
                ],
            )
        )
    return Response(throttle_time_ms=0, filter_results=answer)


def _filter(body: Any) -> AclBindingFilter:
    """A DescribeAcls request's filter, or one of DeleteAcls's (the same fields)."""
    return AclBindingFilter(
        ResourcePatternFilter(
            ResourceType.from_code(body.resource_type_filter),
            body.resource_name_filter,
            PatternType.from_code(body.pattern_type_filter),
        ),
        AccessControlEntryFilter(
            body.principal_filter,
            body.host_filter,
            AclOperation.from_code(body.operation),
            AclPermissionType.from_code(body.permission_type),
        ),
    )


def _binding_fields(binding: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": int(binding.pattern.resource_type),
        "resource_name": binding.pattern.name,
        "pattern_type": int(binding.pattern.pattern_type),
        "principal": binding.entry.principal,
        "host": binding.entry.host,
        "operation": int(binding.entry.operation),
        "permission_type": int(binding.entry.permission_type),
    }


def _resources(Resource: Any, bindings: Iterable[AclBinding]) -> list[Any]:
    """DescribeAcls's answer: the bindings grouped by pattern."""
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    Description = Resource.AclDescription
    return [
        Resource(
            resource_type=int(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=int(pattern.pattern_type),
            acls=[
                Description(
                    principal=e.principal,
                    host=e.host,
                    operation=int(e.operation),
                    permission_type=int(e.permission_type),
                )
                for e in entries
            ],
        )
        for pattern, entries in grouped.items()
    ]

"""What a request's caller may do, asked of the authorizer as Kafka's KafkaApis asks it
(AuthHelper): one decision, the names of many resources allowed, the operations allowed
on a resource (the authorized-operations bit fields), and whether any resource of a type
allows an operation. Every decision a request depends on is logged and counted here.

Without an authorizer (`context.acls` is None) everything is allowed and nothing is
logged. Handlers on the hot paths (Produce, Fetch, Heartbeat, OffsetCommit) test
`context.acls` themselves before calling in, so that a broker without one pays nothing
more than that test; with one, names are decided through the authorizer's checker, which
does what does not depend on the name once per request.

The caller is the request's session (principal and client address); a request built
without a connection has none and is User:ANONYMOUS from the request's client host.

Each decision goes to the broker's AuthorizerAudit (broker/auth/authorizer_audit.py), which
logs it as Kafka's kafka.authorizer.logger does and counts it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from herdless.protocol.codec import Request
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from herdless.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

# What Kafka answers when a resource of each type is refused, with its default message.
REFUSALS: dict[ResourceType, tuple[ErrorCode, str]] = {
    ResourceType.TOPIC: (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
    ResourceType.GROUP: (ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."),
    ResourceType.CLUSTER: (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        "Cluster authorization failed.",
    ),
    ResourceType.TRANSACTIONAL_ID: (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "Transactional Id authorization failed.",
    ),
}


def caller(request: Request) -> tuple[KafkaPrincipal, str]:
    """Who sent the request and from which address: its connection's session, or
    User:ANONYMOUS from the request's client host where it came without one."""
    session = request.session
    if session is None:
        return ANONYMOUS, request.client_host.lstrip("/")
    return session.principal, session.client_address


def authorize(
    context: BrokerContext,
    request: Request,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    *,
    log_denied: bool = True,
) -> bool:
    """May the caller do `operation` on the resource (Kafka's authorize)? `log_denied`
    False where a refusal is no attempt at the resource (a filter, a fallback)."""
    acls = context.acls
    if acls is None:
        return True
    principal, host = caller(request)
    allowed = acls.authorizer.authorize(principal, host, operation, resource_type, name)
    context.authorizer_audit.decided(
        request, principal, host, operation, resource_type, name, allowed, log_denied=log_denied
    )
    return allowed


def authorize_cluster(
    context: BrokerContext, request: Request, operation: AclOperation, *, log_denied: bool = True
) -> bool:
    return authorize(
        context, request, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied
    )


def authorized_names(
    context: BrokerContext,
    request: Request,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
    *,
    log_denied: bool = True,
) -> set[str]:
    """The names among `names` the caller may do `operation` on (Kafka's
    filterByAuthorized): each distinct name decided, logged and counted once."""
    acls = context.acls
    if acls is None:
        return set(names)
    principal, host = caller(request)
    allowed = acls.authorizer.checker(principal, host, operation, resource_type)
    audit = context.authorizer_audit
    found = set()
    for name, count in Counter(names).items():
        decision = allowed(name)
        audit.decided(
            request,
            principal,
            host,
            operation,
            resource_type,
            name,
            decision,
            count,
            log_denied=log_denied,
        )
        if decision:
            found.add(name)
    return found


def authorize_by_resource_type(
    context: BrokerContext,
    request: Request,
    operation: AclOperation,
    resource_type: ResourceType,
) -> bool:
    """May the caller do `operation` on some resource of the type (Kafka's
    authorizeByResourceType: InitProducerId's WRITE on any topic)?"""
    acls = context.acls
    if acls is None:
        return True
    principal, host = caller(request)
    allowed = acls.authorizer.authorize_by_resource_type(principal, host, operation, resource_type)
    # Logged as Kafka logs it: of no resource in particular.
    context.authorizer_audit.decided(
        request, principal, host, operation, resource_type, "NONE", allowed, pattern="UNKNOWN"
    )
    return allowed


def authorized_operations(
    context: BrokerContext, request: Request, resource_type: ResourceType, name: str
) -> set[int]:
    """The operations the caller may do on the resource, as the bit numbers (operation
    codes) of the authorized-operations fields; every supported one without an
    authorizer. Asked to describe, not to act: neither logged nor counted."""
    supported = SUPPORTED_OPERATIONS[resource_type]
    acls = context.acls
    if acls is None:
        return {int(operation) for operation in supported}
    principal, host = caller(request)
    authorizer = acls.authorizer
    return {
        int(operation)
        for operation in supported
        if authorizer.authorize(principal, host, operation, resource_type, name)
    }


def operations_field(bits: set[int]) -> int:
    """An authorized-operations bit set as the int32 the fields typed int32 carry."""
    value = 0
    for bit in bits:
        value |= 1 << bit
    return value - (1 << 32) if value >= 1 << 31 else value

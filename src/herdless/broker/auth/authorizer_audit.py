"""The authorizer log and decision counts of one broker.

Decisions are logged to `herdless.authorizer`, as Kafka's kafka.authorizer.logger:
denials at INFO (limited per principal and host, so that a client retrying a refused
request cannot flood the log), allowances at DEBUG, in Kafka's own words so that the
lines read as operators know them. The broker's context holds one; broker/handlers/authorization.py
reports every decision a request depends on to it.
"""

from __future__ import annotations

import logging
from collections import Counter

from herdless.broker.limited_warnings import LimitedWarnings
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request
from herdless.security.acls import AclOperation, ResourceType
from herdless.security.principal import KafkaPrincipal

log = logging.getLogger("herdless.authorizer")

# (operation, resource type, allowed) -> decisions, each resource a request names
# counted once per mention (Kafka's resourceRefCount).
DecisionCounts = Counter[tuple[AclOperation, ResourceType, bool]]


class AuthorizerAudit:
    """The authorizer log and the decision counts of one broker."""

    def __init__(self) -> None:
        self.counts: DecisionCounts = Counter()
        self._denials = LimitedWarnings(log, level=logging.INFO)

    def decided(
        self,
        request: Request,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        allowed: bool,
        count: int = 1,
        log_denied: bool = True,
        pattern: str = "LITERAL",
    ) -> None:
        self.counts[operation, resource_type, allowed] += count
        if allowed:
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "%s",
                    _line(
                        request,
                        principal,
                        host,
                        operation,
                        resource_type,
                        pattern,
                        name,
                        True,
                        count,
                    ),
                )
        elif log_denied:
            self._denials.warn(
                f"denials of {principal} from {host}",
                _line(
                    request, principal, host, operation, resource_type, pattern, name, False, count
                ),
            )

    def sweep(self) -> None:
        """Summarise the denials not logged in the windows that ended (periodically)."""
        self._denials.sweep()


def _line(
    request: Request,
    principal: KafkaPrincipal,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    pattern: str,
    name: str,
    allowed: bool,
    count: int,
) -> str:
    return (
        f"Principal = {principal} is {'Allowed' if allowed else 'Denied'} Operation ="
        f" {operation.kafka_name} from host = {host} on resource ="
        f" {resource_type.kafka_name}:{pattern}:{name} for request = {api_name(request.api_key)}"
        f" with resourceRefCount = {count}"
    )


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).kafka_name
    except ValueError:
        return str(api_key)
